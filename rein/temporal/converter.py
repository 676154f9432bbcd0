"""rein's data converter: pydantic JSON, plus the payload codec and external storage when configured.

Every Client and Worker rein builds (and every one ReinPlugin is installed into) gets its
converter from here, so the engine, `worker.py`, `rein.client.connect` and the CLI always
agree on how payloads are encoded, encrypted and offloaded.
"""

from __future__ import annotations

import functools
import types
import typing
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pydantic import TypeAdapter
from pydantic_core import to_json
from temporalio.api.common.v1 import Payload
from temporalio.contrib.pydantic import PydanticPayloadConverter
from temporalio.converter import (
    CompositePayloadConverter,
    DataConverter,
    DefaultPayloadConverter,
    EncodingPayloadConverter,
    JSONPlainPayloadConverter,
)

from rein.temporal.codec import NoKeyCodec, codec_from_env
from rein.temporal.storage import storage_from_env

if TYPE_CHECKING:
    from temporalio.client import Client


SHARED_TYPE_ROOTS = ("rein", "builtins")
"""Packages whose types are one object per worker process (rein's pass through the workflow sandbox)."""


@functools.lru_cache(maxsize=256)
def _process_type_adapter(type_hint: Any) -> TypeAdapter[Any]:
    return TypeAdapter(type_hint)


class _ProcessCachedJSON(EncodingPayloadConverter):
    """Pydantic JSON whose TypeAdapters for rein's own types and builtins live as long as the process.

    The same JSON as temporalio.contrib.pydantic's PydanticJSONPlainPayloadConverter
    (`pydantic_core.to_json`), which it replaces. temporalio makes a payload converter per workflow
    run, per activity and per storage context (53 in a 3-iteration run), so the contrib's
    per-converter cache built AgentInput's, AgentDescription's and ModelReply's adapters again in
    every run (about 1 ms of a one-call run's workflow CPU), and its constructor (a SchemaSerializer
    and a cache wrapper) ran each time. Other types keep a per-converter cache, made on first use: a
    class the sandbox re-imports for each run would keep that run's modules alive in a process-wide
    cache."""

    def __init__(self) -> None:
        self._own_adapters: Callable[[Any], TypeAdapter[Any]] | None = None

    @property
    def encoding(self) -> str:
        return "json/plain"

    def to_payload(self, value: Any) -> Payload | None:
        return Payload(metadata={"encoding": b"json/plain"}, data=to_json(value))

    def from_payload(self, payload: Payload, type_hint: type | None = None) -> Any:
        if type_hint is None or _process_wide(type_hint):
            return _process_type_adapter(Any if type_hint is None else type_hint).validate_json(payload.data)
        try:
            hash(type_hint)
        except TypeError:  # an unhashable hint: no cache, as the contrib does
            return TypeAdapter(type_hint).validate_json(payload.data)
        if self._own_adapters is None:
            self._own_adapters = functools.lru_cache(maxsize=1024)(TypeAdapter)
        return self._own_adapters(type_hint).validate_json(payload.data)


def _process_wide(hint: Any) -> bool:
    """Whether `hint` is built only of types that live as long as the process (`ToolResult | str`, `list[Step]`)."""
    if hint is Any or hint is None or hint is type(None):
        return True
    if isinstance(hint, type) and not typing.get_args(hint):
        return hint.__module__.partition(".")[0] in SHARED_TYPE_ROOTS
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is None or not args:
        return False
    return (origin in (typing.Union, types.UnionType) or _process_wide(origin)) and all(_process_wide(a) for a in args)


class ReinPayloadConverter(PydanticPayloadConverter):
    """temporalio's pydantic payload converter (the same JSON on the wire) with process-wide adapters."""

    def __init__(self) -> None:
        # Not PydanticPayloadConverter.__init__: it builds a JSON converter this one replaces, and
        # temporalio builds a payload converter for every run, activity and storage context.
        CompositePayloadConverter.__init__(self, *(
            _ProcessCachedJSON() if isinstance(c, JSONPlainPayloadConverter) else c
            for c in DefaultPayloadConverter.default_encoding_payload_converters
        ))


def rein_data_converter(existing: DataConverter | None = None) -> DataConverter:
    """Pydantic payloads; keeps a codec/storage `existing` already has, else takes them from the environment."""
    kept = existing.payload_codec if existing is not None else None
    # NoKeyCodec stands for "no codec": the environment may name a key now.
    codec = kept if kept is not None and not isinstance(kept, NoKeyCodec) else (codec_from_env() or NoKeyCodec())
    storage = (
        existing.external_storage if existing is not None and existing.external_storage else storage_from_env()
    )
    return DataConverter(payload_converter_class=ReinPayloadConverter, payload_codec=codec, external_storage=storage)


def has_rein_converter(client: Client) -> bool:
    """Whether `client` already has rein's converter (a plain pydantic one gets the process-wide adapters too)."""
    return issubclass(client.data_converter.payload_converter_class, ReinPayloadConverter)
