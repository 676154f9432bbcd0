"""rein's data converter against temporalio's pydantic one: CPU per encode and decode, bytes, equivalence.

    python bench/converter.py                      # ~2 minutes, no Temporal server
    python bench/converter.py --reps 5 --min-time 0.2
    python bench/converter.py --runs 100           # also whole runs on a local dev server (below)

Issue 33 item 8: use temporalio's pydantic data converter unless a measured saving says otherwise.
Both sides here are payload converters as a DataConverter builds them (`DataConverter._new_payload_converter`,
i.e. wrapped in the SDK's transfer-type converter):

  rein      rein.temporal.converter.rein_data_converter(): ReinPayloadConverter (_ProcessCachedJSON)
  contrib   temporalio.contrib.pydantic.pydantic_data_converter: PydanticPayloadConverter

on rein's real payloads, in the form rein puts them on the wire (a model, or the dict an activity or
query returns) and decoded with the type hint the reader uses. Measured, per payload, CPU time
(`time.process_time`) of `to_payloads([value])` and `from_payloads(payloads, [hint])`:

  warm      one converter, its adapters built (what a long-lived converter pays per call);
  fresh     a new payload converter, then its first decode of that hint: what temporalio pays where it
            builds a converter for a run, an activity or a storage context and decodes with it.

Each figure is `--reps` repetitions (converters alternated within each repetition), per repetition
the mean over enough calls for `--min-time` seconds; the tables give the median and the minimum.
Also checked, not timed: both converters give the same payload bytes, and decode(encode(x)) == x
with each converter and across them (rein's encoding read by the contrib and back).

`--runs K [--n N]` (needs the temporal binary rein's tests use): one dev server, one rein worker
(`rein.create_worker` defaults, bench/loop_iterations.py's bench-add agent, runs of N tool calls), K runs
per repetition with each converter in turn. The contrib variant makes every payload converter built
during its batches the contrib's own (`ReinPayloadConverter.__init__` is PydanticPayloadConverter's for the
batch; the client's and worker's DataConverters, built before, keep theirs): rein's codec and external
storage stay, only the payload converter changes. Per run: payload converters built, TypeAdapters built,
JSON decodes, the thread CPU spent in those constructors, and the process CPU (client and worker).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import os
import random
import statistics
import sys
import tempfile
import threading
import time
import timeit
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path[:0] = [str(Path(__file__).resolve().parent.parent), str(Path(__file__).resolve().parent)]
os.environ.setdefault("REIN_HOME", tempfile.mkdtemp(prefix="rein-bench-converter-"))

from pydantic import TypeAdapter  # noqa: E402
from temporalio.api.common.v1 import Payload  # noqa: E402
from temporalio.contrib.pydantic import PydanticPayloadConverter, pydantic_data_converter  # noqa: E402
from temporalio.converter import DataConverter, PayloadConverter  # noqa: E402

from rein.core.contract import (  # noqa: E402
    AgentInput,
    FirstCall,
    ModelCallInput,
    ModelReply,
    RunOutcome,
    RunStatusView,
    ToolCallInput,
)
from rein.core.digest import EMPTY, call_hash, extend, message_hash, ref  # noqa: E402
from rein.core.ir import Completion, Message, ToolCall, ToolResult, Usage  # noqa: E402
from rein.core.result import Interrupt  # noqa: E402
from rein.core.session import Decision, Session, Stage  # noqa: E402
from rein.temporal import converter  # noqa: E402

REIN = converter.rein_data_converter()
CONTRIB = pydantic_data_converter
CONVERTERS: dict[str, DataConverter] = {"rein": REIN, "contrib": CONTRIB}


# ---------------------------------------------------------------- payloads, with realistic content

_rng = random.Random(33)
_WORDS = ("the request handler returns a cached value when the key is present otherwise it reads "
          "from the store and writes back; café naïve — résumé 数据 \"quoted\" {braces} [list] path/to/file "
          "def class return await async import from None True False self.value = 42").split()


def text(size: int) -> str:
    """About `size` characters of prose with the escapes a real tool output has (quotes, newlines, non-ASCII)."""
    out: list[str] = []
    n = 0
    while n < size:
        word = _rng.choice(_WORDS)
        out.append(word)
        n += len(word) + 1
        if _rng.random() < 0.06:
            out.append("\n")
    return " ".join(out)[:size]


def tool_call(i: int) -> ToolCall:
    return ToolCall(id=f"call_{i:04d}_{uuid.UUID(int=_rng.getrandbits(128)).hex[:12]}", name="search_code",
                    arguments={"path": f"src/pkg/module_{i}.py", "query": f"def handler_{i}", "max_results": 20,
                               "include_tests": i % 2 == 0})


def session(n: int) -> Session:
    """A run's conversation of `n` messages: a prompt, then model replies with tool calls (one, every fourth
    two) and their ~1 KB results, and a final answer; with 2 messages the run waits on the first call."""
    messages = [Message(role="user", content=text(300))]
    calls = 0
    pending: list[ToolCall] = []
    while len(messages) < n:
        left = n - len(messages)
        if left == 1 and len(messages) > 2:
            messages.append(Message(role="assistant", content=text(600)))
            break
        batch = [tool_call(calls + k) for k in range(2 if calls % 4 == 3 and left >= 3 else 1)]
        calls += len(batch)
        messages.append(Message(role="assistant", content=text(80), tool_calls=batch))
        for call in batch:
            if len(messages) == n:
                pending.append(call)
                continue
            messages.append(Message(role="tool", tool_call_id=call.id, content=text(1000)))
    iterations = sum(1 for m in messages if m.role == "assistant")
    return Session(
        messages=messages,
        stage=Stage.RUN_TOOLS if pending else Stage.DONE if n > 2 else Stage.CALL_MODEL,
        pending_tool_calls=pending,
        iteration=iterations,
        usage=Usage(input_tokens=1_800 * iterations * (iterations + 1) // 2, output_tokens=90 * iterations,
                    cost_usd=0.0042 * iterations),
        last_signature="search_code:" + "ab12" * 4 if iterations else None,
        done=not pending and n > 2,
        stop_reason="done" if not pending and n > 2 else None,
        decisions=[Decision(tool_call_id=messages[1].tool_calls[0].id, approved=True, approver="ops@example.com",
                            reason="read-only")] if n >= 2 and messages[1].tool_calls else [],
        run_id="researcher-3f9a2c1b7d4e",
    )


def agent_input(n: int) -> AgentInput:
    return AgentInput(agent="researcher", prompt=None, session=session(n), config={"max_iterations": 60},
                      metadata={"ticket": "T-12345", "team": "search"}, stream=True)


def model_call_steady() -> ModelCallInput:
    """A model call after a tool round: the reply and its results are the worker's (a count), a digest."""
    hashes = [message_hash(m) for m in session(6).messages]
    return ModelCallInput(agent="researcher", produced=3, first_index=3, digest=extend(EMPTY, hashes),
                          conversation="c-2", version="v3f9a2c1b7d4e")


