"""`rein limits set --model` bites, or refuses (issue 34, item 2).

Before: `rein limits set --model openai/gpt-4o-mini --rps 5` exited 0 with no worker routing the
provider's calls (REIN_MODEL_QUEUES is opt-in on the worker), `rein limits` did not list it, and a
burst of 40 runs sent 15 requests a second to the vendor, 63 of them refused with 429. Now the
command refuses in one line naming what to change when no worker serves the provider's queue;
with the fleet set up as docs/fleet.md shows, the same burst stays under the rate at the vendor,
and `rein limits` lists the limit. Real dev server, the real `rein` console script, LiteLLM over
HTTP to tests/vendor_server.py; the rate is counted at the vendor, per one-second window.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from typing import Any

import rein
from rein import Agent, LiteLLMProvider
from rein.cli.app import EXIT_NO_WORKER
from rein.client import ReinClient
from rein.core.contract import model_queue
from tests.test_cli import assert_one_line_error, rein_cli
from tests.vendor_server import Reply, VendorServer

MODEL = "openai/gpt-4o-mini"
RPS = 5
VENDOR_RPS = 15
"""The vendor refuses above this many requests in any one second: three times the limit. docs/fleet.md asks
for twice (Temporal's limiter lets a short burst through after an idle moment); a CPU-starved worker (CI runs
three test processes on two cores) can bunch calls the server dispatched at the limit. Without the limit the
burst's 40 calls leave within a second or two: far above it."""
RUNS = 40


def _windows(times: list[float], width: float) -> int:
    """The most requests in any window of `width` seconds."""
    times = sorted(times)
    return max((sum(1 for u in times[i:] if u - t < width) for i, t in enumerate(times)), default=0)


async def test_a_model_limit_no_worker_routes_is_refused_in_one_line(dev) -> None:  # noqa: ANN001
    address = dev.client.service_client.config.target_host
    model = f"prov{uuid.uuid4().hex[:8]}/some-model"
    queue = model_queue(model)
    proc = await asyncio.to_thread(rein_cli, "limits", "set", "--model", model, "--rps", "5", "--address", address)
    assert_one_line_error(proc, EXIT_NO_WORKER, f"no worker serves {queue}")
    assert f"REIN_MODEL_QUEUES={queue.rsplit('.', 1)[1]}" in proc.stderr and "--task-queue " + queue in proc.stderr
    shown = await asyncio.to_thread(rein_cli, "limits", "--model", model, "--json", "--address", address)
    assert json.loads(shown.stdout)[0]["rps"] is None  # nothing was set
    # --force sets it anyway; removing a limit is never refused.
    forced = await asyncio.to_thread(rein_cli, "limits", "set", "--model", model, "--rps", "5", "--force",
                                     "--address", address)
    assert forced.returncode == 0 and forced.stdout.strip() == f"{queue}: rps 5, weights -", forced.stderr
    removed = await asyncio.to_thread(rein_cli, "limits", "set", "--model", model, "--unlimited", "--address", address)
    assert removed.returncode == 0, removed.stderr


async def test_a_burst_of_runs_stays_under_the_limit_at_the_vendor(dev, monkeypatch) -> None:  # noqa: ANN001
    """docs/fleet.md's two steps: workers that route and serve the provider's queue, then the limit."""
    address = dev.client.service_client.config.target_host
    monkeypatch.setenv("REIN_MODEL_QUEUES", "openai")  # these in-process workers route openai's calls
    tq = f"fleet-limit-{uuid.uuid4().hex[:6]}"
    queue = model_queue(MODEL)
    answered_at: list[float] = []
    lock = threading.Lock()

    def vendor(body: Any) -> Reply:
        with lock:
            answered_at.append(time.monotonic())  # at the vendor, for each request it let through
        return Reply(text="ok")

    with VendorServer(rate_limit=VENDOR_RPS, responder=vendor) as srv:
        agent = Agent(provider=LiteLLMProvider(MODEL, api_base=srv.base_url + "/v1", api_key="sk-test"),
                      name=f"limited-{uuid.uuid4().hex[:6]}")
        client = ReinClient(dev.client, tq)
        async with rein.create_worker(dev.client, agents=[agent], task_queue=tq), \
                rein.create_worker(dev.client, agents=[agent], task_queue=queue):
            # Both polls are in: the model queue has its worker, so the limit is accepted.
            await _until_polled(dev.client, queue)
            proc = await asyncio.to_thread(rein_cli, "limits", "set", "--model", MODEL, "--rps", str(RPS),
                                           "--address", address)
            assert proc.returncode == 0, proc.stderr
            # The queue is the provider's, shared by every test on this server: another may have set weights.
            assert proc.stdout.strip().startswith(f"{queue}: rps {RPS}, weights "), proc.stdout
            listed = await asyncio.to_thread(rein_cli, "limits", "--json", "--address", address, REIN_MODEL_QUEUES="")
            assert [(row["rps"], row["tenant_rps"]) for row in json.loads(listed.stdout)
                    if row["task_queue"] == queue] == [(float(RPS), None)]

            # The burst comes right after the limit, to a queue that has served nothing and fresh workers: the
            # workers loaded LiteLLM before they polled, so no call waits for that import while the limiter
            # hands out others, to leave with them (before: 15 in the first second, 32-37 in 4 s, 6-12 refused).
            handles = await asyncio.gather(*(client.start(agent.name, f"burst #{i}") for i in range(RUNS)))
            outcomes = await asyncio.wait_for(asyncio.gather(*(h.result() for h in handles)), 300)
        await asyncio.to_thread(rein_cli, "limits", "set", "--model", MODEL, "--unlimited", "--address", address)
    assert [o.stop_reason for o in outcomes] == ["done"] * RUNS
    peak_1s, peak_4s = _windows(answered_at, 1.0), _windows(answered_at, 4.0)
    span = answered_at[-1] - answered_at[0]
    print(f"vendor: {len(answered_at)} requests in {span:.1f}s ({(len(answered_at) - 1) / span:.1f}/s), "
          f"peak {peak_1s} in 1s, {peak_4s} in 4s, {srv.rejected} refused (429)")
    assert srv.rejected == 0, srv.rejected
    assert len(answered_at) == RUNS  # one call per run: nothing was retried
    assert peak_1s <= VENDOR_RPS
    # Over longer windows the limit holds: 4 s at 5/s, plus the burst the limiter lets through (2 x RPS) and
    # what a CPU-starved fresh worker bunches (CI: three test processes on two cores; 31 seen once). Without
    # the limit all 40 leave within a second or two; with the limit but LiteLLM loaded lazily, 40 in 4 s.
    assert peak_4s <= 4 * RPS + 3 * RPS, peak_4s


async def _until_polled(client: Any, queue: str) -> None:
    from rein.durable.fleet import model_calls_served

    for _ in range(600):
        if await model_calls_served(client, f"{queue.rsplit('.', 1)[1]}/x"):
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"no worker polled {queue}")
