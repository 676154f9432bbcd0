from rein.workflows.agent import AgentWorkflow
from rein.workflows.describe import DescribeAgentWorkflow

__all__ = ["AgentWorkflow", "DescribeAgentWorkflow"]
