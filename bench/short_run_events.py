#!/usr/bin/env python
"""Where a short run's cost goes: the events of one run, floor against rein, side by side.

One dev server, the workload of bench/lean.py (N iterations of a model call and a 1 KB tool
result), three runs: the raw floor, rein started by `ReinClient.start` (start-time search
attributes) and rein started by a plain Temporal client (`client.start_workflow("AgentWorkflow",
{"agent", "prompt"})`, as ops tooling does). Prints every event of each run: its type, protobuf
bytes, whether Temporal Cloud bills it as an action (bench/lean.py's ACTIONS) and what it holds
(marker name, upserted search attributes, activity type), its server time in ms after the run's
first event (where a short run's time goes), then the totals.

    python bench/short_run_events.py            # N = 1
    python bench/short_run_events.py --n 10
    python bench/short_run_events.py --times 30   # median times of 30 runs each, sandboxed floor too
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from lean import ACTIONS, Bench, shape  # noqa: E402  (sets up sys.path and REIN_HOME)
from temporalio.api.enums.v1 import EventType  # noqa: E402

from rein.core.log import disable_logging  # noqa: E402
from rein.durable.embedded_server import start_dev_server  # noqa: E402


def what(event: Any) -> str:
    """The part of an event that says why it is there."""
    kind = event.event_type
    if kind == EventType.EVENT_TYPE_MARKER_RECORDED:
        attrs = event.marker_recorded_event_attributes
        summary = event.user_metadata.summary.data.decode() if event.HasField("user_metadata") else ""
        return f"{attrs.marker_name} {summary}".strip()
    if kind == EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES:
        fields = event.upsert_workflow_search_attributes_event_attributes.search_attributes.indexed_fields
        return ", ".join(f"{k}={json.loads(v.data)}" for k, v in sorted(fields.items()))
    if kind == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
        summary = event.user_metadata.summary.data.decode() if event.HasField("user_metadata") else ""
        return f"{event.activity_task_scheduled_event_attributes.activity_type.name} {summary}".strip()
    if kind == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
        fields = event.workflow_execution_started_event_attributes.search_attributes.indexed_fields
        return ", ".join(f"{k}={json.loads(v.data)}" for k, v in sorted(fields.items()))
    return ""


def ms_since_start(history: Any) -> list[float]:
    """Each event's server timestamp, in ms after the run's first event: where the run's time goes."""
    first = history.events[0].event_time.ToNanoseconds()
    return [(e.event_time.ToNanoseconds() - first) / 1e6 for e in history.events]


def table(title: str, history: Any) -> str:
    lines = [f"### {title}", "", "| # | ms | event | bytes | action | what |", "|---|---|---|---|---|---|"]
    for e, ms in zip(history.events, ms_since_start(history), strict=True):
        name = EventType.Name(e.event_type).removeprefix("EVENT_TYPE_")
        billed = "yes" if e.event_type in ACTIONS else ""
        lines.append(f"| {e.event_id} | {ms:.1f} | {name} | {e.ByteSize():,} | {billed} | {what(e)} |")
    s = shape([history])
    lines += ["", f"{s['events']} events, {s['bytes']:,} bytes, {s['actions']} actions, "
                  f"{ms_since_start(history)[-1]:.1f} ms first to last event", ""]
    return "\n".join(lines)


TIMED = ("floor", "floor-sandboxed", "rein", "rein-plain", "rein-unsandboxed", "rein-stepped", "rein-stepped-plain")


async def times(bench: Bench, n: int, pad: int, k: int) -> str:
    """Median client time (start to result) and server time (first to last event) of k interleaved runs."""
    client: dict[str, list[float]] = {v: [] for v in TIMED}
    server: dict[str, list[float]] = {v: [] for v in TIMED}
    for _ in range(k):
        for variant in TIMED:
            wf_id = f"times-{variant}-{uuid.uuid4().hex[:8]}"
            client[variant].append(1000 * (await bench.one(variant, n, pad, wf_id=wf_id, shape_of=False))["s"])
            raw = bench.raw_client if variant.startswith("floor") else bench.rein_client
            server[variant].append(ms_since_start(await raw.get_workflow_handle(wf_id).fetch_history())[-1])
    floor, sandboxed = statistics.median(client["floor"]), statistics.median(client["floor-sandboxed"])
    lines = [f"N = {n}, {pad} B tool results, medians of {k} interleaved runs", "",
             "| variant | client ms | server ms | / floor | / sandboxed floor |", "|---|---:|---:|---:|---:|"]
    for variant in TIMED:
        ms = statistics.median(client[variant])
        lines.append(f"| {variant} | {ms:.1f} | {statistics.median(server[variant]):.1f} "
                     f"| {ms / floor:.2f}× | {ms / sandboxed:.2f}× |")
    return "\n".join(lines)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=1, help="iterations (model call + tool call) per run")
    parser.add_argument("--pad", type=int, default=1024, help="tool result size")
    parser.add_argument("--times", type=int, default=0, metavar="K",
                        help="instead: the median time of K interleaved runs of each variant, the sandboxed ones too")
    args = parser.parse_args()
    disable_logging()
    server = start_dev_server()
    bench = Bench(server.address)
    try:
        await bench.start()
        for variant in TIMED:  # warm each path once (first-run imports)
            await bench.one(variant, 1, args.pad, shape_of=False)
        if args.times:
            print(await times(bench, args.n, args.pad, args.times))
            return
        out = []
        for variant, title in (("floor", "floor (bench/floor.py)"), ("rein", "rein (lean start), ReinClient.start"),
                               ("rein-plain", "rein (lean start), plain client.start_workflow"),
                               ("rein-stepped", "rein, an agent with middleware, ReinClient.start"),
                               ("rein-stepped-plain", "rein, an agent with middleware, plain client.start_workflow"),
                               ("rein-tuned", "rein, an agent with a model timeout of its own, ReinClient.start")):
            wf_id = f"events-{variant}-{uuid.uuid4().hex[:8]}"
            await bench.one(variant, args.n, args.pad, wf_id=wf_id, shape_of=False)
            client = bench.raw_client if variant == "floor" else bench.rein_client
            out.append(table(f"{title}, N = {args.n}", await client.get_workflow_handle(wf_id).fetch_history()))
        print("\n".join(out))
    finally:
        await bench.stop()
        server.stop()


if __name__ == "__main__":
    asyncio.run(main())
