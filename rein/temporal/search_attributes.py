"""rein's search attributes on the namespace: found once per worker, added when missing and allowed."""

from __future__ import annotations

import asyncio
import logging

from temporalio import activity
from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest, ListSearchAttributesRequest
from temporalio.client import Client

from rein.contract import SEARCH_ATTRIBUTES

log = logging.getLogger("rein.worker")

_INDEXED = {
    "Keyword": IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD,
    "Int": IndexedValueType.INDEXED_VALUE_TYPE_INT,
    "Double": IndexedValueType.INDEXED_VALUE_TYPE_DOUBLE,
}


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
    return [k for k in SEARCH_ATTRIBUTES if k in have]
