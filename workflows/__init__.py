from rein.workflows.agent import AgentWorkflow
from rein.workflows.describe import DescribeAgentWorkflow
from rein.workflows.policy import PolicyWorkflow, VersionedPolicyWorkflow
from rein.workflows.replay_check import ReplayCheckWorkflow
from rein.workflows.scheduled_message import ScheduledMessageWorkflow

__all__ = ["AgentWorkflow", "DescribeAgentWorkflow", "PolicyWorkflow", "ReplayCheckWorkflow", "ScheduledMessageWorkflow",
           "VersionedPolicyWorkflow"]
