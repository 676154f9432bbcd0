"""Each run's conversation as this worker last saw it (`Conversations`), so model calls carry only references.

Held by AgentActivities (rein.activities.agents); the steps with middleware and compaction (rein.activities.steps)
read and rewrite it too.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from rein.core.contract import ModelCallInput, StepRequest
from rein.core.digest import EMPTY, call_hash, extend, message_hash, ref
from rein.core.ir import Message, ToolCall
from rein.core.session import Session


class _Conversation:
    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.digest: str | None = EMPTY
        """rein.core.digest chain digest of `messages` (None: unknown, after a rewrite by a step)."""
        self.token = ""
        """The run's conversation token for steps with middleware and compaction (see StepRequest)."""
        self.produced: dict[str, Message] = {}
        """Messages this worker produced for the run, by rein.core.digest hash, until a model call refers to them."""
        self.calls: dict[str, ToolCall] = {}
        """The tool calls of the last model reply this worker produced for the run, by `ref` of call_hash."""
        self.version = ""
        """The agent version that model call was sent with: its tool calls run under it."""


class Conversations:
    """Each run's conversation as this worker last saw it, so model calls carry only references.

    A plain model call's cached conversation is used only when its chain digest (rein.core.digest)
    matches the one the workflow sent, so a reused workflow id or a reset run can never be
    served another conversation. Steps with middleware (and compaction) tag the conversation
    with a token that changes when they rewrite it. Bounded like the worker's workflow cache
    (least recently used runs go first); a run's entry goes when its model gives a final
    answer. A miss costs one `session` query to the workflow.
    """

    def __init__(self, capacity: int = 1000):
        self.capacity = max(capacity, 1)
        self._runs: OrderedDict[str, _Conversation] = OrderedDict()
        self.rebuilds = 0
        """How many conversations were read back from workflows (cache misses)."""

    def _entry(self, run_id: str) -> _Conversation:
        entry = self._runs.pop(run_id, None) or _Conversation()
        self._runs[run_id] = entry
        while len(self._runs) > self.capacity:
            self._runs.popitem(last=False)
        return entry

    def produced(self, run_id: str, message: Message, version: str = "") -> None:
        entry = self._entry(run_id)
        entry.produced[ref(message_hash(message))] = message
        if message.tool_calls:
            entry.calls = {ref(call_hash(c)): c for c in message.tool_calls}
            entry.version = version

    def call(self, run_id: str, key: str) -> tuple[ToolCall | None, str]:
        """A tool call this worker produced for the run, by its reference (None: not held here), and
        the agent version its model call was sent with."""
        entry = self._runs.get(run_id)
        if entry is None or key not in entry.calls:
            return None, ""
        return entry.calls[key], entry.version

    def drop(self, run_id: str) -> None:
        self._runs.pop(run_id, None)

    def remember_plain(self, run_id: str, messages: list[Message]) -> None:
        """The run's conversation is now `messages`, which plain model calls continue by chain digest."""
        entry = self._entry(run_id)
        entry.messages, entry.digest, entry.produced = messages, extend(EMPTY, [message_hash(m) for m in messages]), {}

    def remember(self, run_id: str, conversation: str, messages: list[Message]) -> None:
        """The run's conversation is now `messages` (a step produced or rewrote them)."""
        entry = self._entry(run_id)
        entry.messages, entry.token, entry.digest, entry.produced = messages, conversation, None, {}

    async def messages_for(self, request: ModelCallInput | StepRequest) -> list[Message]:
        entry = self._entry(request.run_id)  # the workflow id: the conversation carries over continue-as-new
        digest = request.digest if isinstance(request, ModelCallInput) else ""  # a StepRequest has none
        if digest and isinstance(request, ModelCallInput):
            messages = self._extended(entry, request)
        else:
            messages = self._tokened(entry, request)
        if messages is None:
            self.rebuilds += 1
            if digest:  # where the model call stands is the prefix with its digest
                messages = _prefix_with_digest(await _conversation_from_workflow(request, whole=True), digest)
            else:
                messages = await _conversation_from_workflow(request)
        entry.messages, entry.produced = messages, {}
        entry.digest, entry.token = (digest, entry.token) if digest else (None, request.conversation)
        return messages

    def _extended(self, entry: _Conversation, request: ModelCallInput) -> list[Message] | None:
        """The cached conversation continued by the request, or None when the two do not add up.

        The request's chain digest says where its messages continue: the start of the
        conversation, or the conversation this worker holds for the run (older workflow code
        also sent the position, `first_index`)."""
        new: list[Message] = []
        for item in request.new_messages:
            message = entry.produced.get(item) if isinstance(item, str) else item
            if message is None:
                return None
            new.append(message)
        if request.produced:
            made = _produced_in_order(entry.produced.values(), request.produced)
            if made is None:
                return None
            new += made
        hashes = [message_hash(m) for m in new]
        bases: list[tuple[list[Message], str]] = []
        if request.first_index == 0:
            bases.append(([], EMPTY))
        if entry.digest is not None and len(entry.messages) == (request.first_index or len(entry.messages)):
            bases.append((entry.messages, entry.digest))
        for base, digest in bases:
            if extend(digest, hashes) == request.digest:
                return base + new
        return None

    def _tokened(self, entry: _Conversation, request: ModelCallInput | StepRequest) -> list[Message] | None:
        if request.first_index == 0:
            known: list[Message] | None = [m for m in request.new_messages if isinstance(m, Message)]
        elif entry.token == request.conversation and len(entry.messages) == request.first_index:
            known = entry.messages + [m for m in request.new_messages if isinstance(m, Message)]
        else:
            known = None
        return known if known is not None and len(known) == request.total else None


def _produced_in_order(produced: Any, count: int) -> list[Message] | None:
    """`count` messages this worker produced: its last model reply, then the results of that
    reply's tool calls in call order (None when it does not hold them all)."""
    held = list(produced)
    reply = next((m for m in reversed(held) if m.role == "assistant"), None)
    if reply is None:
        return None
    results = {m.tool_call_id: m for m in held if m.role == "tool"}
    made = [reply, *(results.get(c.id) for c in reply.tool_calls or ())][:count]
    return made if len(made) == count and all(m is not None for m in made) else None  # type: ignore[misc]


def _prefix_with_digest(messages: list[Message], digest: str) -> list[Message]:
    """The start of the run's conversation whose chain digest is `digest` (what the model call is for)."""
    chain = EMPTY
    for i, message in enumerate(messages):
        chain = extend(chain, [message_hash(message)])
        if chain == digest:
            return messages[: i + 1]
    raise ApplicationError("the run's conversation changed while its model call was starting; retrying")


async def _conversation_from_workflow(request: ModelCallInput | StepRequest, whole: bool = False) -> list[Message]:
    handle = activity.client().get_workflow_handle(request.run_id, run_id=request.workflow_run_id or None)
    session = Session.model_validate(await handle.query("session"))
    return session.messages if whole else session.messages[: request.total]
