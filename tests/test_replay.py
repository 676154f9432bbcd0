"""The replay gate: `rein replay`, `rein history export` and `rein.testing.replay`.

A changed build is simulated in a subprocess that patches rein's workflow code before the CLI
runs: dropping the search-attribute upserts changes the command sequence (nondeterminism, the
gate must fail); rewording the model call's summary does not (the gate must pass).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import pytest_asyncio
from temporalio.client import WorkflowHistory

import rein
import rein.testing
from rein import Agent, MockProvider, ToolCall
from rein.cli import EXIT_NOT_FOUND, EXIT_USAGE, main
from rein.cli.app import EXIT_NOT_REPLAYABLE
from rein.cli.fork import parse_since
from rein.ops.replay import ReplayFailed, load_history, server_query

ROOT = Path(__file__).resolve().parent.parent
HISTORIES = ROOT / "tests" / "histories"
CURRENT = HISTORIES / "agent_long_v4.json"
RETIRED = HISTORIES / "drained" / "agent_approval_v1.json"
"""Recorded by a build older than the support window (rein.workflows.window): the current code no longer replays it."""

BROKEN = "import rein.workflows.publishing as p; p.Publisher.publish = lambda self, ending=False: None"
"""A build that no longer upserts its search attributes: a different command sequence."""
INNOCENT = "import rein.workflows.stages as s; s.model_summary = lambda model, iteration: f'reworded {model} {iteration}'"
"""A build that only words the model call's summary differently: the same commands."""


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def replay_agent() -> Agent:
    script = [[ToolCall(id="c1", name="add", arguments={"a": 1, "b": 2})], "It is 3."]
    return Agent(provider=MockProvider(script * 50), tools=[add], name="replay-agent")


def changed_build(change: str | None, *argv: str) -> subprocess.CompletedProcess:
    """`rein ARGV` in a fresh process whose workflow code carries `change`."""
    code = "import sys\nimport rein.workflows.loop\n"
    if change:
        code += change + "\n"
    code += "from rein.cli import main\nsys.exit(main(sys.argv[1:]))\n"
    environ = {k: v for k, v in os.environ.items() if k not in ("TEMPORAL_ADDRESS", "REIN_DEBUG")}
    return subprocess.run([sys.executable, "-c", code, *argv], cwd=str(ROOT), env=environ,
                          capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL)


# --------------------------------------------------------------------------- without a server


def test_testing_replay_accepts_paths_histories_and_json() -> None:
    text = CURRENT.read_text()
    report = rein.testing.replay([CURRENT, str(CURRENT), WorkflowHistory.from_json("x", text), text, json.loads(text)])
    assert report.ok and len(report.results) == 5


def test_testing_replay_raises_on_a_history_the_code_cannot_replay() -> None:
    with pytest.raises(ReplayFailed) as failed:
        rein.testing.replay([CURRENT, RETIRED])
    assert [r.workflow_id for r in failed.value.report.failures] == ["agent_approval_v1"]
    assert "older than this build's support window of 30 days" in str(failed.value)  # not a nondeterminism error
    assert isinstance(failed.value, AssertionError)  # pytest shows it as a failed assertion


async def test_testing_replay_can_be_awaited_in_async_tests() -> None:
    report = await rein.testing.replay(CURRENT)
    assert report.ok and report.results[0].workflow_id == "agent_long_v4"


def test_bad_history_sources_say_what_is_wrong(tmp_path: Path) -> None:
    (tmp_path / "x.json").write_text('{"events": []}')
    with pytest.raises(ValueError, match="no events"):
        load_history(tmp_path / "x.json")
    with pytest.raises(ValueError, match="cannot read"):
        load_history(tmp_path / "missing.json")
    with pytest.raises(ValueError, match="not JSON"):
        load_history("{nope")


def test_server_query() -> None:
    query = server_query(parse_since("1h"), 'ReinAgent = "a"')
    assert query.startswith('WorkflowType = "AgentWorkflow" AND StartTime > "')
    assert query.endswith(' AND (ReinAgent = "a")')


