"""What a failure is, and who acts on it: the one place that classifies rein's failures.

- **vendor**: the model vendor's error (rate limits, outages, timeouts). The model activity's retry
  policy retries it (after the vendor's Retry-After), then the run waits for `retry` (waiting_retry).
- **tool**: the user's tool raised. Its result goes to the model, or Temporal retries it where the
  tool asked (`@tool(retries=)`).
- **input**: the client's input or the agent's definition is wrong (an unknown agent, a bad override,
  a payload too large to record). The run fails with the reason.
- **bug**: anything else, in rein's own code. In workflow code it fails the workflow task; in an
  activity it is a retryable `ReinBug` failure that Temporal retries with backoff, and the run then
  schedules the call again on a durable timer, for as long as it takes. Either way the run stays
  open, says it is `stuck` and why, and the fixed build carries it on with nobody acting.

Activities say which is which by how they fail (activities.failures): a vendor's, tool's or input
error is an ApplicationError they chose; any other exception escaping an activity is rein's bug.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio.exceptions import ActivityError, ApplicationError

REIN_BUG = "ReinBug"
"""The ApplicationError type of a failure caused by a bug in rein's own activity code (permanent data)."""

BUG_RETRY_DELAYS_S = (5.0, 15.0, 30.0, 60.0, 120.0, 300.0)
"""How long a run stuck on a bug in rein's activity code waits before it schedules the call again,
after the activity's own retries (the last value repeats): a fixed build deployed meanwhile takes it."""


def is_bug(err: BaseException) -> bool:
    """An activity failure caused by a bug in rein's own code (retried until a fixed build takes it)."""
    cause = err.cause if isinstance(err, ActivityError) else err
    return isinstance(cause, ApplicationError) and cause.type == REIN_BUG


def salvaged(err: BaseException) -> Any | None:
    """What a tool returned before a bug in rein's code failed its activity (the tool ran: its result is
    the call's, and the tool does not run again), or None."""
    cause = err.cause if isinstance(err, ActivityError) else err
    if isinstance(cause, ApplicationError) and cause.type == REIN_BUG and cause.details:
        return cause.details[0]
    return None


def bug_retry_delay(waits: int) -> timedelta:
    """The durable wait before scheduling again a call that failed on a bug for the `waits`-th time."""
    return timedelta(seconds=BUG_RETRY_DELAYS_S[min(waits, len(BUG_RETRY_DELAYS_S) - 1)])
