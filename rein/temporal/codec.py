"""Payload encryption: an AES-GCM PayloadCodec configured by REIN_CODEC_KEY.

    REIN_CODEC_KEY=<base64 of 32 bytes>                    one key (its id is derived from it)
    REIN_CODEC_KEY=2026b:<base64>,2026a:<base64>           rotation: the first encrypts, all decrypt

Every payload (workflow input, results, signals, activity inputs and outputs, failures'
details) is encrypted before it leaves the process, so Temporal's history holds only
ciphertext; each payload names the id of the key that encrypted it. Workers, clients and
the codec server (`python -m rein.temporal.codec_server`) need the same keys.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Iterable, Sequence

from temporalio.api.common.v1 import Payload
from temporalio.converter import PayloadCodec

from rein.core.errors import CodecKeyError  # noqa: F401  (defined in core: rein.core.log names it)
from rein.core.setting_types import derived_id  # noqa: F401  (public here too)
from rein.core.setting_types import parse_keys as parsed_keys

ENV_VAR = "REIN_CODEC_KEY"
ENCODING = b"binary/encrypted"
KEY_ID = "encryption-key-id"
NONCE_BYTES = 12



class AesGcmCodec(PayloadCodec):
    """Encrypts with the first key; decrypts with whichever key a payload names."""

    def __init__(self, keys: Sequence[tuple[str, bytes]]):
        if not keys:
            raise CodecKeyError("AesGcmCodec needs at least one key")
        for key_id, key in keys:
            if len(key) != 32:
                raise CodecKeyError(f"key {key_id!r} is {len(key)} bytes; AES-256-GCM needs 32")
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM  # here: a process without a key never loads it

        self.key_id = keys[0][0]
        self._ciphers = {key_id: AESGCM(key) for key_id, key in keys}

    def __repr__(self) -> str:  # never the keys
        return f"AesGcmCodec(encrypting_key={self.key_id!r}, keys={sorted(self._ciphers)})"

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        cipher = self._ciphers[self.key_id]
        out = []
        for payload in payloads:
            nonce = os.urandom(NONCE_BYTES)
            data = nonce + cipher.encrypt(nonce, payload.SerializeToString(), None)
            out.append(Payload(metadata={"encoding": ENCODING, KEY_ID: self.key_id.encode()}, data=data))
        return out

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        out = []
        for payload in payloads:
            if payload.metadata.get("encoding") != ENCODING:
                out.append(payload)  # written before encryption was enabled: readable as is
                continue
            key_id = payload.metadata.get(KEY_ID, b"").decode()
            cipher = self._ciphers.get(key_id)
            if cipher is None:
                raise CodecKeyError(
                    f"a payload is encrypted with key {key_id!r}, which is not in {ENV_VAR} here "
                    f"(have: {', '.join(sorted(self._ciphers))})"
                )
            nonce, body = payload.data[:NONCE_BYTES], payload.data[NONCE_BYTES:]
            out.append(Payload.FromString(cipher.decrypt(nonce, body, None)))
        return out


def parse_keys(value: str) -> list[tuple[str, bytes]]:
    """`base64` or `id:base64[,id:base64...]` -> [(id, key)], the encrypting key first (REIN_CODEC_KEY's format,
    parsed as rein.settings parses the setting)."""
    try:
        return list(parsed_keys(value))
    except ValueError as err:
        raise CodecKeyError(f"{ENV_VAR}: {err}") from None


def new_key() -> str:
    """A fresh key in REIN_CODEC_KEY's format (base64 of 32 random bytes)."""
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    return base64.b64encode(AESGCM.generate_key(bit_length=256)).decode()


def codec_from_keys(value: str | Iterable[tuple[str, bytes]]) -> AesGcmCodec:
    return AesGcmCodec(parse_keys(value) if isinstance(value, str) else list(value))


def codec_from_env() -> PayloadCodec | None:
    """The codec the REIN_CODEC_KEY setting (rein.settings) asks for, or None (payloads unencrypted)."""
    from rein.settings import current

    keys = current().codec_key
    return AesGcmCodec(keys) if keys else None


class NoKeyCodec(PayloadCodec):
    """No REIN_CODEC_KEY here: payloads go out as they are; an encrypted one read back is a
    CodecKeyError naming the variable (temporalio alone says `Unknown payload encoding`)."""

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return list(payloads)

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        for payload in payloads:
            if payload.metadata.get("encoding") == ENCODING:
                key_id = payload.metadata.get(KEY_ID, b"").decode()
                raise CodecKeyError(
                    f"this run's data is encrypted (key {key_id!r}) and {ENV_VAR} is not set here; "
                    f"set {ENV_VAR} to the key the run's workers use"
                )
        return list(payloads)