def model_call_first() -> ModelCallInput:
    """A lean start's first call: the prompt whole, and the client's config."""
    return ModelCallInput(agent="researcher", new_messages=[Message(role="user", content=text(300))],
                          start=FirstCall(config={"max_iterations": 60}))


def model_call_whole(n: int) -> ModelCallInput:
    """A conversation sent whole again (after a rewrite: compaction, middleware, a Session given as input)."""
    messages = session(n).messages
    return ModelCallInput(agent="researcher", new_messages=list(messages),
                          digest=extend(EMPTY, (message_hash(m) for m in messages)),
                          conversation="c-3", version="v3f9a2c1b7d4e")


def reply_tool_calls() -> Completion:
    return Completion(message=Message(role="assistant", content=text(80), tool_calls=[tool_call(900), tool_call(901)]),
                      usage=Usage(input_tokens=21_450, output_tokens=96, cost_usd=0.0551), finish_reason="tool_calls")


def reply_answer() -> Completion:
    return Completion(message=Message(role="assistant", content=text(2000)),
                      usage=Usage(input_tokens=24_312, output_tokens=512, cost_usd=0.0659), finish_reason="stop")


def status_view() -> RunStatusView:
    calls = [tool_call(700), tool_call(701)]
    return RunStatusView(status="waiting_approval", stage="run_tools", iteration=7,
                         usage=Usage(input_tokens=51_000, output_tokens=740, cost_usd=0.131),
                         interrupt=Interrupt(type="need_approval", tool_call=calls[0], message="search_code needs approval"),
                         pending_tool_calls=calls, stop_reason=None, pause=2, first_step=0)


