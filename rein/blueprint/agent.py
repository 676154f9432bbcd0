"""Agent: a stateless blueprint (model, system prompt, tools, LoopConfig) and its run facade.

Every run is a Temporal workflow by default (`engine="temporal"`); `engine="local"`
(or `REIN_ENGINE=local`) runs the same state machine in-process, without durability.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import itertools
import os
import sys
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, Literal

from rein import settings
from rein.blueprint.middleware import (
    Middleware,
    StepContext,
    event_middleware,
    hook,
    require_async,
)
from rein.blueprint.output import OutputSpec
from rein.blueprint.runners import runner
from rein.blueprint.sync import ensure_no_running_loop
from rein.blueprint.thread import Thread
from rein.core import machine
from rein.core.config import LoopConfig
from rein.core.ir import StreamChunk, ToolSpec
from rein.core.result import Interrupt, RunResult

if TYPE_CHECKING:
    from rein.blueprint.mcp import MCPTools
from rein.blueprint.tools import Tool, ToolRegistry, tool
from rein.core.session import Session, Stage

__all__ = ["Agent", "Chat", "tool"]

Engine = Literal["temporal", "local"]
_anonymous = itertools.count(1)


class Agent:
    def __init__(
        self,
        model: str | None = None,
        *,
        provider: Any = None,
        fallback: list[Any] | None = None,
        tools: list[Any] | None = None,
        system: str | None = None,
        config: LoopConfig | None = None,
        name: str | None = None,
        engine: Engine | None = None,
        compaction: Any = None,
        client_overrides: Any = (),
        output_type: Any = None,
        mcp_servers: list[Any] | None = None,
        in_flight: Literal["stricter", "current"] = "stricter",
    ):
        """`client_overrides`: LoopConfig fields a run's client `config` may loosen (True: all), and
        "model" when a client may switch the run's model (AgentInput.model; the agent's LiteLLM
        provider settings with another model id). Without it, a client may only tighten
        `permission`, the breakers and `approvers`, and may not switch the model.

        `in_flight`: how durable runs already in flight take this definition when a deploy changed
        the agent under them. "stricter" (default): stricter approval rules apply at their next
        step, looser ones only to new runs. "current": runs in flight take the rules as they are
        now, looser ones included (the explicit opt-in; see docs/deploys.md, "Agent identity").

        Long by design: the seed's parameters, each checked and stored here, one line each."""
        if engine not in (None, "temporal", "local"):
            raise ValueError(f"engine must be 'temporal' or 'local', not {engine!r}")
        if name is not None and (not name or "#" in name or name.strip() != name):
            raise ValueError(f"agent name must be non-empty, without '#' or surrounding spaces: {name!r}")
        self.model = model
        self._provider = provider
        self._built_for: tuple[Any, ...] | None = None
        """(model, fallback) the cached provider was built from; None when it was given."""
        self.fallback = list(fallback or [])
        self.system = system
        self.config = config or LoopConfig()
        self.name = name or f"agent-{next(_anonymous)}"
        self.engine = engine
        if compaction is not None and not inspect.iscoroutinefunction(getattr(compaction, "compact", None)):
            raise TypeError(
                f"compaction must have an `async def compact(messages) -> messages` method, got {compaction!r}"
            )
        self.compaction = compaction
        self.client_overrides = _override_names(client_overrides)
        if in_flight not in ("stricter", "current"):
            raise ValueError(f"in_flight must be 'stricter' or 'current', not {in_flight!r}")
        self.in_flight = in_flight
        self.middlewares: list[Middleware] = []
        self._event_handlers: dict[str, list[Callable[[StepContext], Any]]] = {}
        self.registry = ToolRegistry()
        for item in tools or []:
            if isinstance(item, Agent):
                item = item.as_tool()
            self.registry.add(item if isinstance(item, Tool) else Tool.from_function(item))
        self.output: OutputSpec | None = OutputSpec(output_type) if output_type is not None else None
        """The final answer's type (`output_type`): the model answers with a `final_result` call."""
        if self.output is not None and self.output.tool_name in self.registry:
            raise ValueError(f"a tool named {self.output.tool_name!r} clashes with output_type's final tool")
        self.mcp: MCPTools | None = None
        """The tools of `mcp_servers` (rein.blueprint.mcp), listed and called worker-side."""
        if mcp_servers:
            from rein.blueprint.mcp import MCPTools

            self.mcp = MCPTools(list(mcp_servers), self.registry)

    def __repr__(self) -> str:
        return f"Agent(name={self.name!r}, model={self.model!r}, tools={self.registry.names()})"

    # ------------------------------------------------------------ blueprint

    def tool(self, fn: Callable | None = None, **options: Any) -> Any:
        """Register a tool; returns the function itself, still callable. `@agent.tool(retries=3)` works too."""
        if fn is None:
            return lambda f: self.tool(f, **options)
        self.registry.add(Tool.from_function(fn, **options))
        return fn

    def as_tool(self, name: str | None = None, description: str | None = None) -> Tool:
        """This agent as a tool of another agent: the model sends a `prompt`, gets the final answer.

        In a durable run the call runs as a child workflow (`AgentWorkflow` of this agent, id
        `<parent run id>/<tool call id>`); while it waits for a person, the parent run shows the
        child's interrupt and pending calls, and decisions sent to the parent reach the child.
        """
        child = self

        async def ask(prompt: str) -> str | None:  # None: a run that ended without an answer
            result = await child.arun(prompt)  # the in-process engine's path; durable runs use a child workflow
            return result.output

        tool = Tool(
            ask,
            name or child.name.replace("-", "_"),
            description or f"Ask the agent '{child.name}' to do a task; it answers with its result."
            + (f" It is instructed: {child.system[:200]}" if child.system else ""),
            {
                "type": "object",
                "properties": {"prompt": {"type": "string", "description": "The task, in full."}},
                "required": ["prompt"],
            },
            True,
        )
        tool.agent = child
        return tool

    @property
    def provider(self) -> Any:
        """The provider given to the agent (or set here), else the one built from `model` once used."""
        return self._provider

    @provider.setter
    def provider(self, value: Any) -> None:
        """Takes effect from the next model call, also on a worker already serving this agent
        (each model call asks the agent for its provider)."""
        self._provider = value
        self._built_for = None

    def _resolve_provider(self) -> Any:
        """The provider, cached: injected, else model + fallbacks via LiteLLM (rebuilt when they change)."""
        if self._built_for is not None and self._built_for != (self.model, *self.fallback):
            self._provider, self._built_for = None, None  # `model` or `fallback` were reassigned
        if self._provider is not None:
            if not hasattr(self._provider, "complete"):  # a seed-003 LlmBackend: adapt it once
                from rein.blueprint.providers.backend import as_provider

                self._provider = as_provider(self._provider)
            return self._provider
        if self.model is None and not self.fallback:
            raise ValueError(
                "Agent has neither a provider nor a model: use Agent(model='vendor/model') "
                "or Agent(provider=MockProvider([...]))."
            )
        from rein.blueprint.providers import FallbackProvider, LiteLLMProvider
        from rein.blueprint.providers.backend import as_provider

        chain = [LiteLLMProvider(self.model)] if self.model else []
        chain += [LiteLLMProvider(f) if isinstance(f, str) else as_provider(f) for f in self.fallback]
        self._provider = chain[0] if len(chain) == 1 else FallbackProvider(chain)
        self._built_for = (self.model, *self.fallback)
        return self._provider

    def provider_for(self, model: str | None) -> Any:
        """The provider for a run whose model is `model` (AgentInput.model; None: the agent's own).

        Another model is the agent's LiteLLM provider with the same settings and that model id (in
        a fallback chain it takes the primary's place; the backups stay). Raises ModelNotSwitchable
        for a provider that is not LiteLLM (a scripted or custom one has no model id to change)."""
        provider = self._resolve_provider()
        if not model or model == self.model_label:
            return provider
        from rein.blueprint.providers import FallbackProvider, LiteLLMProvider

        chain = provider.providers if isinstance(provider, FallbackProvider) else [provider]
        if not isinstance(chain[0], LiteLLMProvider):
            raise ModelNotSwitchable(
                f"agent {self.name!r} cannot switch its model to {model}: its provider "
                f"{type(chain[0]).__name__} is not LiteLLM-based (only a LiteLLM model id can be replaced)"
            )
        switched = chain[0].with_model(model)
        if len(chain) == 1:
            return switched
        return FallbackProvider([switched, *chain[1:]], max_retries_per_provider=provider.max_retries_per_provider,
                                base_delay=provider.base_delay)

    @property
    def model_label(self) -> str:
        """How the model reads in activity summaries: the LiteLLM id or the provider's class."""
        if self.model:
            return self.model
        provider_model = getattr(self._provider, "model", None)
        if isinstance(provider_model, str) and provider_model:
            return provider_model  # e.g. an injected LiteLLMProvider("openai/gpt-4o", api_base=...)
        return type(self._provider).__name__ if self._provider is not None else "unknown"

    async def tools_for_run(self) -> ToolRegistry:
        """The agent's own tools plus its MCP servers' tools, listed now."""
        if self.mcp is None:
            return self.registry
        return ToolRegistry([*self.registry, *await self.mcp.refresh()])

    async def find_tool(self, name: str) -> Tool | None:
        """A tool by name: the agent's own, else one of its MCP servers' (from the latest listing)."""
        found = self.registry.get(name)
        if found is None and self.mcp is not None:
            found = await self.mcp.get(name)
        return found

    async def tool_names(self) -> list[str]:
        return self.registry.names() + ([t.name for t in await self.mcp.tools()] if self.mcp is not None else [])

    async def model_tool_specs(self) -> list[ToolSpec]:
        """Every tool the model is offered: the agent's own, its MCP servers', the output type's final tool."""
        specs = self.registry.specs()
        if self.mcp is not None:
            specs += [t.spec() for t in await self.mcp.tools()]
        if self.output is not None:
            specs.append(self.output.tool_spec())
        return specs

    def _typed(self, result: RunResult) -> RunResult:
        """`result.data` as an instance of the output type (runs carry it as JSON)."""
        if self.output is not None and result.session.output_json is not None:
            result.data = self.output.rebuild(result.session.output_json)
        return result

    def new_session(self, prompt: str) -> Session:
        return machine.new_session(prompt, self.system)

    def _engine(self) -> Engine:
        """Where runs go: the engine asked for, else REIN_ENGINE, else durable. Middleware, hooks,
        events and compaction run on both (worker-side in durable runs), so nothing changes it."""
        return self.engine or settings.current().engine

    # ------------------------------------------------------------ extensions (both engines)
    # In a durable run they run on the worker, inside the step's activity (rein.call_model /
    # rein.run_tool), with that worker's live objects; the Session they leave goes back to the run.

    def middleware(self, fn: Middleware) -> Middleware:
        """Wrap every step with `async def fn(ctx, call_next) -> ctx`."""
        if not callable(fn):
            raise TypeError(f"middleware must be callable as fn(ctx, call_next), got {fn!r}")
        self.middlewares.append(fn)
        return fn

    def _hook(self, stage: Stage, fn: Callable, before: bool, name: str) -> Callable:
        require_async(fn, f"{name} hook")
        self.middlewares.append(hook(stage, fn, before=before))
        return fn

    def before_model(self, fn: Callable) -> Callable:
        return self._hook(Stage.CALL_MODEL, fn, True, "before_model")

    def after_model(self, fn: Callable) -> Callable:
        return self._hook(Stage.CALL_MODEL, fn, False, "after_model")

    def before_tool(self, fn: Callable) -> Callable:
        return self._hook(Stage.RUN_TOOLS, fn, True, "before_tool")

    def after_tool(self, fn: Callable) -> Callable:
        return self._hook(Stage.RUN_TOOLS, fn, False, "after_tool")

    def on(self, event: str, handler: Callable[[StepContext], Any]) -> Callable:
        """Observe steps: "step" fires after every step, "tool" after tool steps (sync handlers).

        In a durable run handlers are called on the worker that ran the step (in this
        process when the engine's worker serves the run) and the event is also put on
        the run's stream."""
        if not callable(handler) or inspect.iscoroutinefunction(handler):
            raise TypeError(f"event handlers are plain functions called as handler(ctx), got {handler!r}")
        if not self._event_handlers:
            self.middlewares.append(event_middleware(self._event_handlers))
        self._event_handlers.setdefault(event, []).append(handler)
        return handler

    def _local_kwargs(self) -> dict[str, Any]:
        return {"compaction": self.compaction, "middlewares": self.middlewares, "output": self.output}

    # ------------------------------------------------------------ running

    async def arun(self, prompt: str, *, tenant: str | None = None, priority: int | None = None) -> RunResult:
        """Run to the end or the first interrupt. `tenant`/`priority` (durable engine): Temporal's
        fairness key and priority for the run, its activities and child agents (docs/fleet.md)."""
        provider = self._resolve_provider()
        if self._engine() == "local":
            return self._typed(
                await runner("local").arun(self.new_session(prompt), provider, await self.tools_for_run(), self.config, **self._local_kwargs())  # noqa: E501  (one string, read whole)
            )
        return self._typed(await runner("temporal").run_session(self, prompt=prompt, tenant=tenant, priority=priority))

    def run(self, prompt: str, *, tenant: str | None = None, priority: int | None = None) -> RunResult:
        self._resolve_provider()
        ensure_no_running_loop("Agent.run()", "agent.arun(...)")
        return asyncio.run(self.arun(prompt, tenant=tenant, priority=priority))

    async def _arun_session(self, session: Session) -> RunResult:
        provider = self._resolve_provider()
        if self._engine() == "local":
            return self._typed(await runner("local").arun(session, provider, await self.tools_for_run(), self.config, **self._local_kwargs()))  # noqa: E501  (one string, read whole)
        return self._typed(await runner("temporal").run_session(self, session=session))

    async def astream(self, prompt: str) -> AsyncIterator[StreamChunk]:
        provider = self._resolve_provider()
        if self._engine() == "local":
            async for chunk in runner("local").astream(
                self.new_session(prompt), provider, await self.tools_for_run(), self.config, compaction=self.compaction,
                output=self.output,
            ):
                yield chunk
            return
        async for chunk in runner("temporal").stream_session(self, prompt):
            yield chunk

    async def _astream_run(
        self, prompt: str | None = None, session: Session | None = None
    ) -> AsyncIterator[StreamChunk | RunResult]:
        """A new run of `prompt` (or of `session`, a Chat's turn): text and tool-call chunks as the model
        writes them, then the RunResult at its end or first pause (what rein.web.a2a streams from)."""
        provider = self._resolve_provider()
        if self._engine() == "local":
            session = session if session is not None else self.new_session(prompt or "")
            items = runner("local").arun_streaming(
                session, provider, await self.tools_for_run(), self.config, **self._local_kwargs()
            )
        else:
            items = runner("temporal").stream_run(self, prompt=prompt, session=session)
        async for item in items:
            yield self._typed(item) if isinstance(item, RunResult) else item

    async def aresume(self, session: Session, *, approve: bool = True, answer: str | None = None,
                      approver: str | None = None) -> RunResult:
        """Decide the Session's pending calls (or answer its question) and go on. The decision is recorded as
        `approver`'s, by default the person this process runs for (REIN_IDENTITY, default USER@HOST)."""
        provider, who = self._resolve_provider(), settings.current().identity if approver is None else approver
        if self._engine() == "local":
            return self._typed(await runner("local").aresume(
                session, provider, await self.tools_for_run(), self.config, approve=approve, answer=answer,
                approver=who, **self._local_kwargs(),
            ))
        return self._typed(await runner("temporal").resume_session(self, session, approve=approve, answer=answer,
                                                                   approver=who))

    def resume(self, session: Session, *, approve: bool = True, answer: str | None = None,
               approver: str | None = None) -> RunResult:
        ensure_no_running_loop("Agent.resume()", "agent.aresume(...)")
        return asyncio.run(self.aresume(session, approve=approve, answer=answer, approver=approver))

    def run_interactive(self, prompt: str, approver: Callable[[Interrupt], bool] | None = None) -> RunResult:
        """Run, asking `approver` (default: a y/N prompt on the terminal) at every approval."""
        approver = approver or _ask_on_terminal
        result = self.run(prompt)
        while result.status == "interrupted" and result.interrupt and result.interrupt.type == "need_approval":
            result = self.resume(result.session, approve=bool(approver(result.interrupt)))
        return result

    def chat(self, session: Session | None = None, *, thread_id: str | None = None) -> Chat:
        """A conversation; with `thread_id` (durable engine), one that lives in Temporal as that thread,
        resumable from any process (rein.core.threads)."""
        return Chat(self, session, thread_id=thread_id)

    def thread(self, thread_id: str) -> Thread:
        """The durable conversation `thread_id` (its Temporal workflow id): `.send(text, mode=...)`,
        `.asend`, `.astream`; any process with this agent may send it the next message."""
        return Thread(self, thread_id)


