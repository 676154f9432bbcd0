from rein.workflows.agent import AgentWorkflow

__all__ = ["AgentWorkflow"]
