"""The inbox page (`rein serve`, /inbox) in a real browser: Playwright driving Debian's chromium (no browser
download), against `rein serve` in its own process, a real dev server and a worker with runs of two tenants.

People sign in with a JWT from a local identity provider (its tenant claim scopes them) or the shared token.
One server, one worker, one `rein serve` and one browser for the module.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio
from playwright.async_api import Page, async_playwright, expect

import rein
from rein.client import ReinClient
from tests.support.inbox import IdentityProvider, files_agent, start_serve
from tests.support.processes import stop_process
from tests.support.waiting import poll
from tests.support.wipe import shown

ARTIFACTS = Path(__file__).resolve().parent / "artifacts"
CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
         "--no-first-run"]
SUFFIX = uuid.uuid4().hex[:6]
QUEUE = f"inbox-page-{SUFFIX}"
AGENT = f"page-files-{SUFFIX}"
OPERATOR = "operator-secret-1"


class Site:
    def __init__(self, url: str, runs: ReinClient, idp: IdentityProvider, page: Page):
        self.url, self.runs, self.idp, self.page = url, runs, idp, page

    async def sign_in(self, token: str) -> None:
        await self.page.goto(f"{self.url}/inbox")
        await self.page.evaluate("t => sessionStorage.setItem('rein-token', t)", token)
        await self.page.goto(f"{self.url}/inbox")

    def item(self, run_id: str) -> Any:
        return self.page.locator(f'.item[data-run="{run_id}"]')

    async def api(self, method: str, path: str, token: str, **kwargs: Any) -> httpx.Response:
        """Async: the worker runs on this test's event loop."""
        async with httpx.AsyncClient(timeout=30) as http:
            headers = {"Authorization": f"Bearer {token}", **kwargs.pop("headers", {})}
            return await http.request(method, f"{self.url}{path}", headers=headers, **kwargs)


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def site(dev, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Site]:  # noqa: ANN001
    runs = ReinClient(dev.client, QUEUE)
    idp = IdentityProvider()
    log = tmp_path_factory.mktemp("serve") / "serve.log"
    process = None
    try:
        async with rein.create_worker(dev.client, agents=[files_agent(AGENT)], task_queue=QUEUE):
            process, url = start_serve(log, dev.client.service_client.config.target_host, QUEUE, idp, OPERATOR)
            async with async_playwright() as driver:
                browser = await driver.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
                page = await browser.new_page(viewport={"width": 1400, "height": 1000})
                try:
                    yield Site(url, runs, idp, page)
                finally:
                    ARTIFACTS.mkdir(exist_ok=True)
                    await page.screenshot(path=str(ARTIFACTS / "inbox-page.png"), full_page=True)
                    await browser.close()
            await _end_policy(dev.client)
    finally:
        stop_process(process, 20)
        idp.close()
        print(log.read_text()[-3000:] if log.exists() else "")


async def _end_policy(client: Any) -> None:
    """The rules are the namespace's: leave none behind for the next module on this server."""
    from rein.core.policy import POLICY_WORKFLOW_ID

    try:
        await client.get_workflow_handle(POLICY_WORKFLOW_ID).terminate("test module done")
    except Exception:
        pass


async def _result(runs: ReinClient, run_id: str) -> rein.RunResult:
    """The run's result, bounded: a run that never ends fails here, naming itself."""
    return await asyncio.wait_for(runs.result(run_id), 60)


async def _waiting(runs: ReinClient, prompt: str, tenant: str) -> str:
    handle = await runs.start(AGENT, prompt, tenant=tenant)
    await poll(lambda: _listed(runs, handle.id), f"{handle.id} in the inbox", 30)
    return handle.id


async def _listed(runs: ReinClient, run_id: str) -> bool:
    return any(i.run_id == run_id and i.since for i in await runs.inbox(agent=AGENT))


