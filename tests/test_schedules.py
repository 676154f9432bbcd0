"""Schedules (issue 37): agents on a clock, on Temporal's own Schedules, from Python and from the CLI,
against the real dev server; scheduled runs are rein runs (listed with `rein list --schedule`)."""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import timedelta
from typing import Any

import pytest
from temporalio.service import RPCError

import rein
from rein.cli.app import EXIT_NO_WORKER, EXIT_NOT_FOUND, EXIT_USAGE
from rein.client import ReinClient, ScheduleError
from rein.core.contract import SEARCH_KEYS
from rein.durable.fleet import usage_since
from tests.support.in_process import rein_inproc
from tests.support.waiting import poll
from tests.test_cli import assert_one_line_error, rein_cli
from tests.test_threads import echo_agent

pytestmark = pytest.mark.timeout(180)



async def _scheduled_runs(client: Any, schedule_id: str) -> list[Any]:
    return [r async for r in client.list_workflows(f'TemporalScheduledById="{schedule_id}"')]


async def test_a_schedule_starts_runs_pause_stops_them_trigger_starts_one_delete_removes_it(dev, ids) -> None:
    queue, _ = ids
    agent = echo_agent("digest")
    runs = ReinClient(dev.client, queue)
    schedule_id = f"digest-{uuid.uuid4().hex[:6]}"
    address = dev.client.service_client.config.target_host
    async with rein.create_worker(dev.client, agents=[agent], task_queue=queue):
        handle = await runs.schedule(schedule_id, agent=agent.name, prompt="the daily digest", every="2s")
        await poll(lambda: _at_least(dev.client, schedule_id, 2), "two scheduled runs", timeout=60)
        started = await _scheduled_runs(dev.client, schedule_id)
        assert all(r.id.startswith(f"{schedule_id}-") for r in started)  # Temporal's id: the schedule's, then the time
        first = await runs.result(started[-1].id)
        assert first.output == "heard: the daily digest"
        listed = await asyncio.to_thread(rein_inproc, "list", "--schedule", schedule_id, "--json", "--address", address)
        assert listed.returncode == 0, listed.stderr
        assert {row["run_id"] for row in json.loads(listed.stdout)} >= {r.id for r in started}

        await handle.pause(note="quiet, please")
        described = await handle.describe()
        assert described.schedule.state.paused and described.schedule.state.note == "quiet, please"
        before = described.info.num_actions
        await asyncio.sleep(5)  # two and a half intervals: a paused schedule starts nothing
        assert (await handle.describe()).info.num_actions == before

        await handle.trigger()  # one now, paused or not
        await poll(lambda: _actions(handle, before + 1), "the triggered start", timeout=60)
        await handle.delete()
        with pytest.raises(RPCError):
            await handle.describe()


async def _at_least(client: Any, schedule_id: str, count: int) -> bool:
    return len(await _scheduled_runs(client, schedule_id)) >= count


async def _actions(handle: Any, count: int) -> bool:
    return (await handle.describe()).info.num_actions >= count


async def test_skip_holds_while_a_run_waits_for_approval(dev, ids) -> None:
    """overlap=skip: while the last scheduled run waits days for a person, later starts are skipped (counted),
    not piled up; once it is approved and ends, the next start runs."""
    queue, _ = ids
    agent = echo_agent("triage", permission="ask")
    runs = ReinClient(dev.client, queue)
    schedule_id = f"triage-{uuid.uuid4().hex[:6]}"
    async with rein.create_worker(dev.client, agents=[agent], task_queue=queue):
        handle = await runs.schedule(schedule_id, agent=agent.name, prompt="tool:0.1", every="1s", overlap="skip")
        await poll(lambda: _waiting(runs, dev.client, schedule_id), "the first run waits for approval", timeout=60)
        await poll(lambda: _skipped(handle, 2), "starts skipped while it waits", timeout=60)
        assert len(await _scheduled_runs(dev.client, schedule_id)) == 1
        [waiting] = await _scheduled_runs(dev.client, schedule_id)
        await runs.approve(waiting.id, wait=True)
        assert (await runs.result(waiting.id)).output == "heard: tool:0.1"
        await poll(lambda: _at_least(dev.client, schedule_id, 2), "the next start after the run ended", timeout=60)
        await handle.delete()