class ModelNotSwitchable(ValueError):
    """A run asked for another model, and the agent's provider cannot switch to it."""


def _override_names(value: Any) -> frozenset[str]:
    if value is True:
        return frozenset({"*"})
    if value in (None, False):
        return frozenset()
    names = frozenset([value] if isinstance(value, str) else value)
    unknown = names - set(LoopConfig.model_fields) - {"*", "model"}  # "model": rein.core.contract.MODEL_OVERRIDE
    if unknown:
        raise ValueError(f"client_overrides names unknown LoopConfig fields: {sorted(unknown)} (or \"model\")")
    return names


def _ask_on_terminal(interrupt: Interrupt) -> bool:
    reply = input(f"{interrupt.message} [y/N] ")
    return reply.strip().lower() in ("y", "yes")


class Chat:
    """A multi-turn conversation: history is kept, breaker budgets and usage are per turn.

    With `thread_id` (durable engine) the conversation is that thread's (rein.core.threads): it lives in
    Temporal, each turn is a turn of one run, and a Chat of the same thread id in another process goes on
    with it. Without, the caller holds it and each turn is a run of its own (the seeds' Chat)."""

    def __init__(self, agent: Agent, session: Session | None = None, *, thread_id: str | None = None):
        self.agent = agent
        if session is None:
            session = Session(messages=machine.new_session("", agent.system).messages[:-1])
        elif thread_id is not None:
            raise ValueError("a thread holds its own conversation: give a session or a thread_id, not both")
        self.session = session
        self.thread = Thread(agent, thread_id) if thread_id is not None else None

    async def asend(self, prompt: str) -> RunResult:
        if self.thread is not None:
            result = await self.thread.asend(prompt)
            self.session = result.session
            return result
        machine.prepare_turn(self.session, prompt)
        result = await self.agent._arun_session(self.session)
        self.session = result.session
        return result

    async def _astream(self, prompt: str) -> AsyncIterator[StreamChunk | RunResult]:
        """`asend` that yields the turn's text and tool-call chunks as they come, then its RunResult."""
        if self.thread is not None:
            async for item in runner("temporal").stream_thread(self.agent, self.thread.thread_id, prompt):
                if isinstance(item, RunResult):
                    self.session = item.session
                yield item
            return
        machine.prepare_turn(self.session, prompt)
        async for item in self.agent._astream_run(session=self.session):
            if isinstance(item, RunResult):
                self.session = item.session
            yield item

    def send(self, prompt: str) -> RunResult:
        ensure_no_running_loop("Chat.send()", "chat.asend(...)")
        return asyncio.run(self.asend(prompt))


