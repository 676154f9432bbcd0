"""The durable engine behind `Agent.run` / `arun` / `astream` / `resume`.

One per process: a background thread with its own event loop holds the Temporal
client and an in-process worker for this process's agents, so `Agent.run`
works from successive `asyncio.run()` calls and from many threads at once.
`TEMPORAL_ADDRESS` set: connect there. Otherwise an embedded dev server is
started (free ports, search attributes, tuned) and stopped at exit.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import os
import socket
import threading
import uuid
import weakref
from collections.abc import AsyncIterator, Coroutine
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from temporalio.client import Client, WorkflowHandle
from temporalio.service import RPCError

from rein import local_bus, machine
from rein.client import ReinClient, RunFailed, start_search_attributes
from rein.contract import DEFAULT_TASK_QUEUE, WORKFLOW_TYPE, AgentInput, RunOutcome, WaitRequest
from rein.ir import Message, StreamChunk
from rein.log import logger
from rein.result import RunResult
from rein.server import DevServer, start_dev_server
from rein.summaries import run_summary
from rein.temporal.converter import rein_data_converter

if TYPE_CHECKING:
    from rein.agent import Agent

T = TypeVar("T")


@dataclass
class _Waiting:
    workflow_id: str
    pause: int
    steps: int
    interrupt_type: str


def session_key(session: Any) -> str:
    return hashlib.sha256(session.model_dump_json().encode()).hexdigest()


class Engine:
    _instance: Engine | None = None
    _lock = threading.Lock()

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="rein-engine", daemon=True)
        self.server: DevServer | None = None
        self.client: Client | None = None
        # Weak: an Agent the application dropped cannot be resumed anyway, so it need not live on here.
        self.agents: weakref.WeakValueDictionary[str, Agent] = weakref.WeakValueDictionary()
        self.waiting: dict[str, _Waiting] = {}
        self._keys = itertools.count(1)
        self._worker_task: asyncio.Future | None = None
        self._worker: Any = None
        address = os.environ.get("TEMPORAL_ADDRESS")
        self.task_queue = os.environ.get("REIN_TASK_QUEUE") or (
            f"rein-{socket.gethostname()}-{os.getpid()}" if address else DEFAULT_TASK_QUEUE
        )
        self.address = address

    @classmethod
    def get(cls) -> Engine:
        with cls._lock:
            if cls._instance is None:
                engine = cls()
                engine._start()
                cls._instance = engine
                # Before interpreter teardown shuts the default executors the worker still needs.
                threading._register_atexit(engine.close)  # type: ignore[attr-defined]
            return cls._instance

    def _start(self) -> None:
        if self.address is None:
            self.server = start_dev_server()
            self.address = self.server.address
        self.thread.start()
        asyncio.run_coroutine_threadsafe(self._connect(), self.loop).result(timeout=60)

    async def _connect(self) -> None:
        from rein.worker import create_worker

        self.client = await Client.connect(
            self.address,
            namespace=os.environ.get("TEMPORAL_NAMESPACE", "default"),
            data_converter=rein_data_converter(),
        )
        self._worker = create_worker(self.client, self.agents, task_queue=self.task_queue)
        self._worker_task = asyncio.ensure_future(self._worker.run())

    def close(self) -> None:
        try:
            if self._worker is not None and self.loop.is_running():
                asyncio.run_coroutine_threadsafe(self._worker.shutdown(), self.loop).result(timeout=10)
        except Exception:
            pass
        if self.server is not None:
            self.server.stop()
        self.loop.call_soon_threadsafe(self.loop.stop)

    async def submit(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run `coro` on the engine's loop and await it from any other loop."""
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self.loop))

    def register(self, agent: Agent) -> str:
        """A key unique to this Agent object, so same-named agents in one process never mix."""
        key = getattr(agent, "_engine_key", None)
        if key is None:
            key = f"{agent.name}#{next(self._keys)}"
            agent._engine_key = key  # type: ignore[attr-defined]
        self.agents[key] = agent
        return key

    # ------------------------------------------------------------ on the engine loop

    async def start(self, agent_key: str, workflow_id: str, prompt: str | None, session: Any) -> RunResult:
        assert self.client is not None
        handle = await self.client.start_workflow(
            WORKFLOW_TYPE,
            AgentInput(agent=agent_key, prompt=prompt, session=session),
            id=workflow_id,
            task_queue=self.task_queue,
            result_type=RunOutcome,
            static_summary=run_summary(agent_key.split("#", 1)[0], prompt or _last_user_text(session)),
            search_attributes=await start_search_attributes(self.client, agent_key.split("#", 1)[0]),
        )
        return await self.wait(handle, WaitRequest())

    async def wait(self, handle: WorkflowHandle, request: WaitRequest) -> RunResult:
        assert self.client is not None
        try:
            result = await ReinClient(self.client, self.task_queue).wait(handle.id, request)
        except RunFailed:
            original = local_bus.take_error(handle.id)
            if original is None:
                raise
            raise original from None
        if result.status == "interrupted" and result.interrupt is not None:
            self.waiting[session_key(result.session)] = _Waiting(
                handle.id, request.after_pause + 1, request.steps_from + len(result.steps), result.interrupt.type
            )
        return result

    async def signal_and_wait(self, waiting: _Waiting, signal: str, payload: dict) -> RunResult:
        assert self.client is not None
        handle = self.client.get_workflow_handle(waiting.workflow_id, result_type=RunOutcome)
        await handle.signal(signal, payload)
        return await self.wait(handle, WaitRequest(after_pause=waiting.pause, steps_from=waiting.steps))

    async def cancel(self, workflow_id: str, reason: str) -> None:
        assert self.client is not None
        try:
            await self.client.get_workflow_handle(workflow_id).signal("cancel", {"reason": reason})
        except RPCError:
            pass