def run_outcome() -> RunOutcome:
    return RunOutcome(status="done", output=text(1500), stop_reason="done",
                      usage=Usage(input_tokens=160_000, output_tokens=3_100, cost_usd=0.43), elapsed_s=48.7316,
                      run_id="researcher-3f9a2c1b7d4e", iterations=12, step_count=27, message_count=38)


@dataclass
class Case:
    name: str
    value: Any
    """What rein hands the converter (a model, or the dict or str an activity or a query returns)."""
    hint: Any
    """The type hint the reader decodes it with (None: no hint)."""
    expected: Any
    read: Callable[[Any], Any] = lambda v: v
    """What the reader does with the decoded value before using it (e.g. the workflow's model_validate)."""
    where: str = ""


def cases() -> list[Case]:
    out: list[Case] = []
    x: Any
    for n in (2, 50, 500):
        x = agent_input(n)
        out.append(Case(f"AgentInput, session of {n}", x, AgentInput, x, where="typed reader"))
    x = agent_input(50)
    out.append(Case("AgentInput, session of 50, no hint", x, None, x, AgentInput.model_validate,
                    "the workflow: `run(*args: Any)`, then `AgentInput.model_validate`"))
    start = {"agent": "researcher", "prompt": text(200)}
    out.append(Case("start input dict (ReinClient.start)", start, None, start, where="the workflow"))
    for name, x in (("ModelCallInput, steady (count + digest)", model_call_steady()),
                    ("ModelCallInput, first call", model_call_first()),
                    ("ModelCallInput, 50 messages whole", model_call_whole(50))):
        out.append(Case(name, x, ModelCallInput, x, where="model activity"))
    for name, c in (("ModelReply, 2 tool calls", reply_tool_calls()), ("ModelReply, 2 KB answer", reply_answer())):
        expected = ModelReply.model_validate(c.model_dump())
        out.append(Case(name + " (activity's dict)", c.compact(), ModelReply, expected, where="the workflow"))
    call = tool_call(42)
    x = ToolCallInput(agent="researcher", ref=ref(call_hash(call)))
    out.append(Case("ToolCallInput, by ref", x, ToolCallInput, x, where="tool activity"))
    x = ToolCallInput(agent="researcher", call=call, version="v3f9a2c1b7d4e")
    out.append(Case("ToolCallInput, whole call", x, ToolCallInput, x, where="tool activity"))
    content = text(1000)
    out.append(Case("tool result, 1 KB (activity's str)", content, ToolResult | str, content, where="the workflow"))
    err = ToolResult(tool_call_id=call.id, content=text(1000), is_error=True)
    out.append(Case("tool error, 1 KB (activity's dict)", err.model_dump(mode="json"), ToolResult | str, err,
                    where="the workflow"))
    view = status_view()
    out.append(Case("RunStatusView (status query's dict)", view.model_dump(mode="json"), None, view,
                    RunStatusView.model_validate, "client: query, then model_validate"))
    outcome = run_outcome()
    out.append(Case("RunOutcome (workflow result dict)", outcome.model_dump(mode="json"), RunOutcome,
                    RunOutcome.model_validate(outcome.model_dump(mode="json")), where="client: result_type"))
    return out