async def _waiting(runs: ReinClient, client: Any, schedule_id: str) -> bool:
    found = await _scheduled_runs(client, schedule_id)
    return bool(found) and (await runs.status(found[0].id)).status == "waiting_approval"


async def _skipped(handle: Any, count: int) -> bool:
    return (await handle.describe()).info.num_actions_skipped_overlap >= count


async def test_a_schedule_with_a_thread_sends_its_prompt_to_the_thread(dev, ids) -> None:
    queue, thread_id = ids
    agent = echo_agent("standup")
    runs = ReinClient(dev.client, queue)
    schedule_id = f"standup-{uuid.uuid4().hex[:6]}"
    async with rein.create_worker(dev.client, agents=[agent], task_queue=queue):
        handle = await runs.schedule(schedule_id, agent=agent.name, prompt="standup time", cron="0 9 * * 1-5",
                                     thread=thread_id, tenant="acme", catchup="1h")
        described = await handle.describe()
        assert described.schedule.policy.overlap.name == "ALLOW_ALL"  # each start only sends: the thread queues
        assert described.schedule.policy.catchup_window == timedelta(hours=1)
        await handle.trigger()  # the first message starts the thread
        await poll(lambda: _turns(runs, thread_id, 1), "the thread's first turn", timeout=60)
        await handle.trigger()  # the next one is its next turn
        await poll(lambda: _turns(runs, thread_id, 2), "two scheduled messages, two turns of one thread", timeout=60)
        session = await runs.session(thread_id)
        assert [m.content for m in session.messages if m.role == "user"] == ["standup time", "standup time"]
        await handle.delete()
    thread = await dev.client.get_workflow_handle(thread_id).describe()
    assert thread.parent_id  # started by the schedule's ReinScheduledMessage run, and still a run of its tenant:
    assert (thread.typed_search_attributes.get(SEARCH_KEYS["ReinTenant"]),
            thread.typed_search_attributes.get(SEARCH_KEYS["ReinAgent"])) == ("acme", agent.name)

    async def counted() -> Any:
        report = await usage_since(dev.client, timedelta(minutes=10))
        line = next((s for s in report.agents if s.key == agent.name), None)
        return line if line is not None and line.tokens == 2 else None

    line = await poll(counted, "rein usage counting the scheduled thread")
    assert line.runs == 1


async def _turns(runs: ReinClient, thread_id: str, count: int) -> bool:
    try:
        view = await runs.thread(thread_id)
    except Exception:
        return False  # not started yet
    return view.turns >= count and view.status == "idle"


