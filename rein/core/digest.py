"""Content hashes that let a model-call input refer to messages instead of carrying them.

The workflow and the worker hash the same Message the same way, and chain the hashes
over the conversation: a worker serves a cached conversation only when its chain digest
equals the one the workflow sent, so it can never hand a model another run's (or a
pre-reset) conversation, whatever the workflow id. Pure: safe in workflow code.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

from rein.core.ir import Message, ToolCall

EMPTY = ""
HASH_CHARS = 16
"""64 bits of SHA-256: a check against serving the wrong conversation, not a signature."""
REF_CHARS = 8
"""A model-call input names a worker-produced message by this prefix of its hash (among the
few the worker holds for the run): the chain digest still verifies the whole conversation."""


def message_hash(message: Message) -> str:
    return hashlib.sha256(message.model_dump_json().encode()).hexdigest()[:HASH_CHARS]


def call_hash(call: ToolCall) -> str:
    """A tool call's hash: a run_tool input names the call by its `ref` (the worker holds the call)."""
    return hashlib.sha256(call.model_dump_json().encode()).hexdigest()[:HASH_CHARS]


def ref(message_hash: str) -> str:
    return message_hash[:REF_CHARS]


def extend(digest: str, hashes: Iterable[str]) -> str:
    """The chain digest of a conversation with `digest` after appending messages with these hashes."""
    for h in hashes:
        digest = hashlib.sha256(f"{digest}:{h}".encode()).hexdigest()[:HASH_CHARS]
    return digest


def conversation_digest(messages: Iterable[Message]) -> str:
    return extend(EMPTY, (message_hash(m) for m in messages))