async def test_an_approver_of_acme_sees_acts_and_remembers_live_in_the_browser(site: Site) -> None:
    runs, page = site.runs, site.page
    read_a = await _waiting(runs, "read /tmp/a", "acme")
    question = await _waiting(runs, "ask Which region?", "acme")
    globex = await _waiting(runs, "delete /etc/passwd", "globex")
    await site.sign_in(site.idp.token(tenant="acme", sub="alice@acme"))

    await expect(site.item(read_a)).to_contain_text('read_file(path="/tmp/a")')
    await expect(site.item(read_a)).to_contain_text("I will read /tmp/a now.")  # the model's last words
    await expect(page.locator("#who")).to_contain_text("tenant acme")
    await expect(site.item(question)).to_contain_text("Which region?")
    assert await site.item(globex).count() == 0  # another tenant's run: not shown
    link = site.item(read_a).locator("a").first
    assert await link.get_attribute("href") == f"http://ui.example/namespaces/default/workflows/{read_a}"

    await site.item(read_a).locator(".show-turns").click()  # the conversation's last turns
    await expect(site.item(read_a).locator(".turns")).to_contain_text("read /tmp/a")

    await site.item(question).locator(".answer-text").fill("eu-west")
    await site.item(question).locator(".answer").click()
    await expect(site.item(question)).to_have_count(0)  # gone from the list, live
    assert "eu-west" in [m.content for m in (await _result(runs, question)).session.messages if m.role == "tool"][0]

    read_b = await runs.start(AGENT, "read /tmp/b", tenant="acme")  # a new wait appears without a reload
    await expect(site.item(read_b.id)).to_contain_text('read_file(path="/tmp/b")', timeout=30_000)

    await site.item(read_a).locator(".remember").click()  # approve and remember: read_file of this agent
    await expect(site.item(read_a)).to_have_count(0)
    await expect(site.item(read_b.id)).to_have_count(0)  # the rule decided the other pending call at once
    await expect(page.locator("#rules")).to_contain_text(f"allow read_file agent={AGENT} tenant=acme")
    assert (await _result(runs, read_a)).output == "Done: contents of /tmp/a"
    assert (await _result(runs, read_b.id)).output == "Done: contents of /tmp/b"
    explained = {r.call_id: r for r in await runs.policy.explain(read_b.id)}
    assert explained["call-read"].by.startswith("rule r") and explained["call-read"].decision == "approved"
    assert [r.by for r in await runs.policy.explain(read_a)] == ["alice@acme"]  # who signed in; no client's "via"

    read_c = await runs.start(AGENT, "read /tmp/c", tenant="acme")  # the rule decides later calls itself
    assert (await _result(runs, read_c.id)).output == "Done: contents of /tmp/c"

    # Bulk: select all, deny with a reason the model sees.
    d1, d2 = await _waiting(runs, "delete /tmp/x", "acme"), await _waiting(runs, "delete /tmp/y", "acme")
    await expect(site.item(d2)).to_have_count(1)
    await page.locator("#select-all").check()
    await page.locator("#reason").fill("not today")
    await page.locator("#bulk-deny").click()
    await expect(site.item(d1)).to_have_count(0)
    await expect(site.item(d2)).to_have_count(0)
    for run_id in (d1, d2):
        tool = [m.content for m in (await _result(runs, run_id)).session.messages if m.role == "tool"][0]
        assert "Denied by alice@acme" in tool and "not today" in tool
    assert await site.item(globex).count() == 0

    # Operator (the shared token): every tenant; the globex run is there, and its approval goes through.
    await site.sign_in(OPERATOR)
    await expect(site.item(globex)).to_contain_text('delete_file(path="/etc/passwd")')
    await expect(page.locator("#who")).to_contain_text("every tenant")


