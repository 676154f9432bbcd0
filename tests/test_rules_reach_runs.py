"""Rules that cannot wedge or be cut short (issue 52): a rule added while runs wait reaches them through the policy
workflow (its activity tells them, Temporal retries it) and each run's own rule check, even when the client that added
it is killed the moment its update returns; a rule set over the documented size is refused in one line and the
policy workflow keeps answering; the policy workflow follows the current build (AUTO_UPGRADE) even on a worker whose
runs are pinned. Real processes: the adding client, `python worker.py`, the `rein` console script.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from temporalio.api.enums.v1 import VersioningBehavior

import rein
from rein.cli import EXIT_REJECTED
from rein.client import ReinClient
from rein.core.policy import MAX_RULES_BYTES, POLICY_WORKFLOW_ID, RULES_QUERY, PolicyError
from tests.support.history import assert_no_task_failures
from tests.support.inbox import files_agent, rules_heard
from tests.support.processes import WorkerProcess
from tests.support.waiting import poll

ROOT = Path(__file__).resolve().parent.parent
REIN_BIN = str(Path(sys.executable).parent / "rein")
SUFFIX = uuid.uuid4().hex[:6]
QUEUE = f"rules-{SUFFIX}"
FILES = f"rules-files-{SUFFIX}"

ADD_AND_DIE = """
import asyncio, json, os, signal, sys
from temporalio.client import Client, WithStartWorkflowOperation
from temporalio.common import WorkflowIDConflictPolicy
from rein.core.policy import ADD_RULE_UPDATE, POLICY_WORKFLOW_ID, POLICY_WORKFLOW_TYPE

async def main():
    address, queue, rule = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    client = await Client.connect(address)
    start = WithStartWorkflowOperation(POLICY_WORKFLOW_TYPE, id=POLICY_WORKFLOW_ID, task_queue=queue,
                                       id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING)
    done = await client.execute_update_with_start_workflow(ADD_RULE_UPDATE, {"rule": rule},
                                                           start_workflow_operation=start)
    print(json.dumps(done), flush=True)
    os.kill(os.getpid(), signal.SIGKILL)  # nothing of this client runs after its update