async def test_each_bad_input_is_one_line_and_creates_nothing(dev, ids) -> None:
    queue, _ = ids
    agent = echo_agent("nightly")
    address = dev.client.service_client.config.target_host
    schedule_id = f"nightly-{uuid.uuid4().hex[:6]}"

    def cli(*args: str) -> Any:  # in this process: each command's output, exit code and effect
        return rein_inproc("schedule", *args, "--address", address)

    async with rein.create_worker(dev.client, agents=[agent], task_queue=queue):
        base = ["create", schedule_id, "--agent", agent.name, "--prompt", "triage", "--queue", queue]
        # the real console script: a bad value is one line on stderr and exit 2 from the process itself
        bad_cron = await asyncio.to_thread(rein_cli, "schedule", *base, "--cron", "every morning", "--address", address)
        assert_one_line_error(bad_cron, EXIT_USAGE, "is not a cron expression")
        bad_overlap = await asyncio.to_thread(cli, *base, "--every", "1h", "--overlap", "sometimes")
        assert_one_line_error(bad_overlap, EXIT_USAGE, "unknown --overlap 'sometimes'")
        both = await asyncio.to_thread(cli, *base, "--every", "1h", "--cron", "0 9 * * *")
        assert_one_line_error(both, EXIT_USAGE, "give --cron or --every")
        nobody = await asyncio.to_thread(cli, "create", schedule_id, "--agent", "nobody-serves-this", "--prompt", "x",
                                         "--every", "1h")
        assert nobody.returncode == EXIT_NO_WORKER and nobody.stderr.count("\n") == 1, nobody.stderr
        assert "--no-check" in nobody.stderr  # what it names exists:
        later = await asyncio.to_thread(cli, "create", f"{schedule_id}-later", "--agent", "nobody-serves-this",
                                        "--prompt", "x", "--every", "1h", "--no-check", "--paused")
        assert later.returncode == 0, later.stderr
        assert (await asyncio.to_thread(cli, "delete", f"{schedule_id}-later")).returncode == 0
        bad_catchup = await asyncio.to_thread(cli, *base, "--every", "1h", "--catchup", "soon")
        assert_one_line_error(bad_catchup, EXIT_USAGE, "--catchup 'soon' is not a duration")
        made = await asyncio.to_thread(cli, *base, "--every", "1h", "--json")
        assert made.returncode == 0, made.stderr
        assert json.loads(made.stdout)["overlap"] == "skip"
        taken = await asyncio.to_thread(cli, *base, "--every", "1h")
        assert_one_line_error(taken, 1, "exists already")
        listed = await asyncio.to_thread(cli, "list", "--json")
        assert schedule_id in [row["schedule_id"] for row in json.loads(listed.stdout)]
        assert (await asyncio.to_thread(cli, "pause", schedule_id, "--note", "holiday")).returncode == 0
        shown = json.loads((await asyncio.to_thread(cli, "describe", schedule_id, "--json")).stdout)
        assert (shown["state"], shown["note"], shown["agent"]) == ("paused", "holiday", agent.name)
        assert (await asyncio.to_thread(cli, "delete", schedule_id)).returncode == 0
        gone = await asyncio.to_thread(cli, "describe", schedule_id)
        assert_one_line_error(gone, EXIT_NOT_FOUND, f"no schedule with id '{schedule_id}'")
    with pytest.raises(ScheduleError, match="give --cron or --every"):
        await ReinClient(dev.client, queue).schedule("x", agent=agent.name, prompt="p")


async def test_the_ui_link_for_scheduled_runs_that_failed_finds_them(dev, ids) -> None:
    """`rein server`'s "scheduled runs that failed" link is a visibility query the server runs: a scheduled run of
    an agent the worker does not know fails, and the query finds it (and no run that was not scheduled)."""
    from rein.ops.ui_links import SCHEDULED_FAILED_QUERY

    queue, _ = ids
    agent = echo_agent("known")
    runs = ReinClient(dev.client, queue)
    schedule_id = f"broken-{uuid.uuid4().hex[:6]}"
    async with rein.create_worker(dev.client, agents=[agent], task_queue=queue):
        handle = await runs.schedule(schedule_id, agent="no-such-agent", prompt="x", cron="0 3 * * *")
        await handle.trigger()
        query = f'{SCHEDULED_FAILED_QUERY} AND TemporalScheduledById="{schedule_id}"'

        async def found() -> bool:
            return bool([r async for r in dev.client.list_workflows(query)])

        await poll(found, "the failed scheduled run in the link's list", timeout=60)
        await handle.delete()


