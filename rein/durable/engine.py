"""The durable engine behind `Agent.run` / `arun` / `astream` / `resume`.

One per process: an anyio blocking portal (a thread with its own event loop) holds
the Temporal client and an in-process worker for this process's agents, so
`Agent.run` works from successive `asyncio.run()` calls and from many threads at once.
It connects through rein.temporal.connection: the configured server, or else the
shared embedded server of REIN_HOME, whose runs outlive this process.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import uuid
import weakref
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

from anyio.from_thread import BlockingPortal, start_blocking_portal
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowHandle
from temporalio.service import RPCError, RPCStatusCode
from temporalio.worker import PollerBehaviorSimpleMaximum, Worker

from rein import settings
from rein.client import DecisionRejected, ReinClient
from rein.core import machine
from rein.core.contract import (
    CANCEL_UPDATE,
    DECISION_UPDATES,
    WORKFLOW_TYPE,
    AgentInput,
    RunOutcome,
    RunStatusView,
    WaitRequest,
    agent_task_queue,
)
from rein.core.ir import StreamChunk
from rein.core.log import logger
from rein.core.result import RunResult
from rein.core.summaries import run_summary
from rein.durable.engine_versioning import StartRouting, engine_version, worker_versioning
from rein.durable.fleet import run_priority
from rein.temporal import connection
from rein.temporal.sdk_private import at_exit_before_threads_join
from rein.temporal.search_attributes import start_search_attributes

if TYPE_CHECKING:
    from rein.blueprint.agent import Agent

T = TypeVar("T")


class Engine:
    _instance: Engine | None = None
    _lock = threading.Lock()

    def __init__(self) -> None:
        self._portal_context = start_blocking_portal(name="rein-engine")
        self.portal: BlockingPortal
        self.loop: asyncio.AbstractEventLoop
        self.thread: threading.Thread
        """The portal, its loop and its thread (set by _start, the last two on that loop)."""
        self.client: Client | None = None
        # Weak: an Agent the application dropped cannot be resumed anyway, so it need not live on here.
        self.agents: weakref.WeakValueDictionary[str, Agent] = weakref.WeakValueDictionary()
        self._names = threading.Lock()
        self.fixed_queue = settings.current().task_queue
        """Set: every agent of this process on that one queue. Unset: each agent on its own queue."""
        self.workers: dict[str, Worker] = {}
        """Task queue → the in-process worker polling it."""
        self._starting: dict[str, asyncio.Future[None]] = {}
        """Task queue → its worker being created (after the previous one on that queue has stopped)."""
        self._retiring: dict[str, asyncio.Future[None]] = {}
        """Task queue → the shutdown of a dropped agent's worker: no new worker may poll it until it ends."""
        self._watched: weakref.WeakSet[Agent] = weakref.WeakSet()
        self.routing = StartRouting(None, None)
        """The deployment version this process's workers poll as, and where its runs start (engine_versioning)."""

    @classmethod
    def get(cls) -> Engine:
        with cls._lock:
            if cls._instance is None:
                from rein.core.log import install_excepthook

                install_excepthook()  # a script that dies of a failed run: one line (REIN_DEBUG=1: the traceback)
                engine = cls()
                engine._start()
                cls._instance = engine
                # Before interpreter teardown shuts the default executors the worker still needs.
                at_exit_before_threads_join(engine.close)
            return cls._instance

    def _start(self) -> None:
        target = connection.resolve()  # may start the embedded server: before the loop runs
        self.portal = self._portal_context.__enter__()
        self.portal.start_task_soon(self._connect, target).result(timeout=60)

    async def _connect(self, target: connection.Target) -> None:
        self.loop, self.thread = asyncio.get_running_loop(), threading.current_thread()
        self.client = await connection.connect(target=target)
        self.routing = StartRouting(self.client, await engine_version(self.client))

    def close(self) -> None:
        """Within 15 s, as it runs at interpreter exit, even while a tool blocks the loop: so not through
        the portal, whose calls wait for the loop to take them and whose exit joins the thread, both
        without a timeout (here its exit comes once the thread has ended). Calls still waiting are
        cancelled: their callers get an error instead of waiting forever (and holding up exit)."""
        async def shutdown() -> None:
            await self.routing.release()  # the runs pinned to this process's build follow the current one
            workers, self.workers = list(self.workers.values()), {}
            stopping = [*(w.shutdown() for w in workers), *self._retiring.values()]  # dropped agents' too
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.gather(*stopping, return_exceptions=True), 10)
            await self.portal.stop(cancel_remaining=True)

        if self.thread.is_alive():
            asyncio.run_coroutine_threadsafe(shutdown(), self.loop)
            self.thread.join(timeout=15)
        if not self.thread.is_alive():
            self._portal_context.__exit__(None, None, None)
        self.client = None  # so rein.temporal.connection's exit hook can free the core (sdk-python#300)

    def _here(self) -> bool:
        """On the engine's own thread (an async tool, run there by the worker, running another agent),
        where the portal refuses calls."""
        return threading.current_thread() is self.thread

    async def submit(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run `coro` on the engine's loop and await it from any loop (the calling thread waits until
        that loop takes it). Cancelling the caller cancels it there, and the portal drops what it then
        raises (temporalio turns the cancellation of a call into its own error): no "Task exception
        was never retrieved" over a Ctrl-C'd script."""
        if self._here():
            return await coro
        return await asyncio.wrap_future(self.portal.start_task_soon(lambda: coro))

    async def relay(self, source: Callable[[], AsyncIterator[T]]) -> AsyncIterator[T]:
        """Iterate `source()` on the engine's loop (which owns the client) and yield its items
        on the caller's loop; the source's error is raised here. Closing this stops the source."""
        if self._here():
            async for item in source():
                yield item
            return
        caller = asyncio.get_running_loop()
        items: asyncio.Queue[Any] = asyncio.Queue()
        end = object()

        async def pump() -> None:
            try:
                async for item in source():
                    caller.call_soon_threadsafe(items.put_nowait, item)
            finally:
                caller.call_soon_threadsafe(items.put_nowait, end)

        pumping = asyncio.wrap_future(self.portal.start_task_soon(pump))
        try:
            while (item := await items.get()) is not end:
                yield item
            await pumping
        finally:
            pumping.cancel()

    def register(self, agent: Agent) -> str:
        """The name runs of this Agent carry, and a worker serving it on its queue.

        The agent's own name, so any process serving an agent of that name (a later script,
        `worker.py`) continues its runs; only a second, different live Agent of the same name in
        this process gets `name#2`, so same-named agents in one process never mix.
        """
        with self._names:
            key = getattr(agent, "_engine_key", None)
            if key is None or self.agents.get(key) not in (None, agent):
                key = agent.name
                n = 1
                while self.agents.get(key) not in (None, agent):
                    n += 1
                    key = f"{agent.name}#{n}"
                agent._engine_key = key  # type: ignore[attr-defined]
            self.agents[key] = agent
        self.loop.call_soon_threadsafe(self._serve, key, agent)  # not the portal: this may be its own thread
        return key

    def task_queue(self, key: str) -> str:
        return self.fixed_queue or agent_task_queue(key)

    def _serve(self, key: str, agent: Agent) -> None:
        """On the engine loop: a worker for the agent's queue, shut down when the agent is dropped."""
        queue = self.task_queue(key)
        if queue not in self.workers and queue not in self._starting:
            self._starting[queue] = asyncio.ensure_future(self._start_worker(queue))
        if self.fixed_queue is None and agent not in self._watched:
            self._watched.add(agent)
            weakref.finalize(agent, self._dropped, key)

    async def _start_worker(self, queue: str) -> None:
        """Temporal's core refuses a second worker on a queue while the first is registered, so a new
        Agent of a dropped one's name waits (milliseconds) for the old worker's shutdown to end."""
        from rein.durable.temporal_worker import create_worker

        try:
            retiring = self._retiring.get(queue)
            if retiring is not None:
                await asyncio.shield(retiring)
            assert self.client is not None
            worker = create_worker(
                self.client, self.agents, task_queue=queue, **worker_versioning(self.routing.version),
                workflow_task_poller_behavior=PollerBehaviorSimpleMaximum(2),
                activity_task_poller_behavior=PollerBehaviorSimpleMaximum(2),
            )
            self.workers[queue] = worker
            asyncio.ensure_future(worker.run()).add_done_callback(lambda run: self._stopped(queue, worker, run))
        finally:
            self._starting.pop(queue, None)

    def _stopped(self, queue: str, worker: Worker, run: asyncio.Future[None]) -> None:
        """A worker whose run ended on its own (not retired) no longer serves: the next run starts another."""
        if self.workers.get(queue) is worker:
            del self.workers[queue]
        if not run.cancelled() and run.exception() is not None:
            logger.error("the in-process worker for %s stopped: %s", queue, run.exception())

    async def serving(self, queue: str) -> None:
        """Until this process's worker for `queue` exists (runs started before it would wait unserved)."""
        starting = self._starting.get(queue)
        if starting is not None:
            await asyncio.shield(starting)

    def _dropped(self, key: str) -> None:
        """A GC finalizer: any thread, the engine's own too (the portal refuses that one), even at exit."""
        try:
            self.loop.call_soon_threadsafe(self._retire, key)
        except RuntimeError:  # the loop is closed: the process is exiting
            pass

    def _retire(self, key: str) -> None:
        if self.agents.get(key) is None:  # not re-registered by a new Agent of the same name
            queue = self.task_queue(key)
            worker = self.workers.pop(queue, None)
            if worker is not None:
                retiring = self._retiring[queue] = asyncio.ensure_future(worker.shutdown())
                retiring.add_done_callback(lambda _: self._retiring.pop(queue, None)
                                           if self._retiring.get(queue) is retiring else None)

    # ------------------------------------------------------------ on the engine loop

    async def start(
        self, agent_key: str, workflow_id: str, prompt: str | None, session: Any, **fleet: Any
    ) -> RunResult:
        return await self.wait(await self.begin(agent_key, workflow_id, prompt, session, **fleet), WaitRequest())

    async def begin(
        self, agent_key: str, workflow_id: str, prompt: str | None, session: Any, *, stream: bool = False,
        tenant: str | None = None, priority: int | None = None,
    ) -> WorkflowHandle:
        """Start the run; `stream`: its model calls publish text live from the first one; `tenant` and
        `priority`: Temporal's fairness key and priority key for it (rein.durable.fleet.run_priority)."""
        assert self.client is not None
        await self.serving(self.task_queue(agent_key))
        return await self.client.start_workflow(
            WORKFLOW_TYPE,
            AgentInput(agent=agent_key, prompt=prompt, session=session, stream=stream),
            id=workflow_id,
            task_queue=self.task_queue(agent_key),
            result_type=RunOutcome,
            static_summary=run_summary(agent_key.split("#", 1)[0], prompt or _last_user_text(session)),
            search_attributes=await start_search_attributes(self.client, agent_key.split("#", 1)[0], tenant=tenant),
            priority=run_priority(tenant, priority),
            request_eager_start=True,  # this engine's own worker takes the first workflow task at once
            versioning_override=await self.routing.override(self.task_queue(agent_key), workflow_id),
        )

    async def wait(self, handle: WorkflowHandle, request: WaitRequest) -> RunResult:
        """Until the run pauses or ends; rein.client.RunFailed when it failed."""
        assert self.client is not None
        return await ReinClient(self.client).wait(handle.id, request)

    async def resume(self, agent: Agent, session: Any, approve: bool, answer: str | None, approver: str) -> RunResult | None:
        """Continue the run `session.run_id` names, from any process; None when it no longer runs.

        A run waiting at the point this Session records gets the one decision that settles it;
        a run still working is waited for. None (the caller starts a new run from the
        Session) when the run has ended, is unknown, or waits at a different point.
        """
        assert self.client is not None
        handle = self.client.get_workflow_handle(session.run_id, result_type=RunOutcome)
        runs = ReinClient(self.client)
        try:
            if (await handle.describe()).status != WorkflowExecutionStatus.RUNNING:
                return None
            view = await runs.status(handle.id)
            steps = len(await runs.steps(handle.id))
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:
                return None
            raise
        if view.status == "running":
            return await self.wait(handle, WaitRequest(after_pause=view.pause, steps_from=steps))
        child = _child_waiting(view, session, agent)
        if view.interrupt is None or not (child is not None or _waits_at(view, session)):
            return None
        if child is not None:  # the parent shows its child's wait; the parent passes decisions on to it
            decision = _decision_for(view.interrupt.type, view.pending_tool_calls, {}, child, approve, answer, approver)
        else:
            decision = _decision_for(view.interrupt.type, session.pending_tool_calls,
                                     machine.decisions_for_pending(session), agent, approve, answer, approver)
        if decision is None:  # no single decision says it: a new run from the Session replaces this one
            await self.cancel(handle.id, "superseded by a new run from the same session")
            return None
        if view.wait is not None:  # the wait this Session shows: refused if the run moves on meanwhile
            decision[1]["wait"] = view.wait
        return await self._decide_and_wait(handle, [decision], view.pause, steps)

    async def decide(self, run_id: str, decisions: list[tuple[str, dict]]) -> RunResult:
        """Send `decisions` ("approve", "deny", "answer", "retry") to a waiting run and wait for its
        next pause or its end; rein.client.DecisionRejected when the run does not take one."""
        assert self.client is not None
        handle = self.client.get_workflow_handle(run_id, result_type=RunOutcome)
        runs = ReinClient(self.client)
        view = await runs.status(run_id)
        return await self._decide_and_wait(handle, decisions, view.pause, len(await runs.steps(run_id)))

    async def _decide_and_wait(
        self, handle: WorkflowHandle, decisions: list[tuple[str, dict]], pause: int, steps: int
    ) -> RunResult:
        """Each decision goes as the validated update every client sends (ReinClient's path): a misfit is
        rejected to the caller instead of ignored by the run while the caller waits for a pause."""
        assert self.client is not None
        runs = ReinClient(self.client)
        for name, payload in decisions:
            await runs._decide(handle.id, DECISION_UPDATES[name], payload, served=True)
        return await self.wait(handle, WaitRequest(after_pause=pause, steps_from=steps))

    async def cancel(self, workflow_id: str, reason: str) -> bool:
        """End the run as cancelled (the `rein.cancel` update); False when it is not running,
        rein.client.NoWorker when no worker serves it (a Session from a process serving other agents)."""
        assert self.client is not None
        try:
            if (await self.client.get_workflow_handle(workflow_id).describe()).status != WorkflowExecutionStatus.RUNNING:
                return False
            await ReinClient(self.client)._decide(workflow_id, CANCEL_UPDATE, {"reason": reason})
        except (RPCError, DecisionRejected):  # unknown, or it ended meanwhile
            return False
        return True