RAW_VALUES: list[tuple[str, Any, Any]] = [
    ("None", None, None),
    ("bytes", b"\x00\x01raw", bytes),
    ("str", "plain text é", str),
    ("float", 3.25, float),
    ("nested dict", {"a": [1, 2, {"b": None}], "c": "d"}, dict[str, Any]),
    ("datetime", datetime(2026, 12, 3, 15, 0, tzinfo=UTC), datetime),
    ("uuid", uuid.UUID(int=33), uuid.UUID),
    ("protobuf Payload", Payload(metadata={"k": b"v"}, data=b"x"), Payload),
]


# ---------------------------------------------------------------- checks


def payload_bytes(pc: PayloadConverter, value: Any) -> bytes:
    [p] = pc.to_payloads([value])
    return p.SerializeToString(deterministic=True)


def check(all_cases: list[Case]) -> list[str]:
    """Same bytes from both converters; decode(encode(x)) == x with each and across them."""
    lines = []
    pcs = {k: dc._new_payload_converter() for k, dc in CONVERTERS.items()}
    for c in all_cases:
        data = {k: payload_bytes(pc, c.value) for k, pc in pcs.items()}
        same = data["rein"] == data["contrib"]
        trips = []
        for enc in pcs:
            for dec in pcs:
                [p] = pcs[enc].to_payloads([c.value])
                got = c.read(pcs[dec].from_payloads([p], [c.hint])[0])
                trips.append(got == c.expected and type(got) is type(c.expected))
        lines.append(f"- {c.name}: same bytes {'yes' if same else 'NO'}; round trips (rein→rein, rein→contrib, "
                     f"contrib→rein, contrib→contrib) {'all equal' if all(trips) else trips}")
    for name, value, hint in RAW_VALUES:
        data = {k: payload_bytes(pc, value) for k, pc in pcs.items()}
        decoded = {k: pc.from_payloads(pc.to_payloads([value]), [hint])[0] for k, pc in pcs.items()}
        enc = pcs["rein"].to_payloads([value])[0].metadata["encoding"].decode()
        lines.append(f"- raw {name} ({enc}): same bytes {'yes' if data['rein'] == data['contrib'] else 'NO'}; "
                     f"decoded equal {'yes' if decoded['rein'] == decoded['contrib'] == value else decoded}")
    return lines


# ---------------------------------------------------------------- timing


def per_call(fn: Callable[[], Any], number: int) -> float:
    """CPU seconds per call of `fn`, over `number` calls."""
    return timeit.Timer(fn, timer=time.process_time).timeit(number) / number


def calls_for(fn: Callable[[], Any], min_time: float) -> int:
    """How many calls of `fn` take about `min_time` CPU seconds."""
    number = 1
    while timeit.Timer(fn, timer=time.process_time).timeit(number) < min_time / 4 and number < 1 << 20:
        number *= 2
    return number * 4


Row = dict[str, list[float]]


