"""Content hashes that let a model-call input refer to messages instead of carrying them.

The workflow and the worker hash the same Message the same way, and chain the hashes
over the conversation: a worker serves a cached conversation only when its chain digest
equals the one the workflow sent, so it can never hand a model another run's (or a
pre-reset) conversation, whatever the workflow id. Pure: safe in workflow code.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

from rein.ir import Message

EMPTY = ""
REF_CHARS = 12
"""A model-call input names a worker-produced message by this prefix of its hash: the chain
digest (full hashes) still verifies the whole conversation, so a short reference suffices."""


def message_hash(message: Message) -> str:
    return hashlib.sha256(message.model_dump_json().encode()).hexdigest()[:32]


def ref(message_hash: str) -> str:
    return message_hash[:REF_CHARS]


def extend(digest: str, hashes: Iterable[str]) -> str:
    """The chain digest of a conversation with `digest` after appending messages with these hashes."""
    for h in hashes:
        digest = hashlib.sha256(f"{digest}:{h}".encode()).hexdigest()[:32]
    return digest


def conversation_digest(messages: Iterable[Message]) -> str:
    return extend(EMPTY, (message_hash(m) for m in messages))
