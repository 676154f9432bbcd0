"""What-if (issue 36): recorded runs replayed against changed agents on the real dev server, LiteLLM over real
HTTP (tests/vendor_server.py), every real tool execution counted in a file (tests/agents/evals.py)."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from temporalio.common import SearchAttributeKey

import rein
import rein.testing
from rein.cli.app import EXIT_EVAL_BELOW, EXIT_NO_WORKER, EXIT_NOT_FOUND, EXIT_USAGE
from rein.client import ReinClient, connect
from rein.core.result import RunResult
from rein.durable.evals import EvalError, RecordedRun, copy_model_limit, select_runs
from rein.durable.fleet import queue_limits, set_limits, usage_since
from rein.ops.scorers import exact_match, json_field, llm_judge
from tests.agents import evals as shop
from tests.support.in_process import rein_async
from tests.support.waiting import poll
from tests.test_cli import assert_one_line_error, rein_cli
from tests.vendor_server import Reply, VendorServer

pytestmark = pytest.mark.timeout(240)
EVAL_OF = SearchAttributeKey.for_keyword("ReinEvalOf")
PROMPTS = {"price apple": None, "price kiwi": None, "buy pear": True, "buy plum": False}
"""Each recorded run's prompt, and whether its charge is approved (None: it asks nothing)."""


def shop_vendor(body: Any) -> Reply:
    """Stateless: `price X` looks X up; `buy X` looks it up and charges (checking the stock first when the
    agent has that tool); then answers with the results. A judge's prompt gets PASS."""
    prompt = next(m["content"] for m in body["messages"] if m["role"] == "user")
    if "RECORDED ANSWER:" in prompt:
        return Reply(text="PASS: the same in substance")
    verb, sku = prompt.split()
    results = [m["content"] for m in body["messages"] if m["role"] == "tool"]
    plan = [("lookup", {"sku": sku})] + ([("charge", {"sku": sku})] if verb == "buy" else [])
    if verb == "buy" and "check_stock" in {t["function"]["name"] for t in body.get("tools") or []}:
        plan.insert(0, ("check_stock", {"sku": sku}))
    if len(results) < len(plan):
        name, arguments = plan[len(results)]
        return Reply(tool_calls=[(f"c{len(results)}", name, arguments)])
    return Reply(text=json.dumps({"item": sku, "said": results}))


