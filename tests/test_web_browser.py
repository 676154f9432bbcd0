"""rein serve against a real browser (Playwright driving Debian's chromium; no browser download), as an attacker and
as its user would meet it.

- An attacker's pages on other origins (another host: 127.0.0.2, localhost; another port of 127.0.0.1: same-site)
  try every cross-site request a page can make against `rein serve --open` (the most exposed setting: only the
  guard stands between them): "simple" text/plain POSTs to the rules, decisions, bulk decisions and AG-UI, a JSON
  POST, form posts, a fetch with credentials, reading the items, and a DNS-rebound name. Each is refused and the
  server's state shows nothing changed (no rule, no decision, no thread). A configured origin (REIN_WEB_ORIGINS)
  reads and writes with CORS.
- A person on a laptop: `rein serve` with nothing configured prints a sign-in link; the page takes the token from
  the fragment into sessionStorage, takes it out of the address bar, signs in with it as a bearer header, works
  under its Content-Security-Policy with no violation, and the decision records the local person.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import AsyncIterator, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from playwright.async_api import Browser, async_playwright, expect
from temporalio.service import RPCError

import rein
from rein.client import ReinClient
from rein.durable.embedded_server import free_port
from tests.support.inbox import files_agent, waiting
from tests.support.processes import stop_process, wait_for_text
from tests.support.web import start_rein_serve

pytestmark = pytest.mark.timeout(240)
CHROMIUM = "/usr/bin/chromium"
REBOUND = "rebound.example"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
         "--no-first-run", f"--host-resolver-rules=MAP {REBOUND} 127.0.0.1"]
SUFFIX = uuid.uuid4().hex[:6]
QUEUE = f"web-browser-{SUFFIX}"
AGENT = f"browser-files-{SUFFIX}"
ME = "alice@laptop"
ARTIFACTS = Path(__file__).resolve().parent / "artifacts"

ATTACKS = """async ({target, agent, run, thread}) => {
  const results = {};
  const attempt = async (name, request) => {
    try { const r = await request; results[name] = r.type === 'opaque' ? 'opaque' : `read ${r.status}`; }
    catch (e) { results[name] = 'failed'; }
  };
  const text = (path, body) => fetch(target + path, {method: 'POST', mode: 'no-cors',
    headers: {'Content-Type': 'text/plain'}, body: JSON.stringify(body)});
  await attempt('rules', text('/inbox/api/rules', {effect: 'allow', tool: '*'}));
  await attempt('decide', text('/inbox/api/decide', {run_id: run, action: 'approve'}));
  await attempt('bulk', text('/inbox/api/bulk', {run_ids: [run], action: 'approve'}));
  await attempt('agui', text('/agui/' + agent, {threadId: thread, runId: 'r', messages: [
    {id: 'm', role: 'user', content: 'delete /srv/attacked'}]}));
  await attempt('rules-json', fetch(target + '/inbox/api/rules', {method: 'POST',
    headers: {'Content-Type': 'application/json'}, body: JSON.stringify({effect: 'allow', tool: '*'})}));
  await attempt('items-credentials', fetch(target + '/inbox/api/items', {credentials: 'include'}));
  await attempt('items', fetch(target + '/inbox/api/items').then(r => r.json()));
  return results;
}"""

FORM = """({action, name, value}) => {
  const form = document.createElement('form');
  form.method = 'POST'; form.action = action; form.enctype = 'text/plain';
  const field = document.createElement('input');
  field.name = name; field.value = value; form.append(field); document.body.append(form); form.submit();
}"""


class Pages(ThreadingHTTPServer):
    """An attacker's site: a blank page at every path."""


def _site(host: str) -> tuple[Pages, str]:
    class Blank(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            body = b"<!doctype html><title>elsewhere</title><p>a page of another site</p>"
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_: object) -> None:
            pass

    server = Pages((host, free_port()), Blank)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, str(server.server_address[1])


@pytest.fixture(scope="module")
def sites() -> Iterator[dict[str, str]]:
    """Origins of other sites: another loopback host, `localhost`, another port of 127.0.0.1, the allowed one."""
    made = {"127.0.0.2": _site("127.0.0.2"), "localhost": _site("127.0.0.1"), "other port": _site("127.0.0.1"),
            "allowed": _site("127.0.0.1")}
    yield {name: f"http://{'127.0.0.2' if name == '127.0.0.2' else '127.0.0.1' if name == 'other port' else 'localhost'}:{port}"
           for name, (_, port) in made.items()}
    for server, _ in made.values():
        server.shutdown()


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def browser(dev) -> AsyncIterator[tuple[Browser, ReinClient]]:  # noqa: ANN001
    async with rein.create_worker(dev.client, agents=[files_agent(AGENT)], task_queue=QUEUE):
        async with async_playwright() as driver:
            chromium = await driver.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
            try:
                yield chromium, ReinClient(dev.client, QUEUE)
            finally:
                await chromium.close()


async def _rules(runs: ReinClient) -> set[str]:
    """The rules as they read (ids may restart: a module before may have ended the rules' workflow)."""
    return {r.line() for r in await runs.policy.list()}


