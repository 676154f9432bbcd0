#!/usr/bin/env python
"""What a rolling deploy costs runs in flight: tasks a stopping worker took with it.

    python bench/rolling_deploy.py [--cycles 20] [--streams 6]

One dev server per setting; `--streams` clients start one-call runs of the deploy agent
(tests/agents/deploys.py: a model call, the `pay` tool, the answer) back to back, while worker
processes of this build (`python worker.py`) are replaced one by one, as a rolling deploy does:
start the next, then SIGTERM the previous, `--cycles` times. Then every run's history says what the
stops cost: activities whose first attempt ended by heartbeat timeout (taken by a stopping worker,
never run or never reported: the run waited LoopConfig.heartbeat_timeout_s, 20 s by default) and
workflow tasks that timed out after being started (a task the stopping worker took: the run waits the
workflow task timeout, 10 s by default).

Settings compared: the dev server as rein starts it, and with
`frontend.enableCancelWorkerPollsOnShutdown=true`, under which the server advertises
workerPollCompleteOnShutdown and a stopping worker lets the server answer its long polls instead of
cancelling them; each also with eager activities off, so that every call goes through the queue.
Asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from temporalio.api.enums.v1 import EventType, TimeoutType  # noqa: E402
from temporalio.client import Client  # noqa: E402

from rein.durable.embedded_server import TUNED_DYNAMIC_CONFIG, start_dev_server  # noqa: E402

AGENT = "tests.agents.deploys:pay_agent"


def worker(address: str, queue: str, log: Path, deploy_dir: Path) -> subprocess.Popen:
    env = {**os.environ, "TEMPORAL_ADDRESS": address, "DEPLOY_DIR": str(deploy_dir), "DEPLOY_BUILD": "bench"}
    out = open(log, "ab")
    process = subprocess.Popen([sys.executable, "worker.py", "--agent", AGENT, "--task-queue", queue], cwd=ROOT,
                               env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 60
    while "serving:" not in log.read_text(errors="replace"):
        if process.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"worker did not start:\n{log.read_text()[-2000:]}")
        time.sleep(0.05)
    return process


async def drill(dynamic_config: dict[str, str], cycles: int, streams: int, work: Path) -> dict[str, float]:
    server = start_dev_server(dynamic_config=dynamic_config, log_path=work / "server.log")
    queue = f"rolling-{uuid.uuid4().hex[:6]}"
    try:
        client = await Client.connect(server.address)
        logs = iter(work / f"worker-{i}.log" for i in range(cycles + 1))
        current = await asyncio.to_thread(worker, server.address, queue, next(logs), work)
        run_ids: list[str] = []
        done = asyncio.Event()

        async def stream() -> None:
            while not done.is_set():
                run_id = f"deploy-pay-{uuid.uuid4().hex[:10]}"
                run_ids.append(run_id)
                handle = await client.start_workflow("AgentWorkflow", {"agent": "deploy-pay", "prompt": f"{run_id} 7"},
                                                     id=run_id, task_queue=queue)
                await handle.result()

        tasks = [asyncio.create_task(stream()) for _ in range(streams)]
        for _ in range(cycles):
            await asyncio.sleep(1.0)
            following = await asyncio.to_thread(worker, server.address, queue, next(logs), work)
            current.send_signal(signal.SIGTERM)
            await asyncio.to_thread(current.wait, 30)
            current = following
        done.set()
        await asyncio.wait_for(asyncio.gather(*tasks), 120)
        current.send_signal(signal.SIGTERM)
        current.wait(30)
        return await count_losses(client, run_ids)
    finally:
        server.stop()


async def count_losses(client: Client, run_ids: list[str]) -> dict[str, float]:
    lost_activities = lost_tasks = 0
    for run_id in run_ids:
        history = await client.get_workflow_handle(run_id).fetch_history()
        for event in history.events:
            if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
                failure = event.activity_task_started_event_attributes.last_failure
                if failure.timeout_failure_info.timeout_type == TimeoutType.TIMEOUT_TYPE_HEARTBEAT:
                    lost_activities += 1
            if (event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT
                    and event.workflow_task_timed_out_event_attributes.timeout_type
                    == TimeoutType.TIMEOUT_TYPE_START_TO_CLOSE):
                lost_tasks += 1
    return {"runs": len(run_ids), "activities lost": lost_activities, "workflow tasks lost": lost_tasks}


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=20)
    parser.add_argument("--streams", type=int, default=6)
    args = parser.parse_args()
    settings = {
        "as rein starts it": dict(TUNED_DYNAMIC_CONFIG),
        "polls completed on stop": {**TUNED_DYNAMIC_CONFIG, "frontend.enableCancelWorkerPollsOnShutdown": "true"},
        "eager activities off": {**TUNED_DYNAMIC_CONFIG, "system.enableActivityEagerExecution": "false"},
        "eager activities off, polls completed on stop": {
            **TUNED_DYNAMIC_CONFIG, "system.enableActivityEagerExecution": "false",
            "frontend.enableCancelWorkerPollsOnShutdown": "true"},
    }
    print(f"{args.cycles} worker replacements, {args.streams} streams of one-call runs\n")
    print("| server | runs | activities lost (heartbeat timeout) | workflow tasks lost (timed out) |")
    print("|---|---:|---:|---:|")
    for name, config in settings.items():
        with tempfile.TemporaryDirectory(prefix="rein-rolling-") as tmp:
            found = await drill(config, args.cycles, args.streams, Path(tmp))
        print(f"| {name} | {found['runs']} | {found['activities lost']} | {found['workflow tasks lost']} |", flush=True)


if __name__ == "__main__":
    asyncio.run(main())