async def engine() -> Engine:
    if Engine._instance is not None:
        return Engine._instance
    return await asyncio.to_thread(Engine.get)


def _last_user_text(session: Any) -> str | None:
    users = [m.content for m in session.messages if m.role == "user"] if session is not None else []
    return users[-1] if users else None


def new_workflow_id(agent: Agent) -> str:
    return f"{agent.name}-{uuid.uuid4().hex[:12]}"


async def run_session(agent: Agent, session: Any = None, prompt: str | None = None, **fleet: Any) -> RunResult:
    eng = await engine()
    key = eng.register(agent)
    workflow_id = new_workflow_id(agent)
    logger.info("run started", extra={"trace_id": workflow_id, "tools": len(agent.registry)})
    return _logged(await eng.submit(eng.start(key, workflow_id, prompt, session, **fleet)))


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


async def resume_session(agent: Agent, session: Any, *, approve: bool = True, answer: str | None = None, approver: str = "") -> RunResult:
    """Decide as `approver` for the run this Session belongs to (any process), or start a new run from it when it has ended."""
    eng = await engine()
    if session.run_id:
        eng.register(agent)  # this process now serves the agent, so the run can go on here
        result = await eng.submit(eng.resume(agent, session, approve, answer, approver))
        if result is not None:
            return _logged(result)
    session = session.model_copy(deep=True)
    from rein.local.loop import input_tool_names

    machine.prepare_resume(session, approve, answer, input_tool_names(agent.registry), approver)
    # A new run treats its input Session's decisions as conversation, not authority: it asks
    # again, and this process (which holds the decisions) answers with decisions.
    decisions = machine.decisions_for_pending(session)
    return await _redecide(eng, await run_session(agent, session), decisions)


