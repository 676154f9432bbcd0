"""`rein start --tenant/--priority`, `rein list --tenant`, cost in `rein show`, `rein usage` and
`rein limits`: happy path in-process against a dev server, mistakes as the real console script."""

from __future__ import annotations

import asyncio
import json
import uuid

import rein
from rein import Agent, MockProvider, Usage
from rein.cli import EXIT_ERROR, EXIT_USAGE, main
from rein.client import ReinClient
from tests.support.waiting import poll
from tests.test_cli import assert_one_line_error, rein_cli


async def test_fleet_cli(dev, capsys):
    names = uuid.uuid4().hex[:6]
    address = dev.client.service_client.config.target_host
    tenant = f"acme-{names}"
    agent = Agent(provider=MockProvider(["fine"], usage_per_call=Usage(input_tokens=3, output_tokens=2, cost_usd=0.25)),
                  name=f"fleet-cli-{names}")
    tq = f"fleet-cli-{names}"

    async def cli(*argv: str) -> str:
        capsys.readouterr()
        assert await asyncio.to_thread(main, [*argv, "--address", address]) == 0
        return capsys.readouterr().out

    async with rein.create_worker(dev.client, agents=[agent], task_queue=tq):
        run_id = (await cli("start", agent.name, "hi", "--tenant", tenant, "--priority", "2", "--task-queue", tq)).strip()
        await ReinClient(dev.client, tq).handle(run_id).result()
        started = (await dev.client.get_workflow_handle(run_id).fetch_history()).events[0]
        priority = started.workflow_execution_started_event_attributes.priority
        assert (priority.fairness_key, priority.priority_key) == (tenant, 2)

        async def listed() -> list:
            return json.loads(await cli("list", "--tenant", tenant, "--json"))

        (row,) = await poll(listed, "rein list --tenant")
        assert (row["run_id"], row["tenant"], row["cost_usd"]) == (run_id, tenant, 0.25)
        shown = " ".join((await cli("show", run_id)).split())
        assert "cost $0.2500" in shown and f"tenant {tenant}" in shown
        usage = json.loads(await cli("usage", "--since", "1h", "--json"))
        assert {"key": tenant, "runs": 1, "tokens": 5, "cost_usd": 0.25, "unpriced": 0} in usage["tenants"]
        assert any(line["key"] == agent.name and line["cost_usd"] == 0.25 for line in usage["agents"])

    model = f"prov{names}/some-model"
    line = await cli("limits", "set", "--model", model, "--rps", "7", "--tenant", tenant, "--weight", "2", "--force")
    assert line.strip() == f"rein.model.prov{names}: rps 7, weights {tenant}=2"
    (limits,) = json.loads(await cli("limits", "--model", model, "--json"))
    assert (limits["rps"], limits["weights"]) == (7.0, {tenant: 2.0})
    await cli("limits", "set", "--model", model, "--unlimited")
    (limits,) = json.loads(await cli("limits", "--model", model, "--json"))
    assert limits["rps"] is None and limits["weights"] == {tenant: 2.0}

    mistakes = [
        (["limits", "set", "--model", model], EXIT_USAGE, "nothing to set"),
        (["limits", "set", "--tenant", tenant], EXIT_USAGE, "--tenant and --weight go together"),
        (["limits", "set", "--model", model, "--rps", "-1"], EXIT_ERROR, "0 or more"),
        (["limits", "set", "--weights", "acme"], EXIT_USAGE, "is not TENANT=WEIGHT"),
        (["usage", "--since", "soon"], EXIT_USAGE, "is not a duration"),
        (["start", agent.name, "hi", "--priority", "9"], EXIT_ERROR, "priority must be 1"),
    ]
    for argv, code, needle in mistakes:
        proc = await asyncio.to_thread(rein_cli, *argv, "--address", address)
        assert_one_line_error(proc, code, needle)