def measure(all_cases: list[Case], reps: int, min_time: float) -> tuple[dict[str, Row], dict[str, list[float]]]:
    """Per case and `{converter} {op}`: seconds per call, one figure per repetition."""
    warm: dict[str, Row] = {c.name: {} for c in all_cases}
    construct: dict[str, list[float]] = {}
    pcs = {k: dc._new_payload_converter() for k, dc in CONVERTERS.items()}
    plans: list[tuple[str, str, dict[str, Callable[[], Any]]]] = []
    for c in all_cases:
        payloads = pcs["rein"].to_payloads([c.value])
        for pc in pcs.values():
            pc.from_payloads(payloads, [c.hint])  # warm: adapters built
        plans.append((c.name, "encode", {k: functools.partial(pc.to_payloads, [c.value]) for k, pc in pcs.items()}))
        plans.append((c.name, "decode", {k: functools.partial(pc.from_payloads, payloads, [c.hint])
                                         for k, pc in pcs.items()}))
        plans.append((c.name, "fresh", {k: functools.partial(_fresh_decode, dc, payloads, c.hint)
                                        for k, dc in CONVERTERS.items()}))
    builds = {k: dc._new_payload_converter for k, dc in CONVERTERS.items()}
    numbers = {(name, op): calls_for(fns["rein"], min_time) for name, op, fns in plans}
    build_number = calls_for(builds["rein"], min_time)
    order = list(CONVERTERS)
    for rep in range(reps):
        print(f"repetition {rep + 1}/{reps} ...", file=sys.stderr, flush=True)
        order.reverse()
        for name, op, fns in plans:
            for k in order:
                warm[name].setdefault(f"{k} {op}", []).append(per_call(fns[k], numbers[(name, op)]))
        for k in order:
            construct.setdefault(k, []).append(per_call(builds[k], build_number))
    return warm, construct


def _fresh_decode(dc: DataConverter, payloads: Any, hint: Any) -> Any:
    """A payload converter as temporalio builds one per run, activity or storage context, and its first decode."""
    return dc._new_payload_converter().from_payloads(payloads, [hint])


def us(values: list[float]) -> str:
    return f"{statistics.median(values) * 1e6:.1f} ({min(values) * 1e6:.1f})"


def ratio(a: list[float], b: list[float]) -> str:
    return f"{statistics.median(b) / statistics.median(a):.2f}×"