def test_replay_files_gate_passes_an_innocent_change_and_fails_a_nondeterministic_one() -> None:
    innocent = changed_build(INNOCENT, "replay", str(CURRENT), "--json")
    assert innocent.returncode == 0, innocent.stderr
    assert [r["ok"] for r in json.loads(innocent.stdout)] == [True]

    broken = changed_build(BROKEN, "replay", str(CURRENT), "--json")
    assert broken.returncode == EXIT_NOT_REPLAYABLE, broken.stderr
    [row] = json.loads(broken.stdout)
    assert not row["ok"] and "Nondeterminism" in row["error"]
    assert broken.stderr.strip().splitlines()[-1].startswith("rein: 1 of 1 histories do not replay")


def test_a_process_that_only_replays_frees_the_core_at_exit() -> None:
    """Without the exit hook 1 in ~30 `rein replay` processes that end through sys.exit aborted
    after printing their report (exit 134 or -11: temporalio's core threads at interpreter teardown)."""
    code = ("import rein.temporal.connection as c; from rein.ops.replay import replayer\n"
            "before = c._core_hook; replayer(); print(before, c._core_hook)")
    proc = subprocess.run([sys.executable, "-c", code], cwd=str(ROOT), capture_output=True, text=True, timeout=120)
    assert (proc.returncode, proc.stdout.split()) == (0, ["False", "True"]), proc.stderr


def test_replay_usage_errors_are_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["replay"]) == EXIT_USAGE
    assert main(["replay", "nowhere.json"]) == EXIT_USAGE
    assert main(["replay", str(CURRENT), "--since", "1d"]) == EXIT_USAGE
    assert main(["replay", "--since", "soon"]) == EXIT_USAGE
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 4 and all(line.startswith("rein: ") for line in lines)


# --------------------------------------------------------------------------- against a dev server


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def served(dev):  # noqa: ANN001
    """The module's dev server with a worker serving replay_agent, and two finished runs of it."""
    tq = f"replay-{uuid.uuid4().hex[:8]}"
    ids = [f"replay-{uuid.uuid4().hex[:8]}" for _ in range(2)]
    async with rein.create_worker(dev.client, agents=[replay_agent()], task_queue=tq):
        for run_id in ids:
            handle = await dev.client.start_workflow("AgentWorkflow", {"agent": "replay-agent", "prompt": "1+2?"},
                                                     id=run_id, task_queue=tq)
            await handle.result()
        yield dev, ids


async def _cli(*argv: str) -> int:
    return await asyncio.to_thread(main, list(argv))


async def test_export_then_replay_round_trip(served, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:  # noqa: ANN001
    dev, ids = served
    address = dev.client.service_client.config.target_host
    out = tmp_path / "run.json"
    assert await _cli("history", "export", ids[0], "-o", str(out), "--address", address) == 0
    exported = WorkflowHistory.from_json(ids[0], out.read_text())
    assert exported.events == (await dev.client.get_workflow_handle(ids[0]).fetch_history()).events

    capsys.readouterr()
    assert await _cli("replay", str(out), "--json") == 0
    assert [r["ok"] for r in json.loads(capsys.readouterr().out)] == [True]
    assert rein.testing.replay(out).ok

    assert await _cli("history", "export", "no-such-run", "-o", str(tmp_path / "x.json"), "--address", address) == EXIT_NOT_FOUND
    assert not (tmp_path / "x.json").exists()


async def test_replay_since_fetches_runs_from_the_server(served) -> None:  # noqa: ANN001
    dev, ids = served
    address = dev.client.service_client.config.target_host
    query = " OR ".join(f'WorkflowId = "{i}"' for i in ids)

    async def visible() -> bool:
        return len([w async for w in dev.client.list_workflows(query)]) == 2

    for _ in range(100):
        if await visible():
            break
        await asyncio.sleep(0.1)
    innocent = await asyncio.to_thread(changed_build, INNOCENT, "replay", "--since", "1h", "--query", query,
                                       "--address", address, "--json")
    assert innocent.returncode == 0, innocent.stderr
    assert sorted(r["workflow_id"] for r in json.loads(innocent.stdout)) == sorted(ids)

    limited = await asyncio.to_thread(changed_build, BROKEN, "replay", "--since", "1h", "--query", query,
                                      "--limit", "1", "--address", address, "--json")
    assert limited.returncode == EXIT_NOT_REPLAYABLE, limited.stderr
    [row] = json.loads(limited.stdout)
    assert row["workflow_id"] in ids and "Nondeterminism" in row["error"]
