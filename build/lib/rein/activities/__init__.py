from rein.activities.agents import AgentActivities

__all__ = ["AgentActivities"]
