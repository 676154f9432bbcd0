"""The approvals inbox from code and the command line: every wait listed from visibility with its details, rules
that decide (changed while runs wait), decisions in bulk with their exit codes, tenants kept apart, and bad input
answered in one line with nothing lost. One dev server and one worker for the module; `rein` runs in this process
(tests/support/in_process.py, in a thread: the worker shares this test's event loop), and one refusal through the real
console script (its exit code and one line on stderr).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import pytest
import pytest_asyncio

import rein
from rein.cli import EXIT_NOT_FOUND, EXIT_REJECTED, EXIT_USAGE
from rein.client import ReinClient
from rein.core.policy import POLICY_WORKFLOW_ID, PolicyError
from tests.support.in_process import rein_async
from tests.support.inbox import files_agent, rules_heard, waiting

ROOT = Path(__file__).resolve().parent.parent
REIN_BIN = str(Path(sys.executable).parent / "rein")
SUFFIX = uuid.uuid4().hex[:6]
QUEUE = f"inbox-{SUFFIX}"
FILES, TIMED, GUARDED = f"files-{SUFFIX}", f"timed-{SUFFIX}", f"guarded-{SUFFIX}"


class Cli:
    def __init__(self, address: str):
        self.address = address

    async def __call__(self, *argv: str) -> tuple[int, str, str]:
        done = await rein_async(*argv, "--address", self.address, REIN_TASK_QUEUE=QUEUE)
        return done.returncode, done.stdout, done.stderr

    async def process(self, *argv: str) -> tuple[int, str, str]:
        """The real console script (its environment without TEMPORAL_ADDRESS, REIN_DEBUG and COLUMNS)."""
        env = {k: v for k, v in os.environ.items() if k not in ("TEMPORAL_ADDRESS", "REIN_DEBUG", "COLUMNS")}
        env["REIN_TASK_QUEUE"] = QUEUE
        process = await asyncio.create_subprocess_exec(
            REIN_BIN, *argv, "--address", self.address, cwd=str(ROOT), env=env, stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await asyncio.wait_for(process.communicate(), 120)
        return process.returncode or 0, out.decode(), err.decode()


def one_line(result: tuple[int, str, str], code: int, *needles: str) -> str:
    returncode, out, err = result
    assert returncode == code, result
    assert out == "" and "Traceback" not in err, result
    [line] = err.splitlines()
    assert line.startswith("rein: ") and all(n in line for n in needles), line
    return line


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def runs(dev) -> AsyncIterator[ReinClient]:  # noqa: ANN001
    agents = [files_agent(FILES), files_agent(TIMED, approval_timeout_s=3600), files_agent(GUARDED, approvers=["alice"])]
    async with rein.create_worker(dev.client, agents=agents, task_queue=QUEUE):
        yield ReinClient(dev.client, QUEUE)
        try:
            await dev.client.get_workflow_handle(POLICY_WORKFLOW_ID).terminate("test module done")
        except Exception:
            pass


@pytest.fixture(scope="module")
def cli(dev) -> Cli:  # noqa: ANN001
    return Cli(dev.client.service_client.config.target_host)


def tool_result(result: rein.RunResult) -> str:
    return [m.content for m in result.session.messages if m.role == "tool"][0] or ""


async def test_every_wait_is_listed_with_what_it_wants_and_the_filters_narrow_it(runs: ReinClient, cli: Cli) -> None:
    read = await waiting(runs, FILES, "read /tmp/a", "acme")
    delete = await waiting(runs, FILES, "delete /etc/x", "globex")
    question = await waiting(runs, FILES, "ask Which region?", "acme")
    timed = await waiting(runs, TIMED, "read /tmp/d", "acme")

    items = {i.run_id: i for i in await runs.inbox(agent=FILES)}
    assert set(items) == {read, delete, question}
    item = items[read]
    assert (item.kind, item.agent, item.tenant, item.call_line()) == ("approval", FILES, "acme", 'read_file(path="/tmp/a")')
    assert item.said == "I will read /tmp/a now." and item.since is not None and item.until is None
    assert (items[question].kind, items[question].question) == ("question", "Which region?")
    [timed_item] = await runs.inbox(agent=TIMED)
    assert timed_item.until is not None and timedelta(minutes=59) < timed_item.until - timed_item.since <= timedelta(hours=1)
    assert [i.run_id for i in await runs.inbox(agent=FILES, tenant="globex")] == [delete]
    assert [i.run_id for i in await runs.inbox(agent=FILES, tool="delete_file")] == [delete]
    assert {i.run_id for i in await runs.inbox(agent=FILES, kind="question")} == {question}
    assert await runs.inbox(agent=FILES, older_than=timedelta(hours=1)) == []

    code, out, _ = await cli("inbox", "--agent", FILES, "--json")
    assert code == 0 and {i["run_id"] for i in json.loads(out)} == {read, delete, question}
    code, out, _ = await cli("inbox", "--agent", FILES, "--tenant", "acme", "--tool", "read_file")
    assert code == 0 and read in out and 'read_file(path="/tmp/a")' in out and delete not in out
    for run_id in (read, delete, timed):
        await runs.deny(run_id, reason="done looking")
    await runs.answer(question, "eu")


async def test_rules_decide_what_waits_and_what_comes_and_never_loosen_the_agent(runs: ReinClient, cli: Cli) -> None:
    pending = await waiting(runs, FILES, "read /tmp/a", "acme")
    delete = await waiting(runs, FILES, "delete /srv/x", "acme")
    code, out, err = await cli("policy", "add", "allow", "--tool", "read_file", "--agent", FILES, "--arg", "path=/tmp/*",
                               "--reason", "read-only")
    assert code == 0, err
    assert "added rule r" in out and "the runs waiting for approval that it covers are told" in out
    assert (await runs.result(pending)).output == "Done: contents of /tmp/a"  # the waiting run decided it itself
    allow_id = out.split("added rule ")[1].split(":")[0]

    later = await runs.start(FILES, "read /tmp/b", tenant="acme")  # a later call: decided by the rule, nobody waits
    assert (await later.result()).status == "done"
    deny = await runs.policy.add("deny", "read_file", agent=FILES, args={"path": "/tmp/secret*"})
    secret = await runs.start(FILES, "read /tmp/secret.key")  # more specific: deny beats the broader allow
    denied = tool_result(await runs.result(secret.id))
    assert denied.startswith(f"Denied by rule {deny.rule.id}") and "was not run" in denied
    asks = await runs.policy.add("ask", "read_file", agent=FILES, args={"path": "/tmp/ask*"})
    asking = await waiting(runs, FILES, "read /tmp/ask.txt")  # ask is more specific than the allow: it waits

    explained = {r.call_id: r for r in await runs.policy.explain(secret.id)}
    assert explained["call-read"].decision == "denied" and explained["call-read"].by.startswith(f"rule {deny.rule.id} (deny")
    [row] = await runs.policy.explain(asking)
    assert row.decision == "pending" and f"rule {asks.rule.id}" in row.by and row.by.endswith("says ask")

    # A rule never approves what the agent asks a person for: delete_file is marked as always asking.
    loosen = await runs.policy.add("allow", "delete_file", agent=FILES)
    assert loosen.decided == []  # the waiting runs decide themselves: their own check holds the call for a person
    await rules_heard(runs.client, delete, loosen.version)
    assert (await runs.status(delete)).status == "waiting_approval"
    guarded = await waiting(runs, GUARDED, "read /tmp/g")  # named approvers: a rule is none of them
    all_tools = await runs.policy.add("allow", "*", agent=GUARDED)
    await rules_heard(runs.client, guarded, all_tools.version)
    assert (await runs.status(guarded)).status == "waiting_approval"

    code, out, _ = await cli("policy", "list")
    assert code == 0 and f"allow read_file agent={FILES} path=/tmp/*" in out and "read-only" in out
    code, out, _ = await cli("policy", "explain", later.id)
    assert code == 0 and f"rule {allow_id}" in out and "approved" in out
    code, out, _ = await cli("show", pending)
    assert code == 0 and "decisions" in out and f"rule {allow_id}" in out

    code, out, _ = await cli("policy", "remove", allow_id)  # removed while runs wait: later calls ask again
    assert code == 0 and f"removed rule {allow_id}" in out
    again = await waiting(runs, FILES, "read /tmp/c")
    for run_id in (again, asking, delete):
        await runs.approve(run_id, approver="carol")
    await runs.approve(guarded, approver="alice")
    assert (await runs.result(delete)).output == "Done: /srv/x deleted"
    [carol] = await runs.policy.explain(again)
    assert carol.by == "carol" and carol.at


async def test_bulk_decisions_say_what_became_of_each_run_and_exit_accordingly(runs: ReinClient, cli: Cli) -> None:
    a, b = await waiting(runs, FILES, "read /tmp/1", "acme"), await waiting(runs, FILES, "read /tmp/2", "acme")
    other = await waiting(runs, FILES, "read /tmp/3", "globex")
    one_line(await cli("inbox", "approve", "--agent", FILES), EXIT_USAGE, "--yes")  # no terminal to ask at

    # Scoped to a tenant, the runs of another refuse (the run itself: its update's validator).
    scoped = await runs.decide_inbox("approve", await runs.inbox(agent=FILES, tenant="globex"), tenant="acme")
    assert [(o.run_id, o.outcome) for o in scoped] == [(other, "refused")] and "not of tenant 'acme'" in scoped[0].detail

    code, out, err = await cli("inbox", "approve", "--agent", FILES, "--tenant", "acme", "--reason", "batch", "--yes")
    assert code == 0, (out, err)
    assert f'applied {a} read_file(path="/tmp/1") [call-read] (wait ' in out, out
    assert f'applied {b} read_file(path="/tmp/2") [call-read] (wait ' in out and "2 applied" in err
    code, out, err = await cli("inbox", "deny", "--agent", FILES, "--tool", "read_file", "--yes", "--json")
    assert code == 0 and [(o["run_id"], o["outcome"]) for o in json.loads(out)] == [(other, "applied")]
    assert "Denied by" in tool_result(await runs.result(other))

    guarded = await waiting(runs, GUARDED, "read /tmp/g")
    code, out, _ = await cli("inbox", "approve", "--agent", GUARDED, "--approver", "bob", "--yes")
    assert code == EXIT_REJECTED and f"refused {guarded}" in out and "not among this run's approvers" in out
    code, out, _ = await cli("inbox", "approve", "--agent", GUARDED, "--approver", "alice", "--yes")
    assert code == 0 and f"applied {guarded}" in out
    code, out, _ = await cli("inbox", "approve", "--agent", GUARDED, "--yes")
    assert code == 0 and "nothing waits for approval that matches" in out


async def test_bad_input_is_one_line_and_loses_nothing(runs: ReinClient, cli: Cli) -> None:
    waits = await waiting(runs, FILES, "read /tmp/keep", "acme")
    before = (await runs.policy.rules()).version
    one_line(await cli.process("policy", "add", "allow", "--tool", "x", "--arg", "nonsense"), EXIT_USAGE, "KEY=GLOB")
    one_line(await cli("policy", "add", "maybe", "--tool", "x"), EXIT_USAGE, "allow, ask or deny")
    scope = one_line(await cli("policy", "add", "allow", "--tool", "x", "--scope", "run"), EXIT_USAGE)
    assert scope == "rein: the rule does not parse: scope run needs the run's id (--run ID)"  # rein's words, no pydantic
    one_line(await cli("policy", "add", "allow", "--tool", "x", "--arg", "bad key=1"), EXIT_USAGE, "not an argument name")
    one_line(await cli("policy", "remove", "r999"), EXIT_REJECTED, "no rule with id 'r999'")
    one_line(await cli("policy", "explain", "no-such-run"), EXIT_NOT_FOUND, "no-such-run")
    one_line(await cli("inbox", "--older-than", "soon"), EXIT_USAGE, "--older-than")
    one_line(await cli("inbox", "--agent", 'a"b'), EXIT_USAGE, "not a name")
    with pytest.raises(PolicyError, match="does not parse") as refused:
        await runs.policy.add("allow", "")
    assert "Value error" not in str(refused.value), refused.value
    assert (await runs.policy.rules()).version == before  # no rule added, none lost

    forged = await runs.decide_item(waits, "approve", tenant="globex")  # a forged tenant: the run refuses it
    assert forged.outcome == "refused" and "not of tenant 'globex'" in forged.detail
    await runs.client.get_workflow_handle(waits).signal("approve", {"tenant": "globex"})  # the signal: ignored
    unknown = await runs.decide_item("no-such-run", "approve")
    assert unknown.outcome != "applied"
    assert (await runs.status(waits)).status == "waiting_approval"  # nothing lost: it still waits
    assert (await runs.status(waits)).ignored_signals == 1
    await runs.approve(waits)
    assert (await runs.result(waits)).output == "Done: contents of /tmp/keep"
