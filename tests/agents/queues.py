"""Two agents of two teams that share a Temporal namespace (tests/test_worker_queues.py)."""

from rein import Agent, MockProvider

calculator = Agent(provider=MockProvider([]), name="calculator")
"""Every run answers MockProvider's exhausted-script text."""
mycalc = Agent(provider=MockProvider([]), name="mycalc")