async def engine() -> Engine:
    if Engine._instance is not None:
        return Engine._instance
    return await asyncio.to_thread(Engine.get)


def _last_user_text(session: Any) -> str | None:
    users = [m.content for m in session.messages if m.role == "user"] if session is not None else []
    return users[-1] if users else None


def new_workflow_id(agent: Agent) -> str:
    return f"{agent.name}-{uuid.uuid4().hex[:12]}"


async def run_session(agent: Agent, session: Any = None, prompt: str | None = None) -> RunResult:
    eng = await engine()
    key = eng.register(agent)
    workflow_id = new_workflow_id(agent)
    logger.info("run started", extra={"trace_id": workflow_id, "tools": len(agent.registry)})
    return _logged(await eng.submit(eng.start(key, workflow_id, prompt, session)))


def _logged(result: RunResult) -> RunResult:
    """The same lifecycle log records as the in-process runner, from the run's result."""
    trace = {"trace_id": result.run_id}
    for step in result.steps:
        if step.kind == "tool":
            tool_name = step.summary.split(" → ")[0]
            logger.info("tool done", extra={**trace, "tool": tool_name, "error": step.is_error, "dur_s": round(step.duration_s or 0, 3)})
    if result.status == "interrupted":
        logger.info("run interrupted", extra={**trace, "interrupt": result.interrupt.type if result.interrupt else None})
    else:
        logger.info(
            "run finished",
            extra={**trace, "stop_reason": result.stop_reason, "iterations": result.session.iteration,
                   "tokens": result.usage.total_tokens, "elapsed_s": round(result.elapsed_s or 0, 3)},
        )
    return result


async def resume_session(agent: Agent, session: Any, *, approve: bool = True, answer: str | None = None) -> RunResult:
    """Signal the run that waits on this Session, or start a new run from it when none does."""
    eng = await engine()
    waiting = eng.waiting.pop(session_key(session), None)
    if waiting is not None:
        signal = _signal_for(waiting.interrupt_type, session, agent, approve, answer)
        if signal is not None:
            return _logged(await eng.submit(eng.signal_and_wait(waiting, *signal)))
        await eng.submit(eng.cancel(waiting.workflow_id, "superseded by a new run from the same session"))
    session = session.model_copy(deep=True)
    from rein.loop import input_tool_names

    machine.prepare_resume(session, approve, answer, input_tool_names(agent.registry))
    return await run_session(agent, session)


async def cancel_session(session: Any, reason: str) -> bool:
    """Cancel the durable run that waits on this Session, if this process started one."""
    eng = Engine._instance
    waiting = eng.waiting.pop(session_key(session), None) if eng is not None else None
    if waiting is None:
        return False
    await eng.submit(eng.cancel(waiting.workflow_id, reason))
    return True


def _signal_for(
    interrupt_type: str, session: Any, agent: Agent, approve: bool, answer: str | None
) -> tuple[str, dict] | None:
    """The one signal that does what `machine.prepare_resume` would; None when no single signal does."""
    from rein.loop import input_tool_names

    input_tools = input_tool_names(agent.registry)
    questions = [c for c in session.pending_tool_calls if c.name in input_tools]
    decided = machine.decisions_for_pending(session)
    others = [c for c in session.pending_tool_calls if c.name not in input_tools and c.id not in decided]
    if interrupt_type == "need_approval":
        if answer is not None and questions:
            return None
        return ("approve", {}) if approve else ("deny", {})
    if interrupt_type == "need_input":
        if answer is None or (not approve and others):
            return None
        return ("answer", {"text": answer})
    if interrupt_type == "error":
        return ("retry", {}) if answer is None else None
    return None


async def stream_session(agent: Agent, prompt: str) -> AsyncIterator[StreamChunk]:
    """Live chunks from the in-process worker; a remote worker's answers arrive whole."""
    eng = await engine()
    key = eng.register(agent)
    workflow_id = new_workflow_id(agent)
    queue: asyncio.Queue[StreamChunk] = asyncio.Queue()
    local_bus.listen(workflow_id, queue)
    run = asyncio.ensure_future(eng.submit(eng.start(key, workflow_id, prompt, None)))
    streamed = 0
    try:
        while True:
            getter = asyncio.ensure_future(queue.get())
            done, _ = await asyncio.wait({getter, run}, return_when=asyncio.FIRST_COMPLETED)
            if getter in done:
                streamed += 1
                yield getter.result()
                continue
            getter.cancel()
            break
        while not queue.empty():
            streamed += 1
            yield queue.get_nowait()
        result = run.result()
    finally:
        local_bus.stop_listening(workflow_id)
        if not run.done():
            run.cancel()
    if not streamed:
        for chunk in _chunks_from_messages(result.session.messages):
            yield chunk
    yield StreamChunk(type="done", finish_reason=result.stop_reason, usage=result.usage)


def _chunks_from_messages(messages: list[Message]) -> list[StreamChunk]:
    chunks = []
    for message in messages:
        if message.role != "assistant":
            continue
        if message.content:
            chunks.append(StreamChunk(type="text", text=message.content))
        if message.tool_calls:
            chunks.append(StreamChunk(type="tool_calls", tool_calls=message.tool_calls))
    return chunks
