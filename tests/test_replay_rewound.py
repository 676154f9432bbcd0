"""`rein replay --since` over a rewound run (issue 34): each run once, under its own run id.

`rein rewind` resets a run in place: the same workflow id, a new run whose history starts with a
copy of the old run's events (its first event still names the old run). Replaying the period's
runs lists both runs, the old one and the new one, each under its own run id, and names the
reset: the new run says which run it was rewound from, the old one which run replaced it.
Through the real CLI (`rein rewind`, then the `rein` console script) on a dev server."""

from __future__ import annotations

import asyncio
import json
import uuid

import pytest

import rein
from rein import Agent
from rein.cli import main
from rein.client import ReinClient
from tests.support.providers import RecordingProvider
from tests.support.waiting import poll
from tests.test_cli import rein_cli
from tests.test_fork import Counted, five_steps


@pytest.fixture
def names() -> str:
    return uuid.uuid4().hex[:6]


async def rewound(dev, name: str) -> tuple[str, str, str, str]:  # noqa: ANN001
    """A finished five-step run rewound to step 3 through `rein rewind`: (address, workflow id, old run, new run)."""
    address = dev.client.service_client.config.target_host
    tools = Counted()
    agent = Agent(provider=RecordingProvider(five_steps()), tools=tools.tools(), name=name)
    async with rein.create_worker(dev.client, agents=[agent], task_queue=name):
        client = ReinClient(dev.client, name)
        handle = await client.start(agent.name, "go")
        await handle.result()
        old_run = (await client.handle(handle.id).describe()).run_id
        assert await asyncio.to_thread(main, ["rewind", handle.id, "--to-step", "3", "--address", address]) == 0
        assert (await client.result(handle.id)).output == "fork answer"
        new_run = (await client.handle(handle.id).describe()).run_id
    return address, handle.id, old_run, new_run


async def test_replay_since_lists_a_rewound_workflow_once_per_run(dev, names):  # noqa: ANN001
    address, workflow_id, old_run, new_run = await rewound(dev, f"replay-rewound-{names}")
    assert new_run != old_run
    query = f'WorkflowId = "{workflow_id}"'

    async def both_closed_and_listed() -> bool:
        runs = [w async for w in dev.client.list_workflows(query)]
        return sorted(w.run_id for w in runs) == sorted([old_run, new_run]) and all(w.close_time for w in runs)

    await poll(both_closed_and_listed, "both runs of the rewound workflow in visibility")

    listed = await asyncio.to_thread(rein_cli, "replay", "--since", "1h", "--query", query, "--address", address, "--json")
    assert listed.returncode == 0, listed.stderr
    rows = {row["run_id"]: row for row in json.loads(listed.stdout)}
    assert sorted(rows) == sorted([old_run, new_run])  # each run once, under its own id
    assert all(row["ok"] and row["workflow_id"] == workflow_id for row in rows.values())
    assert (rows[new_run]["reset_from"], rows[new_run]["reset_to"]) == (old_run, None)
    assert (rows[old_run]["reset_from"], rows[old_run]["reset_to"]) == (None, new_run)

    text = await asyncio.to_thread(rein_cli, "replay", "--since", "1h", "--query", query, "--address", address)
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert f"{workflow_id} {new_run} ok (rewound from {old_run})" in lines, text.stdout
    assert f"{workflow_id} {old_run} ok (reset: rewound as {new_run})" in lines, text.stdout
    assert lines[-1] == "2 histories replay with this code"


async def test_an_exported_rewound_history_replays_under_its_own_run_id(dev, names, tmp_path):  # noqa: ANN001
    """A file carries no run id beside its events: the reset event in the new run's history names it."""
    address, workflow_id, old_run, new_run = await rewound(dev, f"export-rewound-{names}")
    out = tmp_path / "rewound.json"
    assert await asyncio.to_thread(main, ["history", "export", workflow_id, "-o", str(out), "--address", address]) == 0
    replayed = await asyncio.to_thread(rein_cli, "replay", str(out), "--json")
    assert replayed.returncode == 0, replayed.stderr
    [row] = json.loads(replayed.stdout)
    assert (row["run_id"], row["reset_from"], row["ok"]) == (new_run, old_run, True)