class Shop:
    """The vendor, the agent's name and the effects file, in this process's environment and for `rein eval`."""

    def __init__(self, srv: VendorServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.env = {"REINTEST_VENDOR": srv.base_url, "REINTEST_SHOP": f"shop-{uuid.uuid4().hex[:6]}",
                    "REINTEST_EFFECTS": str(tmp_path / "effects")}
        for key, value in self.env.items():
            monkeypatch.setenv(key, value)
        self.srv = srv
        self.name = self.env["REINTEST_SHOP"]

    def effects(self) -> list[str]:
        path = Path(self.env["REINTEST_EFFECTS"])
        return path.read_text().splitlines() if path.exists() else []


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    with VendorServer(responder=shop_vendor) as srv:
        yield Shop(srv, tmp_path, monkeypatch)


class Recorded:
    """The module's one recording (record() below, made once: what-if runs never change it): its shop, client,
    prompt -> run id, and the tools it ran. Each test starts with an empty effects file, so what a test's
    what-if runs executed is all the file holds."""

    def __init__(self, store: Shop, runs: ReinClient, ids: dict[str, str]) -> None:
        self.store, self.runs, self.ids, self.effects = store, runs, ids, store.effects()


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def recording(dev: Any, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Recorded]:
    with pytest.MonkeyPatch.context() as monkeypatch, VendorServer(responder=shop_vendor) as srv:
        shop_ = Shop(srv, tmp_path_factory.mktemp("shop"), monkeypatch)
        yield Recorded(shop_, *await record(dev, shop_))


@pytest.fixture
def recorded(recording: Recorded) -> Recorded:
    Path(recording.store.env["REINTEST_EFFECTS"]).unlink(missing_ok=True)
    return recording


async def record(dev: Any, store: Shop) -> tuple[ReinClient, dict[str, str]]:
    """The original agent's runs, one per prompt, each decided as PROMPTS says: prompt -> run id."""
    queue = f"shop-{uuid.uuid4().hex[:6]}"
    runs = ReinClient(dev.client, queue)
    ids: dict[str, str] = {}
    async with rein.create_worker(dev.client, agents=[shop.build("original")], task_queue=queue):
        for prompt, approve in PROMPTS.items():
            handle = await runs.start(store.name, prompt)
            paused = await runs.wait(handle.id)
            if approve is not None:
                assert paused.interrupt is not None and paused.interrupt.type == "need_approval", paused
                await (runs.approve if approve else runs.deny)(handle.id, approver="ops", reason="test", wait=True)
            result = await runs.result(handle.id)
            assert result.stop_reason == "done", result
            ids[prompt] = handle.id
    return runs, ids


RECORDED_EFFECTS = ["lookup apple", "lookup kiwi", "lookup pear", "charge pear", "lookup plum"]


async def test_an_unchanged_agent_matches_every_recorded_run_and_runs_no_tool_again(dev, recorded):
    runs, ids, store = recorded.runs, recorded.ids, recorded.store
    assert recorded.effects == RECORDED_EFFECTS
    heard: list[str] = []
    report = await runs.eval(shop.build("original"), runs=list(ids.values()), on_row=lambda row: heard.append(row.recorded))
    assert [r.verdict for r in report.rows] == ["match"] * 4, report.rows
    assert sorted(heard) == sorted(ids.values())  # progress: each row as it was compared
    assert store.effects() == []  # no tool ran again
    by_prompt = {p: next(r for r in report.rows if r.recorded == i) for p, i in ids.items()}
    assert [by_prompt[p].reused for p in PROMPTS] == [1, 1, 2, 2]  # plum's denied charge: the recorded denial
    assert all(r.ran == 0 and r.first_difference is None and r.same_output for r in report.rows)
    assert "Denied by ops" in (by_prompt["buy plum"].output or "")
    assert (report.matched, report.share) == (4, 1.0)
    for row in report.rows:  # marked, and a durable run like any other, whose workflow tasks never failed
        description = await dev.client.get_workflow_handle(row.run).describe()
        assert description.typed_search_attributes.get(EVAL_OF) == row.recorded
        assert row.tokens == row.recorded_tokens > 0
        history = await dev.client.get_workflow_handle(row.run).fetch_history()
        assert not [e for e in history.events if e.HasField("workflow_task_failed_event_attributes")]


async def test_a_changed_agent_diverges_exactly_where_it_makes_a_new_call(dev, recorded):
    runs, ids, store = recorded.runs, recorded.ids, recorded.store
    report = await runs.eval(shop.build("stocking"), runs=list(ids.values()))
    verdicts = {r.recorded: (r.verdict, r.diverged) for r in report.rows}
    assert verdicts == {
        ids["price apple"]: ("match", ""),
        ids["price kiwi"]: ("match", ""),
        ids["buy pear"]: ("diverged", 'diverged at step 0: new call check_stock({"sku":"pear"})'),
        ids["buy plum"]: ("diverged", 'diverged at step 0: new call check_stock({"sku":"plum"})'),
    }
    assert store.effects() == []
    assert report.summary().startswith("2/4 runs match (50%)")


async def test_a_new_call_to_a_tool_safe_to_run_again_runs_once_and_the_rest_is_reused(dev, recorded):
    runs, ids, store = recorded.runs, recorded.ids, recorded.store
    report = await runs.eval(shop.build("restocking"), runs=[ids["buy pear"], ids["buy plum"]])
    assert [(r.verdict, r.first_difference, r.ran, r.reused) for r in report.rows] == [("differ", 0, 1, 2)] * 2
    effects = store.effects()  # the two what-if runs go at once: their checks in either order
    assert sorted(effects) == ["check_stock pear", "check_stock plum"]


async def test_a_model_switch_that_behaves_the_same_matches(dev, recorded):
    runs, ids, store = recorded.runs, recorded.ids, recorded.store
    asked = len(store.srv.requests)
    report = await runs.eval(shop.build("switched"), runs=list(ids.values()), concurrency=2)
    assert report.share == 1.0, report.rows
    assert {r.body["model"] for r in store.srv.requests[asked:]} == {"shop-b"}


async def test_scorers_judge_the_answers(dev, recorded):
    runs, ids, store = recorded.runs, recorded.ids, recorded.store
    judge = llm_judge("openai/judge", api_base=store.srv.base_url + "/v1", api_key="sk-test")

    def half(recorded: RecordedRun, replayed: RunResult) -> float:
        return 0.5

    half.threshold = 0.5  # type: ignore[attr-defined]

    def broken(recorded: RecordedRun, replayed: RunResult) -> float:
        raise RuntimeError("scorer bug")

    report = await runs.eval(shop.build("switched"), runs=[ids["price apple"]],
                             scorers=[exact_match(), json_field("item"), judge, half])
    [row] = report.rows
    assert row.scores == {"exact_match": 1.0, "json:item": 1.0, "llm_judge": 1.0, "half": 0.5}
    assert row.verdict == "match"
    assert judge.reasons[ids["price apple"]].startswith("PASS")
    judged = [r.body for r in store.srv.requests if r.body["model"] == "judge"]
    assert len(judged) == 1 and '"item": "apple"' in judged[0]["messages"][0]["content"]
    failing = await runs.eval(shop.build("original"), runs=[ids["price kiwi"]], scorers=[json_field("price"), broken])
    [row] = failing.rows
    assert (row.verdict, row.passed["json:price"]) == ("failed", False)
    assert "scorer broken failed: RuntimeError: scorer bug" in row.error


async def test_a_selection_leaves_out_what_if_runs_and_usage_leaves_them_out_too(dev, store):
    runs, ids = await record(dev, store)
    await runs.eval(shop.build("original"), runs=list(ids.values()))

    async def selected() -> bool:
        return set(await select_runs(runs, name=store.name, limit=100)) == set(ids.values())

    await poll(selected, "the recorded runs alone selected", timeout=30, interval=0.25)
    report = await runs.eval(shop.build("original"), since="1h", limit=2)
    assert len(report.rows) == 2 and report.share == 1.0

    async def usage_counts(include: bool, count: int) -> bool:
        spend = await usage_since(dev.client, since=__import__("datetime").timedelta(hours=1), include_evals=include)
        return next((s.runs for s in spend.agents if s.key == store.name), 0) == count

    await poll(lambda: usage_counts(False, 4), "usage without what-if runs", timeout=30, interval=0.25)
    await poll(lambda: usage_counts(True, 10), "usage with the what-if runs", timeout=30, interval=0.25)
    with pytest.raises(EvalError, match="no finished runs of agent 'nobody'"):
        await runs.eval(shop.build("original"), name="nobody")


async def test_the_cli_gate_and_its_errors(dev, recorded):
    ids, store = recorded.ids, recorded.store
    address = dev.client.service_client.config.target_host
    every = ",".join(ids.values())
    # In this process (the command's output, exit code and effect), but for the gate below: the console script's
    # exit code and one-line stderr, through a real process.
    cli = lambda *argv: rein_async("eval", *argv, "--address", address, **store.env)  # noqa: E731
    passed = await cli("--agent", "tests.agents.evals:original", "--runs", every, "--fail-under", "0.95")
    assert passed.returncode == 0, passed.stderr
    assert "4/4 runs match (100%)" in passed.stdout
    below = await asyncio.to_thread(rein_cli, "eval", "--agent", "tests.agents.evals:stocking", "--runs", every,
                                    "--fail-under", "0.95", "--json", "--address", address, **store.env)
    assert below.returncode == EXIT_EVAL_BELOW, below.stderr
    assert below.stderr.strip() == "rein: 50% of runs match, under --fail-under 0.95"
    printed = json.loads(below.stdout)
    assert sorted(r["verdict"] for r in printed["rows"]) == ["diverged", "diverged", "match", "match"]
    assert (printed["matched"], printed["total"], printed["diverged"], printed["share"]) == (2, 4, 2, 0.5)
    assert store.effects() == []  # two commands (one a process), no tool ran again
    pear = next(r for r in printed["rows"] if r["recorded"] == ids["buy pear"])

    async def listed() -> bool:
        shown = await rein_async("list", "--eval-of", ids["buy pear"], "--json", "--address", address)
        return {row["run_id"] for row in json.loads(shown.stdout or "[]")} >= {pear["run"]}

    await poll(listed, "rein list --eval-of to show the what-if runs", timeout=30, interval=0.5)  # a command a poll
    what_if = {row["run"] for row in printed["rows"]}

    async def by_default_and_with_evals() -> tuple[set[str], set[str]] | None:
        shown = [{row["run_id"] for row in json.loads((await rein_async(
            "list", "--agent", store.name, "--json", "--address", address, *extra)).stdout)}
            for extra in ([], ["--evals"])]
        return (shown[0], shown[1]) if shown[1] >= what_if else None

    hidden, shown = await poll(by_default_and_with_evals, "rein list --evals to show the what-if runs", timeout=30,
                               interval=0.5)
    assert hidden == set(ids.values())  # `rein list`: the recorded runs, no what-if run of them
    assert shown >= hidden | what_if
    canary = f"canary-{uuid.uuid4().hex[:6]}"  # a NAME: the changed build's workers, deployed on a queue of their own
    async with rein.create_worker(dev.client, agents=[shop.build("stocking")], task_queue=canary):
        deployed = await cli("--agent", store.name, "--task-queue", canary, "--runs", every, "--json")
    assert deployed.returncode == 0, deployed.stderr
    assert json.loads(deployed.stdout)["diverged"] == 2
    assert_one_line_error(await cli("--agent", store.name, "--task-queue", f"nobody-{canary}", "--runs", every),
                          EXIT_NO_WORKER, "nobody-")
    assert_one_line_error(await cli("--agent", "tests.agents.evals:original", "--runs", "no-such-run"),
                          EXIT_NOT_FOUND, "no-such-run")
    assert_one_line_error(await cli("--agent", "tests.agents.evals:original", "--since", "7x"), EXIT_USAGE, "7x")
    assert_one_line_error(await cli("--agent", "tests.agents.evals:original", "--scorer", "bogus"), EXIT_USAGE,
                          "bogus")
    assert_one_line_error(await cli("--agent", "tests.agents.evals:nothing"), EXIT_USAGE, "nothing")
    assert_one_line_error(await cli("--agent", "tests.agents.evals:original", "--name", "nobody"), EXIT_NOT_FOUND,
                          "nobody")


async def test_exported_histories_are_fixtures_under_the_time_skipping_server(dev, recorded, tmp_path):
    ids, store = recorded.ids, recorded.store
    folder = tmp_path / "histories"
    folder.mkdir()
    for run_id in ids.values():
        history = await dev.client.get_workflow_handle(run_id).fetch_history()
        (folder / f"{run_id}.json").write_text(history.to_json())
    same = await rein.testing.eval_histories(shop.build("original"), folder)
    assert same.share == 1.0, same.rows
    changed = await rein.testing.eval_histories(shop.build("stocking"), folder)
    assert sorted(r.verdict for r in changed.rows) == ["diverged", "diverged", "match", "match"], changed.rows
    assert store.effects() == []


async def test_what_if_model_calls_stay_on_their_own_queue_under_the_fleets_limit(dev, recorded, monkeypatch):
    """A worker of the fleet routes model calls to the provider's queue (REIN_MODEL_QUEUES); the what-if worker
    must not (the fleet's model workers serve the recorded definition), and takes the fleet's limit instead."""
    runs, ids = recorded.runs, recorded.ids
    monkeypatch.setenv("REIN_MODEL_QUEUES", "*")
    queue = f"what-if-{uuid.uuid4().hex[:6]}"
    report = await runs.eval(shop.build("original"), runs=[ids["price apple"]], task_queue=queue)
    assert report.share == 1.0, report.rows
    history = await dev.client.get_workflow_handle(report.rows[0].run).fetch_history()
    queues = {e.activity_task_scheduled_event_attributes.task_queue.name for e in history.events
              if e.HasField("activity_task_scheduled_event_attributes")}
    assert queues == {queue}

    provider = f"evalprov{uuid.uuid4().hex[:6]}"
    await set_limits(dev.client, model=f"{provider}/m", rps=3.0, weights={"acme": 2.0})
    limited = f"what-if-{uuid.uuid4().hex[:6]}"
    await copy_model_limit(runs, f"{provider}/m", limited)
    copied = await queue_limits(dev.client, limited)
    assert (copied.rps, copied.weights) == (3.0, {"acme": 2.0})


def helpdesk_vendor(body: Any) -> Reply:
    """The helpdesk asks a person which colour, then its researcher (an agent as a tool, which searches); the
    researcher searches once and reports."""
    tools = {t["function"]["name"] for t in body.get("tools") or []}
    results = [m["content"] for m in body["messages"] if m["role"] == "tool"]
    if "search" in tools:  # the researcher
        if not results:
            prompt = next(m["content"] for m in body["messages"] if m["role"] == "user")
            return Reply(tool_calls=[("s1", "search", {"q": prompt})])
        return Reply(text=f"found: {results[-1]}")
    if not results:
        return Reply(tool_calls=[("h1", "ask_human", {"question": "Which colour?"})])
    if len(results) == 1:
        return Reply(tool_calls=[("h2", "researcher", {"prompt": f"paint {results[0]}"})])
    return Reply(text=f"done: {results[-1]}")


async def test_a_recorded_answer_and_an_agent_used_as_a_tool_are_reused_not_asked_or_run_again(dev, store):
    """The person's answer is applied as recorded; the child agent's call gets the recorded result: no child run
    starts, so its tool does not run either."""
    def helpdesk() -> rein.Agent:
        def search(q: str) -> str:
            """Search the catalogue."""
            Path(store.env["REINTEST_EFFECTS"]).open("a").write(f"search {q}\n")
            return f"{q} in aisle 7"

        provider = rein.LiteLLMProvider("openai/desk", api_base=store.srv.base_url + "/v1", api_key="sk-test")
        researcher = rein.Agent(provider=provider, tools=[search], name=f"researcher-{store.name}")
        return rein.Agent(provider=provider, tools=[rein.ask_human, researcher.as_tool("researcher")],
                          name=f"desk-{store.name}")

    store.srv.responder = helpdesk_vendor
    queue = f"desk-{uuid.uuid4().hex[:6]}"
    runs = ReinClient(dev.client, queue)
    async with rein.create_worker(dev.client, agents=[helpdesk()], task_queue=queue):
        handle = await runs.start(f"desk-{store.name}", "help me")
        paused = await runs.wait(handle.id)
        assert paused.interrupt is not None and paused.interrupt.type == "need_input", paused
        await runs.answer(handle.id, "blue", approver="ops", wait=True)
        recorded = await runs.result(handle.id)
    assert recorded.output == "done: found: paint blue in aisle 7"
    assert store.effects() == ["search paint blue"]
    report = await runs.eval(helpdesk(), runs=[handle.id])
    [row] = report.rows
    assert (row.verdict, row.reused, row.ran, row.output) == ("match", 2, 0, recorded.output)
    assert store.effects() == ["search paint blue"]  # no child run, no search
    history = await dev.client.get_workflow_handle(row.run).fetch_history()
    assert not [e for e in history.events if e.HasField("start_child_workflow_execution_initiated_event_attributes")]
    assert not [e for e in history.events if e.HasField("activity_task_scheduled_event_attributes")
                and e.activity_task_scheduled_event_attributes.activity_type.name == "rein.run_tool"]


async def test_what_if_runs_are_marked_where_the_fleets_build_never_registered_the_attribute(store, tmp_path):
    """A namespace whose workers are of a build before ReinEvalOf: `rein eval` adds it before it starts runs."""
    from temporalio.api.operatorservice.v1 import RemoveSearchAttributesRequest

    from rein.durable.embedded_server import start_dev_server

    server = start_dev_server(log_path=tmp_path / "server.log")
    try:
        client = await connect(server.address)
        queue = f"old-fleet-{uuid.uuid4().hex[:6]}"
        async with rein.create_worker(client, agents=[shop.build("original")], task_queue=queue):
            handle = await ReinClient(client, queue).start(store.name, "price fig")
            await handle.result()
        await client.operator_service.remove_search_attributes(
            RemoveSearchAttributesRequest(namespace=client.namespace, search_attributes=["ReinEvalOf"]))
        fresh = ReinClient(await connect(server.address))  # knows nothing of the namespace yet
        report = await fresh.eval(shop.build("original"), runs=[handle.id])
        assert report.share == 1.0, report.rows
        description = await client.get_workflow_handle(report.rows[0].run).describe()
        assert description.typed_search_attributes.get(EVAL_OF) == handle.id
    finally:
        server.stop()
