"""What a fork changes in the conversation it starts from: validated edits on a Session.

Pure (no I/O): `rein.durable.fork` finds the Session as it stood after the fork step and hands it
here. Every edit that cannot apply raises ForkError naming what is wrong, before any run starts.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from rein.core.contract import AgentDescription, ToolInfo
from rein.core.errors import validation_text
from rein.core.ir import Message, ToolCall
from rein.core.session import Session, Stage


class ForkError(ValueError):
    """A fork or rewind that cannot be made (unknown step, a misfit edit, an incompatible agent)."""


class ForkEdits(BaseModel):
    """Changes a fork makes at its fork point, applied in this order."""

    model_config = ConfigDict(extra="forbid")

    drop_last_reply: bool = False
    """Drop the model's last reply and what followed it (its tool results): the model answers again."""
    tool_results: dict[str, str] = Field(default_factory=dict)
    """Tool call id -> the result the fork's model sees instead: a result before the fork point, or
    a call still pending there (which then does not run)."""
    prompt: str | None = Field(default=None, min_length=1)
    """Replaces the text of the last user message before the fork point."""
    append_prompt: str | None = Field(default=None, min_length=1)
    """A new user message after the fork point: a new turn (per-turn budgets start again)."""
    model: str | None = Field(default=None, min_length=1, max_length=256)
    """The fork's model (a LiteLLM id; AgentInput.model): the agent must allow it (client_overrides "model")."""

    @classmethod
    def parse(cls, edits: ForkEdits | dict[str, Any] | None) -> ForkEdits:
        if edits is None:
            return cls()
        if isinstance(edits, ForkEdits):
            return edits
        try:
            return cls.model_validate(edits)
        except ValidationError as err:
            raise ForkError(f"invalid fork edits: {validation_text(err, 'edits', 1000)}") from None

    def describe(self) -> list[str]:
        """One short line per edit, for the fork's summary and `rein show`."""
        lines = ["drop the last model reply"] if self.drop_last_reply else []
        lines += [f"tool result {cid} replaced" for cid in self.tool_results]
        if self.prompt is not None:
            lines.append(f"prompt replaced: {_short(self.prompt)}")
        if self.append_prompt is not None:
            lines.append(f"prompt appended: {_short(self.append_prompt)}")
        if self.model is not None:
            lines.append(f"model switched to {self.model}")
        return lines

    def with_model(self, *models: str | None) -> ForkEdits:
        """These edits with the model given another way (`fork(model=...)`, `config={"model": ...}`)."""
        given = {m for m in (self.model, *models) if m is not None}
        if len(given) > 1:
            raise ForkError(f"two different models for the fork: {', '.join(sorted(given))}")
        return self.model_copy(update={"model": given.pop()}) if given else self


def _short(text: str, limit: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def apply_edits(session: Session, edits: ForkEdits, at_step: int) -> Session:
    """A copy of `session` with `edits` applied; raises ForkError for an edit that does not fit."""
    session = session.model_copy(deep=True)
    if edits.drop_last_reply:
        _drop_last_reply(session, at_step)
    for call_id, text in edits.tool_results.items():
        _replace_tool_result(session, call_id, text, at_step)
    if edits.prompt is not None:
        users = [i for i, m in enumerate(session.messages) if m.role == "user"]
        if not users:
            raise ForkError(f"no user message before step {at_step} to replace")
        session.messages[users[-1]] = session.messages[users[-1]].model_copy(update={"content": edits.prompt})
    if edits.append_prompt is not None and session.pending_tool_calls:
        ids = ", ".join(c.id for c in session.pending_tool_calls)
        raise ForkError(
            f"at step {at_step} tool calls are still pending ({ids}): a new user message cannot follow them. "
            "Fork at a later step, give their results (tool_results), or drop the last reply"
        )
    return session


def _drop_last_reply(session: Session, at_step: int) -> None:
    replies = [i for i, m in enumerate(session.messages) if m.role == "assistant"]
    if not replies:
        raise ForkError(f"no model reply before step {at_step} to drop")
    del session.messages[replies[-1]:]
    session.pending_tool_calls = []
    session.stage = Stage.CALL_MODEL
    session.iteration = max(0, session.iteration - 1)
    session.done, session.stop_reason, session.output_json = False, None, None


def _replace_tool_result(session: Session, call_id: str, text: str, at_step: int) -> None:
    for i, message in enumerate(session.messages):
        if message.role == "tool" and message.tool_call_id == call_id:
            session.messages[i] = message.model_copy(update={"content": text})
            return
    pending = next((c for c in session.pending_tool_calls if c.id == call_id), None)
    if pending is None:
        known = [m.tool_call_id for m in session.messages if m.role == "tool" and m.tool_call_id is not None]
        known += [c.id for c in session.pending_tool_calls]
        raise ForkError(
            f"no tool call {call_id!r} before step {at_step}; tool calls there: {', '.join(known) or 'none'}"
        )
    session.messages.append(Message(role="tool", tool_call_id=call_id, content=text))
    session.pending_tool_calls = [c for c in session.pending_tool_calls if c.id != call_id]
    if not session.pending_tool_calls:
        session.stage = Stage.CALL_MODEL


def reopen_batch(session: Session, later_tool_steps: int, at_step: int) -> None:
    """The fork point is inside a batch of tool results recorded together: the results of the
    batch's later calls are taken out again, and those calls are pending (they run in the fork)."""
    if later_tool_steps <= 0:
        return
    tail = session.messages[-later_tool_steps:]
    if len(tail) < later_tool_steps or any(m.role != "tool" for m in tail):
        raise ForkError(f"step {at_step} cannot be separated from the steps recorded with it; fork at a later step")
    reply = next((m for m in reversed(session.messages[:-later_tool_steps]) if m.role == "assistant"), None)
    calls = {c.id: c for c in (reply.tool_calls or [])} if reply is not None else {}
    reopened: list[ToolCall] = [calls[m.tool_call_id] for m in tail if m.tool_call_id in calls]
    if len(reopened) != later_tool_steps:
        raise ForkError(f"step {at_step} cannot be separated from the steps recorded with it; fork at a later step")
    del session.messages[-later_tool_steps:]
    session.pending_tool_calls = reopened
    session.stage = Stage.RUN_TOOLS
    session.done, session.stop_reason = False, None


def check_tools(session: Session, original: AgentDescription, target: AgentDescription) -> None:
    """The target agent must offer every tool the conversation used or left pending, with the same
    parameters; otherwise ForkError listing the misfits."""
    used: dict[str, None] = {}
    for message in session.messages:
        for call in message.tool_calls or ():
            used[call.name] = None
    for call in session.pending_tool_calls:
        used[call.name] = None
    theirs = {t.spec.name: t for t in target.tools}
    ours = {t.spec.name: t for t in original.tools}
    problems = []
    for name in used:
        if name not in theirs:
            problems.append(f"{name} (missing)")
        elif name in ours and not _same_parameters(ours[name], theirs[name]):
            problems.append(f"{name} (different parameters)")
    if problems:
        raise ForkError(
            f"agent {target.name!r} cannot continue this conversation: its tools do not fit: {', '.join(problems)}"
        )


def _same_parameters(a: ToolInfo, b: ToolInfo) -> bool:
    return a.spec.parameters == b.spec.parameters