def with_tool_agents(agents: Iterable[Agent]) -> Iterator[Agent]:
    """Each agent once, then the agents they use as tools (`Agent.as_tool`), at any depth."""
    seen: set[int] = set()
    todo = list(agents)
    while todo:
        agent = todo.pop()
        if id(agent) in seen:
            continue
        seen.add(id(agent))
        yield agent
        todo += [t.agent for t in agent.registry if t.agent is not None]


def uses_litellm(agents: Iterable[Agent]) -> bool:
    """Whether one of `agents`, or an agent one uses as a tool, calls its model through LiteLLM."""
    from rein.blueprint.providers.litellm import LiteLLMProvider

    return any(isinstance(agent.provider, LiteLLMProvider) for agent in with_tool_agents(agents))


def load_agent(target: str) -> Agent:
    """`pkg.module:attr` → the Agent it names (the current directory is importable). Here, not in
    rein.durable.temporal_worker: a mistyped target is told without importing temporalio's worker (`rein run`)."""
    module_name, _, attr = target.partition(":")
    if not module_name or not attr:
        raise SystemExit(f"expected module:attr, got {target!r}")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    module = importlib.import_module(module_name)
    if not hasattr(module, attr):
        raise SystemExit(f"module {module_name!r} has no attribute {attr!r} (from {target!r})")
    agent = getattr(module, attr)
    if not isinstance(agent, Agent):
        raise SystemExit(f"{target} is not a rein.Agent (got {type(agent).__name__})")
    return agent