async def _redecide(eng: Engine, result: RunResult, decisions: dict[str, Any]) -> RunResult:
    """Send the decisions the caller already made for the calls the run now asks about."""
    for _ in range(3):  # approvals, then a question, then nothing left to send
        interrupt = result.interrupt
        if result.status != "interrupted" or interrupt is None or result.run_id is None:
            return result
        decided: list[tuple[str, dict]] = []
        if interrupt.type == "need_approval":
            already = machine.decisions_for_pending(result.session)
            for call in result.session.pending_tool_calls:
                decision = decisions.get(call.id)
                if decision is not None and decision.answer is None and call.id not in already:
                    payload = {"tool_call_id": call.id, "approver": decision.approver, "reason": decision.reason}
                    decided.append(("approve" if decision.approved else "deny", payload))
        elif interrupt.type == "need_input" and interrupt.tool_call is not None:
            decision = decisions.get(interrupt.tool_call.id)
            if decision is not None and decision.answer is not None:
                decided.append(("answer", {"text": decision.answer, "approver": decision.approver}))
        if not decided:
            return result
        result = _logged(await eng.submit(eng.decide(result.run_id, decided)))
    return result


async def cancel_session(session: Any, reason: str) -> bool:
    """Cancel the durable run this Session belongs to; False when it is not running."""
    if not session.run_id:
        return False
    eng = await engine()
    return await eng.submit(eng.cancel(session.run_id, reason))