async def test_pages_of_other_sites_change_nothing_and_an_allowed_origin_works(
        browser: tuple[Browser, ReinClient], sites: dict[str, str], dev, tmp_path: Path) -> None:  # noqa: ANN001
    chromium, runs = browser
    address = dev.client.service_client.config.target_host
    process, target = start_rein_serve(tmp_path / "serve.log", address, QUEUE, "--open", REIN_HOME=str(tmp_path),
                                       REIN_WEB_ORIGINS=sites["allowed"])
    try:
        run_id, thread = await waiting(runs, AGENT, "delete /srv/prod"), f"attack-{SUFFIX}"
        rules = await _rules(runs)
        page = await chromium.new_page()
        statuses: dict[str, list[int]] = {}
        page.on("response", lambda r: statuses.setdefault(f"{r.request.method} {r.url}", []).append(r.status))
        for name in ("127.0.0.2", "localhost", "other port"):
            await page.goto(f"{sites[name]}/")
            results = await page.evaluate(ATTACKS, {"target": target, "agent": AGENT, "run": run_id, "thread": thread})
            assert results["items"] == "failed" and results["rules-json"] == "failed", (name, results)  # unread
            assert results["items-credentials"] == "failed", (name, results)
            for path, value in (("/inbox/api/rules", '{"effect": "allow", "tool": "*", "x": "'),
                                ("/inbox/api/decide", f'{{"run_id": "{run_id}", "action": "approve", "x": "'),
                                (f"/agui/{AGENT}", f'{{"threadId": "{thread}", "runId": "r", "messages": [], "x": "')):
                async with page.expect_navigation():
                    await page.evaluate(FORM, {"action": target + path, "name": value, "value": '"}'})
                assert "refused" in await page.locator("body").inner_text()
                await page.goto(f"{sites[name]}/")
        seen = {key: codes for key, codes in statuses.items() if key.split(" ", 1)[1].startswith(target)}
        assert seen and all(code in (403, 415) for codes in seen.values() for code in codes), seen
        assert await _rules(runs) == rules  # no rule added
        status = await runs.status(run_id)
        assert status.status == "waiting_approval" and not (await runs.session(run_id)).decisions  # no decision
        with pytest.raises(RPCError):
            await runs.thread(thread)  # no turn started
        rebound = await page.goto(f"http://{REBOUND}:{target.rsplit(':', 1)[1]}/inbox/api/items")
        assert rebound is not None and rebound.status == 403 and run_id not in await page.content()
        await _allowed_origin_works(page, sites["allowed"], target, run_id, runs)
        await page.goto(f"{target}/inbox")  # the open mode says so on the page itself
        await expect(page.locator("#open")).to_be_visible()
        await expect(page.locator("#open")).to_contain_text("OPEN")
        await runs.cancel(run_id)
    finally:
        stop_process(process, 20)


async def _allowed_origin_works(page: Any, allowed: str, target: str, run_id: str, runs: ReinClient) -> None:
    await page.goto(f"{allowed}/")
    items = await page.evaluate("async url => (await fetch(url + '/inbox/api/items')).json()", target)
    assert run_id in [i["run_id"] for i in items]
    added = await page.evaluate("""async ({url, agent}) => {
      const r = await fetch(url + '/inbox/api/rules', {method: 'POST', headers: {'Content-Type': 'application/json'},
        body: JSON.stringify({effect: 'allow', tool: 'nothing_here', agent})});
      return r.json(); }""", {"url": target, "agent": AGENT})
    rule, line = added["rule"]["id"], f"allow nothing_here agent={AGENT}"
    assert line in await _rules(runs)
    removed = await page.evaluate("""async ({url, rule}) => (await fetch(url + '/inbox/api/rules/' + rule,
      {method: 'DELETE', headers: {'Content-Type': 'application/json'}})).status""", {"url": target, "rule": rule})
    assert removed == 200 and line not in await _rules(runs)


async def test_the_sign_in_link_signs_in_and_the_page_works_under_its_csp(
        browser: tuple[Browser, ReinClient], dev, tmp_path: Path) -> None:  # noqa: ANN001
    chromium, runs = browser
    address = dev.client.service_client.config.target_host
    log = tmp_path / "serve.log"
    process, target = start_rein_serve(log, address, QUEUE, REIN_HOME=str(tmp_path), REIN_IDENTITY=ME)
    try:
        wait_for_text(log, "sign in: ", process, 30)
        link = log.read_text().split("sign in: ", 1)[1].split()[0]
        token = link.split("#token=", 1)[1]
        assert link == f"{target}/inbox#token={token}" and (tmp_path / "web-token").read_text().strip() == token
        run_id = await waiting(runs, AGENT, "delete /srv/laptop")
        page = await chromium.new_page()
        await page.add_init_script("""document.addEventListener('securitypolicyviolation',
          e => (window.cspViolations = window.cspViolations || []).push(e.violatedDirective + ' ' + e.blockedURI));""")
        problems: list[str] = []
        page.on("console", lambda m: problems.append(m.text) if m.type == "error" or "Content Security" in m.text else None)
        page.on("pageerror", lambda e: problems.append(str(e)))
        opened = await page.goto(link)
        assert opened is not None and "frame-ancestors 'none'" in opened.headers["content-security-policy"]
        card = page.locator(f'.item[data-run="{run_id}"]')
        await expect(card).to_contain_text('delete_file(path="/srv/laptop")', timeout=30_000)
        assert page.url == f"{target}/inbox"  # the token left the address bar (and history)
        assert await page.evaluate("sessionStorage.getItem('rein-token')") == token
        await expect(page.locator("#who")).to_contain_text(ME)
        await card.locator(".deny").click()
        await expect(card).to_have_count(0, timeout=30_000)
        assert [d.approver for d in (await runs.session(run_id)).decisions] == [ME]
        await page.reload()  # the tab keeps its sign-in
        await expect(page.locator("#who")).to_contain_text(ME)
        assert await page.evaluate("window.cspViolations || []") == [] and problems == [], problems
        ARTIFACTS.mkdir(exist_ok=True)
        await page.screenshot(path=str(ARTIFACTS / "inbox-signed-in.png"), full_page=True)
        other = await chromium.new_page()  # another tab without the link: not signed in
        await other.goto(f"{target}/inbox")
        await expect(other.locator("#signin")).to_be_visible()
    finally:
        stop_process(process, 20)
