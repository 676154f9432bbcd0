"""Agents whose model fails the way vendors do, for the one-line error tests (tests/test_cli_one_line.py).

    rein run tests.agents.failing:rejected "hi"    a 401: the run fails, not retried
    rein run tests.agents.failing:outage "hi"      a 503 on every call: retried, then an `error` interrupt
"""

from __future__ import annotations

from rein import Agent, LoopConfig
from tests.support.providers import AuthFailed, OutageProvider, Unavailable

rejected = Agent(provider=OutageProvider(AuthFailed, "invalid api key"), name="failing-rejected")
outage = Agent(provider=OutageProvider(Unavailable, "the vendor is down"), name="failing-outage",
               config=LoopConfig(model_attempts=2))
