"""rein's search attributes on a namespace: which it has (asked once per client), adding the missing
ones where a worker may, and the values a new run starts with."""

from __future__ import annotations

import asyncio
import logging
import weakref
from typing import Any

from temporalio import activity
from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import (
    AddSearchAttributesRequest,
    ListSearchAttributesRequest,
)
from temporalio.client import Client
from temporalio.common import SearchAttributePair, TypedSearchAttributes
from temporalio.service import RPCError

from rein.core.contract import SEARCH_ATTRIBUTES, SEARCH_KEYS

log = logging.getLogger("rein.worker")

_INDEXED = {
    "Keyword": IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD,
    "Int": IndexedValueType.INDEXED_VALUE_TYPE_INT,
    "Double": IndexedValueType.INDEXED_VALUE_TYPE_DOUBLE,
}
_HAVE: weakref.WeakKeyDictionary[Client, set[str]] = weakref.WeakKeyDictionary()
"""Per client: which of rein's search attributes its namespace has (the one cache)."""


class SearchAttributeRegistry:
    """Which of rein's search attributes the namespace has, checked once per worker, lazily.

    Called from an activity, it uses that activity's client; a server that cannot
    tell (the time-skipping test server) simply gets no search attribute upserts.
    """

    def __init__(self, client: Client | None = None):
        self.client = client
        self._available: list[str] | None = None
        self._lock = asyncio.Lock()

    async def __call__(self) -> list[str]:
        if self._available is None:
            async with self._lock:
                if self._available is None:
                    self._available = await ensure_search_attributes(self.client or activity.client())
        return self._available

    def reset(self) -> None:
        self._available = None


async def ensure_search_attributes(client: Client) -> list[str]:
    have: set[str] = set()
    try:
        listed = await client.operator_service.list_search_attributes(
            ListSearchAttributesRequest(namespace=client.namespace)
        )
        have = set(listed.custom_attributes)
        missing = {k: v for k, v in SEARCH_ATTRIBUTES.items() if k not in have}
        if missing:
            await client.operator_service.add_search_attributes(
                AddSearchAttributesRequest(
                    namespace=client.namespace,
                    search_attributes={k: _INDEXED[v] for k, v in missing.items()},
                )
            )
            have |= set(missing)
    except Exception as exc:  # no permission, or a server without the operator API
        log.warning("rein search attributes unavailable (%s); runs continue without them", exc)
    _HAVE[client] = {k for k in SEARCH_ATTRIBUTES if k in have}
    return [k for k in SEARCH_ATTRIBUTES if k in have]


async def namespace_attributes(client: Client) -> set[str]:
    """Which of rein's search attributes the client's namespace has; asked once per client."""
    have = _HAVE.get(client)
    if have is None:
        try:
            listed = await client.operator_service.list_search_attributes(
                ListSearchAttributesRequest(namespace=client.namespace)
            )
            have = {name for name in SEARCH_ATTRIBUTES if name in listed.custom_attributes}
        except RPCError:
            have = set()
        _HAVE[client] = have
    return have


async def start_search_attributes(
    client: Client, agent: str, fork_of: str | None = None, tenant: str | None = None, eval_of: str | None = None
) -> TypedSearchAttributes | None:
    """ReinAgent/ReinStatus for a new run, so its workflow need not upsert them at start. The counters
    come with its first upsert, as in a run a plain client started: zeros would cost every start ~130 bytes.

    Only those the namespace has: a missing one must never fail a start.
    """
    have = await namespace_attributes(client)
    values: dict[str, Any] = {"ReinAgent": agent, "ReinStatus": "running"}
    if fork_of is not None:
        values["ReinForkOf"] = fork_of
    if tenant:
        values["ReinTenant"] = tenant
    if eval_of is not None:
        values["ReinEvalOf"] = eval_of
    pairs = [SearchAttributePair(SEARCH_KEYS[name], value) for name, value in values.items() if name in have]
    return TypedSearchAttributes(pairs) if pairs else None
