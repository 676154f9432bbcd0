"""`rein start --tenant/--priority`, `rein list --tenant`, cost in `rein show`, `rein usage` and
`rein limits`: happy path in-process against a dev server; mistakes (one line, the exit code) and limits that would
slow nothing refused, with what each applies to, in-process too (tests.support.in_process.rein_inproc: the same exit code
and stderr line), one of each kind also through the real console script."""

from __future__ import annotations

import asyncio
import json
import subprocess
import uuid

import rein
from rein import Agent, MockProvider, Usage
from rein.cli import EXIT_ERROR, EXIT_NO_WORKER, EXIT_USAGE, main
from rein.client import ReinClient
from rein.core.contract import agent_task_queue
from rein.durable.fleet import routed_queue
from tests.support.in_process import rein_inproc
from tests.support.waiting import poll
from tests.test_cli import assert_one_line_error, rein_cli
from tests.test_docs_commands import cli_tree, hint_problems


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
    for i, (argv, code, needle) in enumerate(mistakes):
        run = rein_cli if i == 0 else rein_inproc  # the first through the console script
        proc = await asyncio.to_thread(run, *argv, "--address", address)
        assert_one_line_error(proc, code, needle)


async def test_limits_refuse_what_would_slow_nothing_and_say_what_each_applies_to(dev, monkeypatch, capsys) -> None:  # noqa: ANN001
    """Issue 45: `rein limits set --rps 5` was set on queue `rein`, which no run of `rein start` uses (they go to
    rein.<agent>), and `--model gpt-4o-mini` took the model for a provider (queue rein.model.gpt-4o-mini)."""
    address = dev.client.service_client.config.target_host
    names = uuid.uuid4().hex[:6]
    shared = f"unused-{names}"  # rein's shared queue here (REIN_TASK_QUEUE): no run has used it

    def limits(*argv: str, **env: str) -> subprocess.CompletedProcess:
        """`rein limits ARGV` in this process."""
        return rein_inproc("limits", *argv, "--address", address, REIN_TASK_QUEUE=shared, **env)

    real = rein_cli("limits", "set", "--rps", "5", "--address", address, REIN_TASK_QUEUE=shared)  # the console script
    line = assert_one_line_error(await asyncio.to_thread(limits, "set", "--rps", "5"), EXIT_USAGE,
                                 f"no run has used queue {shared!r}", "rein.AGENT", "--force")
    assert hint_problems(cli_tree(), line, "limits set") == [], line
    assert (real.returncode, real.stdout, real.stderr.strip()) == (EXIT_USAGE, "", line)  # the same one line
    assert json.loads((await asyncio.to_thread(limits, "--queue", shared, "--json")).stdout)[0]["rps"] is None

    agent = Agent(provider=MockProvider(["fine"]), name=f"limited-{names}")
    queue = agent_task_queue(agent.name)
    async with rein.create_worker(dev.client, agents=[agent], task_queue=queue):
        await (await ReinClient(dev.client, queue).start(agent.name, "hi")).result()

    async def counted() -> dict | None:
        shown = await asyncio.to_thread(limits, "--queue", queue, "--json")
        (row,) = json.loads(shown.stdout)
        return row if row["runs"] == 1 else None

    row = await poll(counted, "visibility to count the run on its queue")
    assert (row["running"], row["applies_to"]) == (0, "the model and tool calls of its runs: 0 running, 1 run in all")
    refused = await asyncio.to_thread(limits, "set", "--rps", "5")
    assert refused.returncode == EXIT_USAGE and "(lately: " in refused.stderr, refused.stderr
    set_on_runs = await asyncio.to_thread(limits, "set", "--queue", queue, "--rps", "5")
    assert set_on_runs.stdout == f"{queue}: rps 5, weights -\n", set_on_runs.stderr
    listed = json.loads((await asyncio.to_thread(limits, "--json")).stdout)  # rein's queue, the runs' queues
    assert [(r["rps"], r["runs"]) for r in listed if r["task_queue"] == queue] == [(5.0, 1)], listed
    forced = await asyncio.to_thread(limits, "set", "--rps", "2", "--force")
    assert forced.stdout == f"{shared}: rps 2, weights -\n", forced.stderr
    assert (await asyncio.to_thread(limits, "set", "--queue", queue, "--unlimited")).returncode == 0
    assert (await asyncio.to_thread(limits, "set", "--unlimited")).returncode == 0  # removing is never refused

    # A model without its provider is refused with the PROVIDER/MODEL form (the provider from LiteLLM's table)...
    for argv in (["set", "--model", "gpt-4o-mini", "--rps", "5"], ["--model", "gpt-4o-mini"]):
        line = assert_one_line_error(await asyncio.to_thread(limits, *argv), EXIT_USAGE,
                                     "give the model with its provider: --model openai/gpt-4o-mini (LiteLLM's model "
                                     "table lists gpt-4o-mini under openai)")
        assert hint_problems(cli_tree(), line, "limits set") == [], line
    assert_one_line_error(await asyncio.to_thread(limits, "set", "--model", "nosuch-model", "--rps", "5"), EXIT_USAGE,
                          "PROVIDER/MODEL, e.g. --model openai/gpt-4o-mini (LiteLLM's model table does not list "
                          "'nosuch-model')")
    # ...which is where a worker routes that bare model's calls
    line = assert_one_line_error(await asyncio.to_thread(limits, "set", "--model", "openai/gpt-4o-mini", "--rps", "5"),
                                 EXIT_NO_WORKER, "no worker serves rein.model.openai",
                                 "`rein limits set --model openai/gpt-4o-mini --force`")
    assert hint_problems(cli_tree(), line, "limits set") == [], line
    (openai,) = json.loads((await asyncio.to_thread(limits, "--model", "openai/gpt-4o-mini", "--json")).stdout)
    assert openai["task_queue"] == "rein.model.openai" and openai["applies_to"].startswith(
        "openai's model calls from workers with REIN_MODEL_QUEUES=openai (or *)"), openai
    monkeypatch.setenv("REIN_MODEL_QUEUES", "openai")
    assert (routed_queue("gpt-4o-mini"), routed_queue("openai/gpt-4o"), routed_queue("claude-3-5-sonnet-20240620")) == (
        "rein.model.openai", "rein.model.openai", None)
