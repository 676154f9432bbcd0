"""rein's data converter: pydantic JSON, plus the payload codec and external storage when configured.

Every Client and Worker rein builds (and every one ReinPlugin is installed into) gets its
converter from here, so the engine, `worker.py`, `rein.client.connect` and the CLI always
agree on how payloads are encoded, encrypted and offloaded.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from pydantic import TypeAdapter
from temporalio.api.common.v1 import Payload
from temporalio.contrib.pydantic import PydanticJSONPlainPayloadConverter, PydanticPayloadConverter
from temporalio.converter import DataConverter

from rein.temporal.codec import NoKeyCodec, codec_from_env
from rein.temporal.storage import storage_from_env

if TYPE_CHECKING:
    from temporalio.client import Client


SHARED_TYPE_ROOTS = ("rein", "builtins")
"""Packages whose types are one object per worker process (rein's pass through the workflow sandbox)."""


@functools.lru_cache(maxsize=256)
def _process_type_adapter(type_hint: Any) -> TypeAdapter[Any]:
    return TypeAdapter(type_hint)


class _ProcessCachedJSON(PydanticJSONPlainPayloadConverter):
    """Pydantic JSON whose TypeAdapters for rein's own types and builtins live as long as the process.

    temporalio makes a payload converter per workflow run, so the contrib's per-converter cache built
    AgentInput's, AgentDescription's and ModelReply's adapters again in every run: about 1 ms of a
    one-call run's workflow CPU. Other types keep the per-run cache: a class the sandbox re-imports
    for each run would keep that run's modules alive in a process-wide cache."""

    def from_payload(self, payload: Payload, type_hint: type | None = None) -> Any:
        if type_hint is None or type_hint is Any or (
            isinstance(type_hint, type) and type_hint.__module__.partition(".")[0] in SHARED_TYPE_ROOTS
        ):
            return _process_type_adapter(Any if type_hint is None else type_hint).validate_json(payload.data)
        return super().from_payload(payload, type_hint)


class ReinPayloadConverter(PydanticPayloadConverter):
    """temporalio's pydantic payload converter (the same JSON on the wire) with process-wide adapters."""

    def __init__(self) -> None:
        super().__init__()
        json = _ProcessCachedJSON()
        self.converters = {**self.converters, json.encoding.encode(): json}  # same place, same encoding


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