async def test_a_decision_outside_the_callers_tenant_is_refused_by_the_run_and_bad_input_is_one_line(site: Site) -> None:
    runs = site.runs
    globex = await _waiting(runs, "delete /srv/data", "globex")
    acme = site.idp.token(tenant="acme", sub="mallory@acme")
    card = await shown(runs, globex)  # what a page showing the run would send
    for body in ({"run_id": globex, "action": "approve", **card},
                 {"run_id": globex, "action": "approve", **card, "remember": "always", "tool": "delete_file"}):
        refused = await site.api("POST", "/inbox/api/decide", acme, json=body)
        assert refused.status_code in (200, 404), refused.text
        assert refused.json().get("outcome") != "applied"
    # Straight to the run with a forged tenant (as a page that skipped its own checks would send it): the run refuses.
    forged = await runs.decide_item(globex, "approve", tenant="acme", approver="mallory@acme")
    assert forged.outcome == "refused" and "not of tenant 'acme'" in forged.detail
    assert (await runs.status(globex)).status == "waiting_approval"  # nothing lost: it still waits
    # A rule for another tenant is refused by the policy itself.
    rule = await site.api("POST", "/inbox/api/rules", acme, json={"effect": "allow", "tool": "*", "tenant": "globex"})
    assert rule.status_code == 400 and "acme" in rule.json()["error"]  # refused by the policy workflow itself

    forged_jwt = site.idp.token(key=_other_key(), tenant="globex")  # signed by someone else
    assert (await site.api("GET", "/inbox/api/items", forged_jwt)).status_code == 401
    no_claim = site.idp.token(sub="x")
    assert (await site.api("GET", "/inbox/api/items", no_claim)).status_code == 403
    for path, body, status, words in (
        ("/inbox/api/decide", {"run_id": "no-such-run", "action": "approve", "remember": "always", **card}, 404,
         "no such run"),
        ("/inbox/api/decide", {"run_id": globex, "action": "launch"}, 400, "action"),
        ("/inbox/api/decide", {"run_id": globex, "action": "approve"}, 422, "name the wait the card showed"),
        ("/inbox/api/decide", {"run_id": globex, "action": "deny", "wait": card["wait"]}, 422, "tool_call_ids"),
        ("/inbox/api/decide", {"run_id": globex, "action": "approve", "wait": card["wait"], "tool_call_ids": []}, 422,
         "at least one"),
        ("/inbox/api/decide", {"run_id": globex, "action": "answer", "text": "x"}, 422, "wait"),
        ("/inbox/api/decide", {"run_id": globex, "action": "retry", "tool_call_ids": []}, 422, "wait"),
        ("/inbox/api/bulk", {"run_ids": [globex], "action": "approve"}, 422, "items: [{run_id, wait, tool_call_ids}]"),
        ("/inbox/api/bulk", {"items": [{"run_id": globex}], "action": "approve"}, 422, "wait"),
        ("/inbox/api/rules", {"effect": "allow", "tool": "x", "args": "nonsense"}, 400, "KEY=GLOB"),
        ("/inbox/api/rules", {"effect": "maybe", "tool": "x"}, 400, "effect"),
    ):
        answer = await site.api("POST", path, OPERATOR, json=body)
        assert answer.status_code == status and words in answer.json()["error"], (body, answer.text)
        assert "\n" not in answer.json()["error"]
    garbage = await site.api("POST", "/inbox/api/decide", OPERATOR, content=b"{not json",
                             headers={"Content-Type": "application/json"})
    assert garbage.status_code == 400 and "JSON" in garbage.json()["error"]
    assert (await runs.status(globex)).status == "waiting_approval" and not (await runs.session(globex)).decisions
    applied = (await site.api("POST", "/inbox/api/decide", OPERATOR, json={"run_id": globex, "action": "approve",
                                                                         **card})).json()
    assert applied["outcome"] == "applied", json.dumps(applied)
    assert (await _result(runs, globex)).output == "Done: /srv/data deleted"


def _other_key() -> Any:
    from cryptography.hazmat.primitives.asymmetric import rsa

    return rsa.generate_private_key(public_exponent=65537, key_size=2048)
