"""A thread's shared state: one JSON value the agent's tools and the thread's pages both read and change (pure).

The thread holds it with a version that counts its changes. A tool reads it through `ToolContext.state` and
changes it in place; the change travels back in the tool's result as an RFC 6902 JSON Patch (made with
`jsonpatch`), and the run applies the patches of a batch in the order the calls were made. A page (AG-UI's
`state`, the AI SDK's `state` field) or `ReinClient.set_state` replaces it whole, naming the version it read: a
write based on an older version is refused (a tool changed it meanwhile). Readers of the thread's stream see each
change as a `state` event with the patch, the new value and its version (AG-UI's STATE_DELTA, the AI SDK's
`data-state` part). At most MAX_STATE_BYTES of JSON.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import jsonpatch
from pydantic import BaseModel, ConfigDict, Field

MAX_STATE_BYTES = 64 * 1024
"""The largest state a thread holds, as compact UTF-8 JSON: it travels with every change on the stream."""
STATE_UPDATE = "rein.set_state"
STATE_QUERY = "rein.state"
STATE_EVENT = "state"
"""The name of the stream `event` a change publishes: `{"version", "patch", "value"}`."""


class SharedState(BaseModel):
    """The `rein.state` query's answer: the value (`{}` until something sets it) and its version (0: never set)."""

    value: Any = Field(default_factory=dict)
    version: int = Field(default=0, ge=0)


class SetState(BaseModel):
    """The `rein.set_state` update's argument: the whole new value, and the version the writer read."""

    model_config = ConfigDict(extra="ignore")

    value: Any
    version: int = Field(ge=0, le=2**62)
    by: str = Field(default="", max_length=200)


class StateError(ValueError):
    """A state that cannot be taken: too large, not JSON, or a patch that does not apply."""


def size(value: Any) -> int:
    """The value's size as compact UTF-8 JSON; StateError when it is not JSON."""
    try:
        return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode())
    except (TypeError, ValueError) as exc:
        raise StateError(f"the state must be JSON: {exc}") from None


def check(value: Any) -> None:
    """StateError unless the value is JSON of at most MAX_STATE_BYTES."""
    found = size(value)
    if found > MAX_STATE_BYTES:
        raise StateError(f"the state would be {found} bytes of JSON, more than the limit of {MAX_STATE_BYTES}")


def diff(old: Any, new: Any) -> list[dict[str, Any]]:
    """The RFC 6902 patch from `old` to `new` (empty: no change)."""
    return list(jsonpatch.make_patch(old, new).patch)


def apply(value: Any, patch: list[dict[str, Any]]) -> Any:
    """`value` with `patch` applied (a new value; `value` is not changed); StateError when it does not apply."""
    try:
        return jsonpatch.apply_patch(copy.deepcopy(value), patch)
    except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException, TypeError, ValueError) as exc:
        raise StateError(f"the change does not apply to the thread's state: {exc}") from None


def event(value: Any, version: int, patch: list[dict[str, Any]]) -> dict[str, Any]:
    """The stream event's data for a change."""
    return {"version": version, "patch": patch, "value": value}
