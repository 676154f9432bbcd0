"""Waiting for something to become true, always with a bound and a message naming what never came.

The bounds are generous deadlines for a slow shared machine, never assertions about speed.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Callable
from typing import Any

from temporalio.client import WorkflowHandle
from temporalio.service import RPCError


async def poll(
    check: Callable[[], Any],
    what: str,
    timeout: float = 30.0,
    interval: float = 0.05,
    ignore: tuple[type[BaseException], ...] = (),
) -> Any:
    """Call `check()` (sync or async) until it returns something truthy, and return that.

    Exceptions of the `ignore` types (e.g. a server restarting, visibility not ready) count as
    "not yet"; any other exception fails at once.
    """
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = check()
            if inspect.isawaitable(last):
                last = await last
        except ignore as exc:
            last = exc
        else:
            if last:
                return last
        await asyncio.sleep(interval)
    raise AssertionError(f"timed out after {timeout:g}s waiting for {what}; last: {last!r}")


def wait_until(check: Callable[[], Any], what: str, timeout: float = 30.0, interval: float = 0.1) -> Any:
    """`poll` for code outside an event loop (processes, files): `check()` until truthy."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:g}s waiting for {what}; last: {last!r}")


async def wait_status(
    handle: WorkflowHandle,
    status: str | None = None,
    until: Callable[[dict], bool] | None = None,
    timeout: float = 30.0,
) -> dict:
    """Query the run's `status` until its status is `status` (if given) and `until(view)` holds."""

    seen: list[dict] = []

    async def check() -> dict | None:
        view = await handle.query("status")
        seen[:] = [view]
        ok = (status is None or view["status"] == status) and (until is None or until(view))
        return view if ok else None

    # RPCError: the first workflow task has not run yet, so nothing answers the query.
    what = f"{handle.id} to reach status={status!r}{' and its condition' if until else ''}"
    try:
        return await poll(check, what, timeout, ignore=(RPCError,))
    except AssertionError as timed_out:
        raise AssertionError(f"{timed_out}; last status: {seen[0] if seen else None}") from None


async def rein_status_is(ops: Any, run_id: str, status: str) -> bool:
    """Whether rein's client (`ReinClient`) sees run `run_id` in `status` now."""
    return (await ops.status(run_id)).status == status