async def test_a_schedule_made_with_the_cli_is_temporals_and_buffer_one_holds_one_start(dev, ids) -> None:
    """`rein schedule create` makes a plain Temporal Schedule (the `temporal` CLI reads its AgentWorkflow action
    and JSON input); with buffer_one, while its run waits for approval one start is kept, the rest skipped;
    trigger/unpause/backfill from the CLI."""
    from tests.test_threads_processes import _temporal

    queue, _ = ids
    agent = echo_agent("buffered", permission="ask")
    address = dev.client.service_client.config.target_host
    runs = ReinClient(dev.client, queue)
    schedule_id = f"buffered-{uuid.uuid4().hex[:6]}"

    def cli(*args: str) -> Any:  # in this process: each command's output, exit code and effect
        return rein_inproc("schedule", *args, "--address", address)

    async with rein.create_worker(dev.client, agents=[agent], task_queue=queue):
        made = await asyncio.to_thread(cli, "create", schedule_id, "--agent", agent.name, "--prompt", "tool:0.1",
                                       "--every", "1h", "--overlap", "buffer_one", "--tenant", "acme", "--paused",
                                       "--queue", queue)
        assert made.returncode == 0, made.stderr
        shown = await asyncio.to_thread(_temporal, address, "schedule", "describe", "--schedule-id", schedule_id,
                                        "--output", "json")
        assert shown.returncode == 0, shown.stderr
        action = json.loads(shown.stdout)["schedule"]["action"]["startWorkflow"]
        assert (action["workflowType"]["name"], action["taskQueue"]["name"]) == ("AgentWorkflow", queue)
        listed = await asyncio.to_thread(_temporal, address, "schedule", "list", "--output", "json")
        assert schedule_id in listed.stdout
        assert (await asyncio.to_thread(cli, "trigger", schedule_id)).returncode == 0  # paused: one now all the same
        await poll(lambda: _waiting(runs, dev.client, schedule_id), "the triggered run waits for approval", timeout=60)
        [waiting] = await _scheduled_runs(dev.client, schedule_id)
        assert waiting.typed_search_attributes.get(SEARCH_KEYS["ReinTenant"]) == "acme"
        handle = dev.client.get_schedule_handle(schedule_id)
        for _ in range(3):  # three more starts while it waits: one is kept, two are skipped
            assert (await asyncio.to_thread(cli, "trigger", schedule_id)).returncode == 0
        await poll(lambda: _skipped(handle, 2), "starts skipped while one is buffered", timeout=60)
        assert len(await _scheduled_runs(dev.client, schedule_id)) == 1
        await runs.approve(waiting.id, wait=True)
        await poll(lambda: _at_least(dev.client, schedule_id, 2), "the buffered start after the run ended", timeout=60)
        assert (await asyncio.to_thread(cli, "unpause", schedule_id)).returncode == 0
        assert not (await handle.describe()).schedule.state.paused
        backfilled = await asyncio.to_thread(cli, "backfill", schedule_id, "--start", "2026-01-01T00:00",
                                             "--end", "2026-01-01T02:30", "--overlap", "allow_all")
        assert backfilled.returncode == 0, backfilled.stderr
        await poll(lambda: _at_least(dev.client, schedule_id, 5), "the backfilled starts (00:00, 01:00, 02:00)", timeout=60)
        bad = await asyncio.to_thread(cli, "backfill", schedule_id, "--start", "-soon", "--end", "now")
        assert_one_line_error(bad, EXIT_USAGE, "--start 'soon' is not a duration")
        recent = await asyncio.to_thread(cli, "backfill", schedule_id, "--start", "-2h", "--end", "now")
        assert recent.returncode == 0, recent.stderr
        await poll(lambda: _at_least(dev.client, schedule_id, 7), "the last two hours' starts backfilled", timeout=60)
        assert (await asyncio.to_thread(cli, "delete", schedule_id)).returncode == 0


async def test_a_malformed_scheduled_message_fails_its_run_with_why_and_no_workflow_task(dev, ids) -> None:
    """ReinScheduledMessage's input from anyone (a hand-made schedule, `temporal workflow start`): a malformed one
    fails that run, saying what is wrong, and never fails a workflow task."""
    from temporalio.api.enums.v1 import EventType
    from temporalio.client import WorkflowFailureError

    queue, _ = ids
    agent = echo_agent("messages")
    async with rein.create_worker(dev.client, agents=[agent], task_queue=queue):
        for bad, why in [({"thread_id": ""}, "thread_id: String should have at least 1 character"),
                         ({"thread_id": "t", "agent": agent.name, "text": "x", "attributes": {"ReinAgent": 5}},
                          "attributes.ReinAgent: Input should be a valid string"),
                         ("garbage", "payload: Input should be a valid dictionary")]:
            handle = await dev.client.start_workflow("ReinScheduledMessage", bad, id=f"message-{uuid.uuid4().hex[:6]}",
                                                     task_queue=queue)
            with pytest.raises(WorkflowFailureError) as failed:
                await asyncio.wait_for(handle.result(), 30)
            assert why in str(failed.value.cause), failed.value.cause
            kinds = [e.event_type for e in (await handle.fetch_history()).events]
            assert EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED not in kinds
