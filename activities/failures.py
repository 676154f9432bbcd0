"""How rein's activities fail (rein.core.failures says what each kind means).

A vendor's error, a tool's error and a client's mistake leave an activity as the ApplicationError it
chose (rein.activities.calls). Any other exception escaping one is a bug in rein's own code: it leaves
as a retryable `ReinBug`, which Temporal retries with backoff and the run then schedules again until
a fixed build takes it. A tool that already ran when the bug struck is not run again: its result
leaves with the failure (non-retryable), and the run takes it as the call's result.
"""

from __future__ import annotations

import contextvars
import functools
import traceback
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

from temporalio import activity
from temporalio.exceptions import ApplicationError, FailureError

from rein.blueprint.secrets import scrub
from rein.core.failures import REIN_BUG
from rein.core.ir import ToolResult

R = TypeVar("R")
T = TypeVar("T")


class VendorFailure(Exception):
    """What the model's provider raised (its `__cause__`), carried through rein's own code: a vendor's
    failure, which the model activity turns into its retry policy's (rein.activities.calls.model_failure)."""


async def from_vendor(call: Awaitable[T]) -> T:
    """`await call` of a provider: what it raises is the vendor's, not a bug of rein's."""
    try:
        return await call
    except Exception as exc:
        raise VendorFailure(str(exc)) from exc


async def vendor_stream(chunks: AsyncIterator[T]) -> AsyncIterator[T]:
    """A provider's stream: what its iteration raises is the vendor's (rein's handling of each chunk is not)."""
    iterator = chunks.__aiter__()
    while True:
        try:
            chunk = await iterator.__anext__()
        except StopAsyncIteration:
            return
        except Exception as exc:
            raise VendorFailure(str(exc)) from exc
        yield chunk

_TOOL_RAN: contextvars.ContextVar[ToolResult | None] = contextvars.ContextVar("rein_tool_ran", default=None)


def tool_ran(result: ToolResult) -> None:
    """The call's tool has run and returned `result` (secrets scrubbed): a bug after this must not run it again."""
    _TOOL_RAN.set(result)


def rein_code(fn: Callable[..., Awaitable[R]]) -> Callable[..., Awaitable[R]]:
    """Mark an activity's failures: what its code did not choose to raise is rein's bug."""

    @functools.wraps(fn)
    async def activity_body(*args: Any, **kwargs: Any) -> R:
        token = _TOOL_RAN.set(None)
        try:
            return await fn(*args, **kwargs)
        except FailureError:
            raise  # chosen: a vendor's, tool's or input error, a cancellation
        except Exception as exc:
            ran = _TOOL_RAN.get()
            info = activity.info()
            activity.logger.error("bug in rein's %s activity (attempt %d):\n%s", info.activity_type, info.attempt,
                                  scrub(traceback.format_exc()))
            raise ApplicationError(
                scrub(f"a bug in rein's {info.activity_type} activity: {type(exc).__name__}: {exc}"[:2000]),
                *([ran.model_dump(mode="json")] if ran is not None else []),
                type=REIN_BUG,
                non_retryable=ran is not None,  # the tool ran: its result is the call's, never run it again
            ) from None  # its message is scrubbed; the raw exception's would reach history
        finally:
            _TOOL_RAN.reset(token)

    return activity_body