asyncio.run(main())
"""
"""A client that adds a rule (the policy workflow's update, as ReinClient.policy.add sends it) and is killed the
moment the update returns."""


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def runs(dev) -> AsyncIterator[ReinClient]:  # noqa: ANN001
    await _no_policy(dev.client)
    async with rein.create_worker(dev.client, agents=[files_agent(FILES)], task_queue=QUEUE):
        yield ReinClient(dev.client, QUEUE)
        await _no_policy(dev.client)


async def _no_policy(client) -> None:  # noqa: ANN001
    """The namespace's policy workflow, gone: each test here starts its own (on its own task queue)."""
    try:
        await client.get_workflow_handle(POLICY_WORKFLOW_ID).terminate("a test of rules starts afresh")
    except Exception:
        pass


async def waiting(runs: ReinClient, prompt: str) -> str:
    handle = await runs.start(FILES, prompt)
    await poll(lambda: _waits(runs, handle.id), f"{handle.id} waiting for approval", 30, interval=0.1)
    return handle.id


async def _waits(runs: ReinClient, run_id: str) -> bool:
    return (await runs.status(run_id)).status == "waiting_approval"


async def test_a_rule_reaches_the_waiting_runs_when_its_client_dies_right_after_adding_it(runs: ReinClient, dev) -> None:  # noqa: ANN001
    reads = [await waiting(runs, f"read /tmp/k{i}") for i in range(3)]
    delete = await waiting(runs, "delete /srv/k")
    rule = {"effect": "allow", "tool": "read_file", "agent": FILES, "args": {"path": "/tmp/k*"}, "reason": "read-only",
            "by": "ops@example"}
    address = dev.client.service_client.config.target_host
    adder = await asyncio.create_subprocess_exec(sys.executable, "-c", ADD_AND_DIE, address, QUEUE, json.dumps(rule),
                                                 cwd=str(ROOT), stdout=asyncio.subprocess.PIPE,
                                                 stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(adder.communicate(), 120)
    assert adder.returncode == -signal.SIGKILL, err.decode()[-2000:]
    added = json.loads(out.decode().splitlines()[-1])
    rule_id, version = added["rule"]["id"], added["version"]

    for run_id, i in zip(reads, range(3), strict=True):  # each decided it itself, by its own rule check
        result = await asyncio.wait_for(runs.result(run_id), 120)
        assert result.output == f"Done: contents of /tmp/k{i}"
        [decision] = result.session.decisions
        assert (decision.approved, decision.via, decision.reason) == (True, f"rule {rule_id}", "read-only")
        [row] = await runs.policy.explain(run_id)
        assert row.by.startswith(f"rule {rule_id} (allow read_file") and row.reason == "read-only"
    await rules_heard(runs.client, delete, version)  # told too; the agent asks a person for every delete
    assert (await runs.status(delete)).status == "waiting_approval"

    denied = await runs.policy.add("deny", "delete_file", agent=FILES, reason="no deletes on Fridays")
    result = await asyncio.wait_for(runs.result(delete), 120)
    [told] = [m.content for m in result.session.messages if m.role == "tool"]
    assert told == (f"Denied by rule {denied.rule.id}: the call to 'delete_file' was not run. Reason: no deletes on "
                    "Fridays Continue without it or try another approach.")  # the person's reason reaches the model
    code, out, _ = await rein_cli(address, "show", delete)
    assert code == 0 and "no deletes on Fridays" in out and f"rule {denied.rule.id}" in out
    for run_id in (*reads, delete):
        assert_no_task_failures(await runs.handle(run_id).fetch_history())


async def test_a_terminated_policy_workflows_rules_are_gone_and_the_next_rule_reaches_waiting_runs(runs: ReinClient,
                                                                                                      dev) -> None:  # noqa: ANN001
    """An operator terminates the policy workflow while a run waits, having read its rules at version 3. Its memo
    still lists them, but they are gone (the next rule added starts a new one without them): nothing reads them.
    The new one numbers on from the old (version 4, rule r4 after 3 rules), so the waiting run hears it (from 1
    again, the run would have taken version 1 for old news and waited for a 4th change)."""
    await _no_policy(dev.client)
    for n in range(3):
        old = await runs.policy.add("ask", f"old_tool_{n}", agent=FILES, reason="before the reset")
    read = await waiting(runs, "read /tmp/after-reset")  # its check read the old version
    await _no_policy(dev.client)
    assert (await runs.policy.rules()).rules == []
    added = await runs.policy.add("allow", "read_file", agent=FILES, args={"path": "/tmp/after-*"}, reason="new set")
    following = int(old.rule.id[1:]) + 1  # the earlier tests' policy workflows numbered on too
    assert (added.version, added.rule.id) == (old.version + 1, f"r{following}")
    assert [r.id for r in (await runs.policy.rules()).rules] == [f"r{following}"]
    result = await asyncio.wait_for(runs.result(read), 120)
    assert result.output == "Done: contents of /tmp/after-reset"
    assert [d.via for d in result.session.decisions] == [f"rule r{following}"]


async def test_a_rule_set_over_the_limit_is_refused_and_the_policy_still_answers(runs: ReinClient, dev) -> None:  # noqa: ANN001
    await _no_policy(dev.client)
    big = {f"a{i}": "x" * 490 + f"{i:03d}*" for i in range(20)}  # one rule: ~11 KB of argument patterns
    added, refusals, ids = 0, [], []
    for n in range(190):  # 190 such rules: over 2 MB
        try:
            ids.append((await runs.policy.add("ask", f"tool_{n}", agent=FILES, args=big, reason="r" * 400)).rule.id)
            added += 1
        except PolicyError as exc:
            refusals.append(str(exc))
    size = len(json.dumps((await runs.policy.rules()).model_dump(mode="json"), separators=(",", ":")).encode())
    assert 0 < added < 190 and size <= MAX_RULES_BYTES and len(refusals) == 190 - added
    assert refusals[0].startswith("the rules would take ") and refusals[0].endswith(
        f" bytes, over the limit of {MAX_RULES_BYTES:,}: remove some first (rein policy remove ID)")

    address = dev.client.service_client.config.target_host
    code, out, err = await rein_cli(address, "policy", "add", "ask", "--tool", "one_more", "--agent", FILES,
                                    *[f"--arg=a{i}={'y' * 499}" for i in range(20)])
    assert code == EXIT_REJECTED and out == "" and "Traceback" not in err
    [line] = err.splitlines()
    assert line.startswith("rein: the rules would take ") and f"over the limit of {MAX_RULES_BYTES:,}" in line

    handle = dev.client.get_workflow_handle(POLICY_WORKFLOW_ID)
    assert len((await handle.query(RULES_QUERY))["rules"]) == added  # it still answers, nothing lost
    await runs.policy.remove(ids[0])  # rule ids go on across policy workflows (the earlier tests' too)
    assert (await runs.policy.add("ask", "fits_again", agent=FILES)).rule.id == f"r{int(ids[-1][1:]) + 1}"
    assert_no_task_failures(await handle.fetch_history())


async def test_the_policy_workflow_follows_the_current_build_on_a_pinned_worker(dev, tmp_path: Path) -> None:  # noqa: ANN001
    await _no_policy(dev.client)
    queue = f"rules-pinned-{SUFFIX}"
    address = dev.client.service_client.config.target_host
    worker = WorkerProcess(address, ["tests.agents.ops:agent"], queue, tmp_path / "worker.log",
                           REIN_DEPLOYMENT=f"rules-{SUFFIX}", REIN_BUILD_ID="b1", REIN_VERSIONING="pinned")
    await asyncio.to_thread(worker.start)
    try:
        client = ReinClient(dev.client, queue)
        run = await client.start("ops-bot", "restart billing please")
        await poll(lambda: _waits(client, run.id), f"{run.id} waiting", 60, interval=0.1)
        await client.policy.add("ask", "restart_service", agent="ops-bot")
        policy = await dev.client.get_workflow_handle(POLICY_WORKFLOW_ID).describe()
        agent_run = await client.handle(run.id).describe()
        behavior = policy.raw_description.workflow_execution_info.versioning_info.behavior
        assert behavior == VersioningBehavior.VERSIONING_BEHAVIOR_AUTO_UPGRADE
        assert agent_run.raw_description.workflow_execution_info.versioning_info.behavior == \
            VersioningBehavior.VERSIONING_BEHAVIOR_PINNED  # the worker's default, for agent runs
        await client.cancel(run.id)
    finally:
        worker.stop()
        await _no_policy(dev.client)


async def rein_cli(address: str, *argv: str) -> tuple[int, str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("TEMPORAL_ADDRESS", "REIN_DEBUG", "COLUMNS")}
    env.update(REIN_TASK_QUEUE=QUEUE, COLUMNS="300")
    process = await asyncio.create_subprocess_exec(
        REIN_BIN, *argv, "--address", address, cwd=str(ROOT), env=env, stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(process.communicate(), 120)
    return process.returncode or 0, out.decode(), err.decode()




@pytest.mark.parametrize("name", ["policy_v1.json", "policy_v2.json"])
async def test_policy_workflows_recorded_before_and_after_the_rules_reached_runs_replay(name: str) -> None:
    """v1: the build before (a rule reached waiting runs through the client's sweep): updates and memo upserts only;
    v2: the allowing rule told to the waiting runs by the activity. Both replay, on both of this build's
    definitions of ReinPolicy (an unversioned worker's and a versioned one's)."""
    from temporalio.client import WorkflowHistory
    from temporalio.worker import Replayer

    from rein.temporal.converter import rein_data_converter
    from rein.workflows import PolicyWorkflow, VersionedPolicyWorkflow

    data = json.loads((ROOT / "tests" / "histories" / name).read_text())
    told = [e for e in data["events"] if e.get("activityTaskScheduledEventAttributes", {}).get(
        "activityType", {}).get("name") == "rein.rules_changed"]
    assert len(told) == (0 if name == "policy_v1.json" else 1)
    for workflow in (PolicyWorkflow, VersionedPolicyWorkflow):
        replayer = Replayer(workflows=[workflow], data_converter=rein_data_converter())
        result = await replayer.replay_workflow(WorkflowHistory.from_json("policy", data), raise_on_replay_failure=False)
        assert result.replay_failure is None, result.replay_failure
