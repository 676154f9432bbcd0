#!/usr/bin/env python
"""Benchmark: how late a thread's text reaches an AG-UI client and an AI SDK (`useChat`) client, beside `rein watch`,
and what serving a turn over AG-UI or the AI SDK adds to the thread's history.

A worker process serves `timed` (bench/stream_delay.py: after a first-token wait it streams DELTAS deltas, each
stamped with the wall-clock time the provider yielded it). This process runs rein's AG-UI endpoint under uvicorn
and is the browser too (httpx, SSE). Per turn:

- **agui**: a POST with the turn's message; delay = the time the first TEXT_MESSAGE_CONTENT arrives minus the stamp
  in it (the model's first token), and the same for every later delta;
- **aisdk**: the same through the AI SDK endpoint (rein.web.ai_sdk, sharing AG-UI's hub as `rein serve` does): a
  chat request's UI message stream, the first `text-delta`;
- **watch**: the same message through `ReinClient.send(stream=True)` and one `ReinClient.stream` reader (what
  `rein watch THREAD` does);
- **nobody**: `send(stream=True)` with no reader (the history floor of a streamed turn).

Turns alternate between the modes, each mode on a thread of its own; history events per turn are the thread's
`history_length` growth. `--viewers N` adds N-1 more viewers to every agui turn (AG-UI GETs) and every aisdk turn
(`useChat` pages resuming the chat: GET .../stream once the turn opened): they share the one reader (rein.web.hub),
so the history must not change. Prints a Markdown table, writes bench/agui.json.

    python bench/agui.py                  # 10 turns per mode (~1 minute)
    python bench/agui.py --turns 20 --viewers 10
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))
os.environ.setdefault("REIN_HOME", tempfile.mkdtemp(prefix="rein-bench-"))

from stream_delay import DELTAS, percentile, timed_worker  # noqa: E402


def stamps(text: str) -> list[float]:
    return [float(s) for s in text.split(";") if s]


async def agui_turn(http: Any, url: str, thread_id: str, viewers: int) -> dict[str, Any]:
    body = {"threadId": thread_id, "runId": uuid.uuid4().hex,
            "messages": [{"id": uuid.uuid4().hex, "role": "user", "content": "talk"}]}
    first, later, text = None, [], []

    async def view() -> None:
        async with http.stream("GET", f"{url}/{thread_id}") as response:
            async for line in response.aiter_lines():
                if line.startswith("data: ") and '"RUN_FINISHED"' in line and '"result"' in line:
                    return

    others = [asyncio.create_task(view()) for _ in range(viewers - 1)] if thread_id_exists(thread_id) else []
    async with http.stream("POST", url, json=body) as response:
        async for line in response.aiter_lines():
            if not line.startswith("data: "):
                continue
            event = json.loads(line[6:])
            if event["type"] == "TEXT_MESSAGE_CONTENT":
                received = time.time()
                text.append(event["delta"])
                said = stamps(event["delta"])
                if first is None:
                    first = received - said[0]
                elif len(said) == 1:
                    later.append(received - said[0])
            if event["type"] in ("RUN_FINISHED", "RUN_ERROR"):
                break
    for task in others:
        task.cancel()
    assert len(stamps("".join(text))) == DELTAS, "text lost or repeated"
    return {"first": first, "later": later}


async def aisdk_turn(http: Any, url: str, thread_id: str, viewers: int) -> dict[str, Any]:
    body = {"id": thread_id, "messages": [{"id": uuid.uuid4().hex, "role": "user", "parts": [{"type": "text", "text": "talk"}]}]}
    first, later, text, others = None, [], [], []

    async def view() -> None:  # a second page: it loads the chat and resumes the turn under way
        async with http.stream("GET", f"{url}/{thread_id}/stream") as response:
            async for line in response.aiter_lines():
                if line.startswith("data: ") and '"finish"' in line:
                    return

    async with http.stream("POST", url, json=body) as response:
        async for line in response.aiter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            if chunk["type"] == "start" and viewers > 1:
                others = [asyncio.create_task(view()) for _ in range(viewers - 1)]
            if chunk["type"] == "text-delta":
                received = time.time()
                text.append(chunk["delta"])
                said = stamps(chunk["delta"])
                if first is None:
                    first = received - said[0]
                elif len(said) == 1:
                    later.append(received - said[0])
            if chunk["type"] in ("finish", "error"):
                break
    await asyncio.gather(*others)
    assert len(stamps("".join(text))) == DELTAS, "text lost or repeated"
    return {"first": first, "later": later}


_started: set[str] = set()


def thread_id_exists(thread_id: str) -> bool:
    known = thread_id in _started
    _started.add(thread_id)
    return known


async def watch_turn(runs: Any, thread_id: str) -> dict[str, Any]:
    receipt = await runs.send(thread_id, "talk", agent="timed", stream=True)
    first, later, text, ours = None, [], [], False
    async for chunk in runs.stream(thread_id, from_offset=receipt.offset):
        ours = ours or (chunk.type == "event" and chunk.name == "turn" and (chunk.data or {}).get("turn") == receipt.turn)
        if chunk.type == "text" and ours:
            received = time.time()
            text.append(chunk.text)
            said = stamps(chunk.text)
            if first is None:
                first = received - said[0]
            elif len(said) == 1:
                later.append(received - said[0])
        if chunk.type == "event" and chunk.name == "turn_end" and (chunk.data or {}).get("turn") == receipt.turn:
            break
    assert len(stamps("".join(text))) == DELTAS, "text lost or repeated"
    return {"first": first, "later": later}


async def quiet_turn(runs: Any, thread_id: str) -> dict[str, Any]:
    await runs.reply(await runs.send(thread_id, "talk", agent="timed", stream=True))
    return {}


async def events(client: Any, thread_id: str) -> int:
    return int((await client.get_workflow_handle(thread_id).describe()).raw_description.workflow_execution_info
               .history_length)


async def measure(address: str, queue: str, turns: int, viewers: int) -> dict[str, Any]:
    import httpx
    import uvicorn
    from starlette.applications import Starlette
    from starlette.routing import Mount

    from rein.client import ReinClient, connect
    from rein.durable.embedded_server import free_port
    from rein.web import agui, ai_sdk

    client = await connect(address)
    runs = ReinClient(client, queue)
    ag = agui.app(client, agents=["timed"], task_queue=queue, open=True)  # a loopback bench: no sign-in
    web = Starlette(routes=[Mount("/agui", app=ag), Mount("/ai-sdk", app=ai_sdk.app(  # one hub, as `rein serve` mounts them
        client, agents=["timed"], task_queue=queue, open=True, hub=ag.state.agui.hub))])
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(web, host="127.0.0.1", port=port, log_level="warning"))
    serving = asyncio.create_task(server.serve())
    while not server.started:
        await asyncio.sleep(0.05)
    url = f"http://127.0.0.1:{port}/agui/timed"
    chat = f"http://127.0.0.1:{port}/ai-sdk/timed"
    threads = {mode: f"bench-{mode}-{uuid.uuid4().hex[:6]}" for mode in ("agui", "aisdk", "watch", "nobody")}
    results: dict[str, list[dict[str, Any]]] = {mode: [] for mode in threads}
    growth: dict[str, list[int]] = {mode: [] for mode in threads}
    async with httpx.AsyncClient(timeout=120, limits=httpx.Limits(max_connections=viewers + 10)) as http:
        turn = {"agui": lambda: agui_turn(http, url, threads["agui"], viewers),
                "aisdk": lambda: aisdk_turn(http, chat, threads["aisdk"], viewers),
                "watch": lambda: watch_turn(runs, threads["watch"]),
                "nobody": lambda: quiet_turn(runs, threads["nobody"])}
        for mode in threads:  # warm-up: the thread starts, caches fill
            await turn[mode]()
        for _ in range(turns):
            for mode in threads:
                before = await events(client, threads[mode])
                results[mode].append(await turn[mode]())
                await asyncio.sleep(0.3)  # let a reader's last poll settle before counting
                growth[mode].append(await events(client, threads[mode]) - before)
    server.should_exit = True
    await serving
    report: dict[str, Any] = {"turns": turns, "viewers": viewers, "deltas": DELTAS}
    for mode in ("agui", "aisdk", "watch"):
        firsts = [r["first"] * 1000 for r in results[mode]]
        later = [d * 1000 for r in results[mode] for d in r["later"]]
        report[mode] = {"first_p50_ms": round(statistics.median(firsts), 1), "first_p95_ms": round(percentile(firsts, 95), 1),
                        "delta_p50_ms": round(statistics.median(later), 1), "delta_p95_ms": round(percentile(later, 95), 1)}
    report["history_events_per_turn"] = {mode: statistics.median(g) for mode, g in growth.items()}
    report["history_events_per_turn_range"] = {mode: [min(g), max(g)] for mode, g in growth.items()}
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=10)
    parser.add_argument("--viewers", type=int, default=1,
                        help="viewers of every agui and aisdk turn (the POST included)")
    args = parser.parse_args()

    load_before = os.getloadavg()
    with timed_worker("agui-bench") as (server, queue, _):
        report = asyncio.run(measure(server.address, queue, args.turns, args.viewers))
    report["load"] = [round(os.getloadavg()[0], 2), round(load_before[0], 2)]
    (HERE / "agui.json").write_text(json.dumps(report, indent=1) + "\n")
    print("| path | first delta p50 | p95 | later deltas p50 | p95 | history events per turn |")
    print("|---|---:|---:|---:|---:|---:|")
    for mode in ("agui", "aisdk", "watch"):
        r = report[mode]
        print(f"| {mode} | {r['first_p50_ms']} ms | {r['first_p95_ms']} ms | {r['delta_p50_ms']} ms | {r['delta_p95_ms']} ms "
              f"| {report['history_events_per_turn'][mode]} |")
    print(f"| nobody reads | | | | | {report['history_events_per_turn']['nobody']} |")
    print(json.dumps(report))


if __name__ == "__main__":
    main()
