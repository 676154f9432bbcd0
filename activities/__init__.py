from activities.agents import AgentActivities

__all__ = ["AgentActivities"]