def _waits_at(view: RunStatusView, session: Any) -> bool:
    """Whether the run waits where the Session records: the same calls, arguments included (ids repeat across turns)."""
    return view.iteration == session.iteration and view.pending_tool_calls == list(session.pending_tool_calls)


def _child_waiting(view: RunStatusView, session: Any, agent: Agent) -> Agent | None:
    """The agent-as-tool child whose wait the run shows (its own Session holds the call to that
    child, pending, at the same iteration), else None."""
    if view.interrupt is None or view.iteration != session.iteration:
        return None
    for call in session.pending_tool_calls:
        tool = agent.registry.get(call.name)
        if tool is not None and tool.agent is not None and call.id not in {c.id for c in view.pending_tool_calls}:
            return tool.agent
    return None


def _decision_for(
    interrupt_type: str, pending: list[Any], decided: dict[str, Any], agent: Agent, approve: bool, answer: str | None, approver: str
) -> tuple[str, dict] | None:
    """The one decision that does what `machine.prepare_resume` would for the `pending` calls of `agent`'s
    run (`decided`: those already decided), as `approver`'s; None when no single decision does."""
    from rein.local.loop import input_tool_names

    input_tools = input_tool_names(agent.registry)
    questions = [c for c in pending if c.name in input_tools]
    others = [c for c in pending if c.name not in input_tools and c.id not in decided]
    if interrupt_type == "need_approval":
        if answer is not None and questions:
            return None
        return ("approve" if approve else "deny", {"approver": approver})
    if interrupt_type == "need_input":
        if answer is None or (not approve and others):
            return None
        return ("answer", {"text": answer, "approver": approver})
    if interrupt_type == "error":
        return ("retry", {}) if answer is None else None
    return None


