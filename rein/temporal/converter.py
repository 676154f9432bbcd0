"""rein's data converter: pydantic JSON, plus the payload codec and external storage when configured.

Every Client and Worker rein builds (and every one ReinPlugin is installed into) gets its
converter from here, so the engine, `worker.py`, `rein.client.connect` and the CLI always
agree on how payloads are encoded, encrypted and offloaded.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.converter import DataConverter

from rein.temporal.codec import NoKeyCodec, codec_from_env
from rein.temporal.storage import storage_from_env

if TYPE_CHECKING:
    from temporalio.client import Client


def rein_data_converter(existing: DataConverter | None = None) -> DataConverter:
    """Pydantic payloads; keeps a codec/storage `existing` already has, else takes them from the environment."""
    kept = existing.payload_codec if existing is not None else None
    # NoKeyCodec stands for "no codec": the environment may name a key now.
    codec = kept if kept is not None and not isinstance(kept, NoKeyCodec) else (codec_from_env() or NoKeyCodec())
    storage = (
        existing.external_storage if existing is not None and existing.external_storage else storage_from_env()
    )
    return dataclasses.replace(pydantic_data_converter, payload_codec=codec, external_storage=storage)


def has_rein_converter(client: Client) -> bool:
    """Whether `client` already encodes payloads as rein does (pydantic JSON)."""
    return client.data_converter.payload_converter_class is pydantic_data_converter.payload_converter_class