def report(all_cases: list[Case], warm: dict[str, Row], construct: dict[str, list[float]]) -> None:
    print("\nWarm converter, µs of CPU per call, median (min) of the repetitions; ratio = contrib / rein (medians):\n")
    print("| payload | decode hint | bytes | rein encode | contrib encode | ratio | rein decode | contrib decode | ratio |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for c in all_cases:
        r = warm[c.name]
        size = len(REIN.payload_converter.to_payloads([c.value])[0].data)
        hint = "none" if c.hint is None else getattr(c.hint, "__name__", None) or str(c.hint).replace("rein.core.ir.", "")
        print(f"| {c.name} | `{hint}` | {size:,} | {us(r['rein encode'])} | {us(r['contrib encode'])} | "
              f"{ratio(r['rein encode'], r['contrib encode'])} | {us(r['rein decode'])} | {us(r['contrib decode'])} | "
              f"{ratio(r['rein decode'], r['contrib decode'])} |")
    print("\nFresh payload converter (as temporalio builds one per run, activity and storage context), µs of CPU:\n")
    print("| | rein | contrib | contrib − rein |")
    print("|---|---:|---:|---:|")
    print(f"| build the payload converter | {us(construct['rein'])} | {us(construct['contrib'])} | "
          f"{(statistics.median(construct['contrib']) - statistics.median(construct['rein'])) * 1e6:.1f} |")
    for c in all_cases:
        r = warm[c.name]
        diff = statistics.median(r["contrib fresh"]) - statistics.median(r["rein fresh"])
        print(f"| build + first decode: {c.name} | {us(r['rein fresh'])} | {us(r['contrib fresh'])} | {diff * 1e6:.1f} |")


# ---------------------------------------------------------------- --runs: whole runs on a dev server


@contextmanager
def contrib_converters(on: bool) -> Iterator[None]:
    """Every payload converter built meanwhile is temporalio's PydanticPayloadConverter as it ships."""
    if not on:
        yield
        return
    converter.ReinPayloadConverter.__init__ = PydanticPayloadConverter.__init__  # type: ignore[method-assign]
    try:
        yield
    finally:
        converter.ReinPayloadConverter.__init__ = _REIN_INIT  # type: ignore[method-assign]


_REIN_INIT = converter.ReinPayloadConverter.__init__


class Tally:
    """Per batch: payload converters built, TypeAdapters built, JSON decodes, and the thread CPU spent
    inside the first two (time.thread_time around each call, so the sandbox's threads count too)."""

    def __init__(self) -> None:
        self.n = {"converters": 0, "adapters": 0, "decodes": 0}
        self.cpu = {"converters": 0.0, "adapters": 0.0}
        self.by_type: dict[str, list[float]] = {}
        """Each TypeAdapter's CPU by the type it adapts and the thread that built it."""

    def timed(self, what: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(self_: Any, *args: Any, **kwargs: Any) -> Any:
            began = time.thread_time()
            try:
                return fn(self_, *args, **kwargs)
            finally:
                spent = time.thread_time() - began
                self.n[what] += 1
                self.cpu[what] += spent
                if what == "adapters":
                    hint = str(args[0]).replace("<class '", "").replace("'>", "").replace("rein.core.", "")
                    thread = threading.current_thread().name
                    where = "workflow thread" if thread.startswith("temporal_workflow") else thread
                    self.by_type.setdefault(f"`{hint}` ({where})", []).append(spent)
        return wrapper

    def counted(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            self.n["decodes"] += 1
            return fn(*args, **kwargs)
        return wrapper


@contextmanager
def tallied(tally: Tally, contrib: bool) -> Iterator[None]:
    """As contrib_converters, and every converter, adapter and JSON decode counted into `tally`."""
    from temporalio.contrib.pydantic import PydanticJSONPlainPayloadConverter

    saved = (TypeAdapter.__init__, converter._ProcessCachedJSON.from_payload,
             PydanticJSONPlainPayloadConverter.from_payload)
    converter.ReinPayloadConverter.__init__ = tally.timed(  # type: ignore[method-assign]
        "converters", PydanticPayloadConverter.__init__ if contrib else _REIN_INIT)
    TypeAdapter.__init__ = tally.timed("adapters", saved[0])  # type: ignore[method-assign]
    converter._ProcessCachedJSON.from_payload = tally.counted(saved[1])  # type: ignore[method-assign]
    PydanticJSONPlainPayloadConverter.from_payload = tally.counted(saved[2])  # type: ignore[method-assign]
    try:
        yield
    finally:
        converter.ReinPayloadConverter.__init__ = _REIN_INIT  # type: ignore[method-assign]
        TypeAdapter.__init__ = saved[0]  # type: ignore[method-assign]
        converter._ProcessCachedJSON.from_payload = saved[1]  # type: ignore[method-assign]
        PydanticJSONPlainPayloadConverter.from_payload = saved[2]  # type: ignore[method-assign]


async def whole_runs(runs: int, reps: int, n: int) -> None:
    import resource

    from loop_iterations import check_rein_result, make_agents
    from temporalio.client import Client

    import rein
    from rein.core.contract import WORKFLOW_TYPE
    from rein.core.log import disable_logging
    from rein.testing import start_local

    disable_logging()
    env = await start_local()
    client = await Client.connect(env.client.service_client.config.target_host,
                                  data_converter=converter.rein_data_converter())
    queue = f"converter-{uuid.uuid4().hex[:6]}"
    worker = rein.create_worker(client, make_agents(), task_queue=queue)
    task = asyncio.create_task(worker.run())

    async def one() -> None:
        handle = await client.start_workflow(WORKFLOW_TYPE, {"agent": "bench-add", "prompt": f"iterations={n}"},
                                             id=f"{queue}-{uuid.uuid4().hex[:8]}", task_queue=queue)
        check_rein_result(await handle.result(), n)

    rows: dict[str, list[tuple[float, Tally]]] = {"rein": [], "contrib": []}
    try:
        for variant in rows:
            with contrib_converters(variant == "contrib"):
                for _ in range(5):
                    await one()  # warm: imports, sandbox, caches
        for rep in range(reps):
            print(f"whole runs: repetition {rep + 1}/{reps} ...", file=sys.stderr, flush=True)
            for variant in (("rein", "contrib") if rep % 2 == 0 else ("contrib", "rein")):
                tally = Tally()
                with tallied(tally, variant == "contrib"):
                    before = resource.getrusage(resource.RUSAGE_SELF)
                    for _ in range(runs):
                        await one()
                    after = resource.getrusage(resource.RUSAGE_SELF)
                cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
                rows[variant].append((cpu / runs, tally))
    finally:
        await worker.shutdown()
        await task
        await env.shutdown()

    def med(variant: str, f: Callable[[tuple[float, Tally]], float]) -> float:
        return statistics.median(f(r) for r in rows[variant])

    print(f"\nWhole runs of N = {n} (bench-add: N model calls with a tool call each, N tool calls, the answer), "
          f"one worker and its client in this process, {runs} runs per repetition, {reps} repetitions "
          "(variants alternated), per run, medians:\n")
    print("| payload converter | process CPU ms (min) | converters built | CPU in their constructors µs "
          "| TypeAdapters built | CPU building them µs | JSON decodes |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for variant, r in rows.items():
        print(f"| {variant} | {med(variant, lambda x: x[0]) * 1e3:.2f} ({min(x[0] for x in r) * 1e3:.2f}) "
              f"| {med(variant, lambda x: x[1].n['converters'] / runs):.1f} "
              f"| {med(variant, lambda x: x[1].cpu['converters'] / runs) * 1e6:.0f} "
              f"| {med(variant, lambda x: x[1].n['adapters'] / runs):.1f} "
              f"| {med(variant, lambda x: x[1].cpu['adapters'] / runs) * 1e6:.0f} "
              f"| {med(variant, lambda x: x[1].n['decodes'] / runs):.1f} |")
    rein_cpu, contrib_cpu = med("rein", lambda x: x[0]), med("contrib", lambda x: x[0])
    print(f"\ncontrib − rein: {(contrib_cpu - rein_cpu) * 1e3:.2f} ms of process CPU per run "
          f"({(contrib_cpu - rein_cpu) / rein_cpu:+.1%} of rein's); per repetition: "
          + ", ".join(f"{(c[0] - r[0]) * 1e3:+.2f}" for r, c in zip(rows["rein"], rows["contrib"], strict=True)))
    built: dict[str, list[float]] = {}
    for _, tally in rows["contrib"]:
        for key, spent in tally.by_type.items():
            built.setdefault(key, []).extend(spent)
    total = runs * len(rows["contrib"])
    print("\nThe contrib's TypeAdapters, per run, by type (thread), median µs of CPU each: "
          + "; ".join(f"{k} {len(v) / total:.1f} × {statistics.median(v) * 1e6:.0f}" for k, v in sorted(built.items())))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--min-time", type=float, default=0.2, help="CPU seconds per figure per repetition")
    parser.add_argument("--runs", type=int, default=0, help="also time whole runs on a dev server, this many per rep")
    parser.add_argument("--run-reps", type=int, default=6)
    parser.add_argument("--n", type=int, default=1, help="whole runs: tool calls per run")
    args = parser.parse_args()
    import pydantic
    import temporalio

    all_cases = cases()
    print(f"temporalio {temporalio.__version__}, pydantic {pydantic.VERSION}, Python {sys.version.split()[0]}; "
          f"rein codec: {type(REIN.payload_codec).__name__}, storage: {type(REIN.external_storage).__name__}; "
          f"contrib codec: {CONTRIB.payload_codec}, storage: {CONTRIB.external_storage}\n")
    print("Equivalence:\n")
    print("\n".join(check(all_cases)))
    warm, construct = measure(all_cases, args.reps, args.min_time)
    report(all_cases, warm, construct)
    if args.runs:
        asyncio.run(whole_runs(args.runs, args.run_reps, args.n))


if __name__ == "__main__":
    main()