async def stream_session(agent: Agent, prompt: str) -> AsyncIterator[StreamChunk]:
    """The run's text and tool calls as they come (through its stream, wherever its worker runs),
    an `interrupt` chunk when it pauses for a person (resume with `resume`), then a `done` chunk
    with the stop reason ("interrupted" when it paused)."""
    async for item in stream_run(agent, prompt=prompt):
        if isinstance(item, RunResult):
            yield StreamChunk(type="done", finish_reason=item.stop_reason, usage=item.usage)
        else:
            yield item


async def stream_run(agent: Agent, *, prompt: str | None = None, session: Any = None) -> AsyncIterator[StreamChunk | RunResult]:
    """A new run of `prompt` or `session`: its text, tool-call and interrupt chunks as they come, then its
    RunResult at its end or first pause (what rein.web.a2a streams from)."""
    eng = await engine()
    key = eng.register(agent)
    workflow_id = new_workflow_id(agent)
    handle = await eng.submit(eng.begin(key, workflow_id, prompt, session, stream=True))
    runs = ReinClient(eng.client)  # type: ignore[arg-type]
    async for chunk in eng.relay(lambda: runs.stream(workflow_id, until_pause=True)):
        if chunk.type in ("text", "tool_calls", "interrupt"):
            yield chunk
    yield _logged(await eng.submit(eng.wait(handle, WaitRequest())))
