"""What every web surface goes through (rein.web.guard), over real HTTP: `rein serve`'s app (rein.web.app.build) in
this process under uvicorn, on a real dev server with a worker whose runs wait for people.

Each refusal is checked where it matters: the server's state afterwards (no rule added, no decision, no thread
started), not only the status code.
"""

from __future__ import annotations

import ast
import json
import re
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio
from temporalio.service import RPCError

import rein
from rein.client import ReinClient
from rein.temporal.bearer import BearerAuth
from rein.web import agui
from rein.web.app import build
from rein.web.inbox import MAX_BULK_IDS
from tests.support.inbox import files_agent, waiting
from tests.support.web import environment, served
from tests.support.wipe import shown

pytestmark = pytest.mark.timeout(180)
SUFFIX = uuid.uuid4().hex[:6]
QUEUE = f"web-guard-{SUFFIX}"
AGENT = f"guard-files-{SUFFIX}"
OPERATOR = f"op-{SUFFIX}"
ALLOWED = "http://localhost:5173"
PUBLIC = "rein.example"
LIMIT = 64 * 1024
ROOT = Path(__file__).resolve().parent.parent


class Site:
    def __init__(self, url: str, runs: ReinClient, web: Any):
        self.url, self.runs, self.web = url, runs, web
        self.host = url.split("//", 1)[1]

    async def call(self, method: str, path: str, *, token: str | None = OPERATOR, **kwargs: Any) -> httpx.Response:
        headers = {**({"Authorization": f"Bearer {token}"} if token else {}), **kwargs.pop("headers", {})}
        async with httpx.AsyncClient(timeout=30) as http:
            return await http.request(method, f"{self.url}{path}", headers=headers, **kwargs)

    async def rules(self) -> set[str]:
        return {r.line() for r in await self.runs.policy.list()}


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def site(dev) -> AsyncIterator[Site]:  # noqa: ANN001
    runs = ReinClient(dev.client, QUEUE)
    with environment(REIN_WEB_ORIGINS=f"{ALLOWED}, https://ops.example", REIN_WEB_PUBLIC_HOST=PUBLIC,
                     REIN_WEB_MAX_BODY=str(LIMIT), REIN_WEB_OPEN=None):
        web = build(dev.client, [files_agent(AGENT)], task_queue=QUEUE, auth=BearerAuth(token=OPERATOR), poll_s=0.2)
    async with rein.create_worker(dev.client, agents=[files_agent(AGENT)], task_queue=QUEUE):
        async with served(web) as url:
            yield Site(url, runs, web)


def refused(response: httpx.Response, status: int, *words: str) -> str:
    """A refusal: `status`, one line of JSON, naming why."""
    assert response.status_code == status, (response.status_code, response.text)
    error = response.json()["error"]
    assert "\n" not in error and all(w in error for w in words), error
    return error


async def test_a_host_it_does_not_serve_gets_nothing(site: Site) -> None:
    run_id = await waiting(site.runs, AGENT, "read /tmp/rebound")
    for host in ("evil.example", f"evil.example:{site.host.split(':')[1]}", f"{PUBLIC}:9999", "127.0.0.1.evil.example"):
        answer = await site.call("GET", "/inbox/api/items", headers={"Host": host})
        refused(answer, 403, "does not serve the host")
        assert run_id not in answer.text  # DNS rebinding reads nothing
    for host in (site.host, f"localhost:{site.host.split(':')[1]}", "[::1]:8000", PUBLIC, f"{PUBLIC}:443"):
        answer = await site.call("GET", "/inbox/api/items", headers={"Host": host})
        assert answer.status_code == 200 and run_id in answer.text, (host, answer.text)
    behind_tls = await site.call("GET", "/inbox/api/items", headers={"Host": PUBLIC, "Origin": f"https://{PUBLIC}"})
    assert behind_tls.status_code == 200  # its own page, through a proxy that ends TLS
    rule = await site.call("POST", "/inbox/api/rules", headers={"Host": "evil.example"},
                           json={"effect": "allow", "tool": "*"})
    refused(rule, 403, "host")
    await site.runs.cancel(run_id)


async def test_requests_from_other_sites_are_refused_and_change_nothing(site: Site) -> None:
    run_id = await waiting(site.runs, AGENT, "delete /srv/one")
    rules = await site.rules()
    allow_all = {"effect": "allow", "tool": "*"}
    attempts: list[tuple[str, str, dict[str, Any], dict[str, str], int, str]] = [
        # a page elsewhere: Origin present and not ours
        ("POST", "/inbox/api/rules", {"json": allow_all}, {"Origin": "http://evil.example"}, 403, "another origin"),
        ("POST", "/inbox/api/decide", {"json": {"run_id": run_id, "action": "approve"}},
         {"Origin": "http://127.0.0.1:1"}, 403, "another origin"),
        ("POST", "/inbox/api/bulk", {"json": {"run_ids": [run_id], "action": "approve"}}, {"Origin": "null"}, 403,
         "another origin"),
        ("GET", "/inbox/api/items", {}, {"Origin": "http://localhost:9"}, 403, "another origin"),
        # no Origin, but the browser says where it comes from
        ("POST", "/inbox/api/rules", {"json": allow_all}, {"Sec-Fetch-Site": "cross-site"}, 403, "cross-site"),
        ("POST", "/inbox/api/decide", {"json": {"run_id": run_id, "action": "approve"}}, {"Sec-Fetch-Site": "same-site"},
         403, "same-site"),
        ("GET", "/inbox/api/events", {}, {"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "cors"}, 403, "cross-site"),
        ("GET", "/inbox/api/items", {}, {"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate"}, 403, "cross-site"),
        ("GET", "/inbox", {}, {"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "iframe"},
         403, "cross-site"),
        # what a form or a "simple" request can send, from anywhere
        ("POST", "/inbox/api/rules", {"content": json.dumps(allow_all)}, {"Content-Type": "text/plain"}, 415, "application/json"),
        ("POST", "/inbox/api/decide", {"content": f"run_id={run_id}&action=approve"},
         {"Content-Type": "application/x-www-form-urlencoded"}, 415, "application/json"),
        ("POST", "/inbox/api/bulk", {"content": json.dumps({"run_ids": [run_id], "action": "approve"})}, {}, 415,
         "without a Content-Type"),
        ("POST", f"/agui/{AGENT}", {"content": json.dumps({"threadId": f"t-{SUFFIX}", "runId": "r", "messages": [
            {"id": "m", "role": "user", "content": "delete /srv/two"}]})}, {"Content-Type": "text/plain"}, 415, "json"),
    ]
    for method, path, body, headers, status, words in attempts:
        refused(await site.call(method, path, headers=headers, **body), status, words)
    assert await site.rules() == rules  # no rule added
    assert (await site.runs.status(run_id)).status == "waiting_approval"  # no decision
    assert not (await site.runs.session(run_id)).decisions
    with pytest.raises(RPCError):  # no thread started
        await site.runs.thread(f"t-{SUFFIX}")
    # A link from a chat or an e-mail still opens the page (a top-level navigation), and the page's own requests pass.
    page = await site.call("GET", "/inbox", token=None, headers={"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate",
                                                                 "Sec-Fetch-Dest": "document"})
    assert page.status_code == 200 and "rein inbox" in page.text
    own = {"Origin": site.url, "Sec-Fetch-Site": "same-origin"}
    items = await site.call("GET", "/inbox/api/items", headers=own)
    assert items.status_code == 200 and run_id in items.text
    denied = await site.call("POST", "/inbox/api/decide", headers=own, json={"run_id": run_id, "action": "deny",
                                                                              **await shown(site.runs, run_id)})
    assert denied.json()["outcome"] == "applied", denied.text


async def test_a_configured_origin_is_answered_with_cors(site: Site) -> None:
    preflight = await site.call("OPTIONS", "/inbox/api/rules", token=None, headers={
        "Origin": ALLOWED, "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization, content-type"})
    assert preflight.status_code == 204
    assert preflight.headers["access-control-allow-origin"] == ALLOWED and preflight.headers["vary"] == "Origin"
    allowed = {h.strip().lower() for h in preflight.headers["access-control-allow-headers"].split(",")}
    assert {"authorization", "content-type"} <= allowed and "POST" in preflight.headers["access-control-allow-methods"]
    items = await site.call("GET", "/inbox/api/items", headers={"Origin": ALLOWED, "Sec-Fetch-Site": "cross-site"})
    assert items.status_code == 200 and items.headers["access-control-allow-origin"] == ALLOWED
    assert "Origin" in items.headers.get_list("vary")
    stranger = await site.call("OPTIONS", "/inbox/api/rules", token=None, headers={
        "Origin": "http://localhost:5174", "Access-Control-Request-Method": "POST"})
    assert stranger.status_code == 403 and "access-control-allow-origin" not in stranger.headers


async def test_every_response_carries_the_security_headers_and_the_page_no_inline_script(site: Site) -> None:
    answers = [await site.call("GET", "/inbox", token=None), await site.call("GET", "/inbox/static/inbox.js", token=None),
               await site.call("GET", "/inbox/static/inbox.css", token=None), await site.call("GET", "/inbox/api/items", token=None),
               await site.call("GET", "/inbox/api/items", headers={"Host": "evil.example"}),
               await site.call("GET", "/nowhere"), await site.call("GET", "/"),
               await site.call("POST", "/agui/read-token", json={})]
    assert [a.status_code for a in answers] == [200, 200, 200, 401, 403, 404, 200, 200]
    for answer in answers:
        csp = answer.headers["content-security-policy"]
        assert "frame-ancestors 'none'" in csp and "script-src 'self'" in csp and "unsafe-inline" not in csp
        assert answer.headers["x-content-type-options"] == "nosniff"
        assert answer.headers["referrer-policy"] == "no-referrer"
    assert "javascript" in answers[1].headers["content-type"] and "text/css" in answers[2].headers["content-type"]
    tree = answers[0].text
    assert "<style" not in tree and not re.search(r"<[^>]*\son[a-z]+\s*=", tree)  # no inline style, no handlers
    scripts = [s.split(">", 1)[0] for s in tree.split("<script")[1:]]
    assert scripts == [' src="/inbox/static/inbox.js"']  # one script, from a file


async def test_bodies_and_id_lists_are_bounded(site: Site) -> None:
    rules = await site.rules()
    big = {"effect": "allow", "tool": "*", "reason": "x" * LIMIT}
    refused(await site.call("POST", "/inbox/api/rules", json=big), 413, f"more than {LIMIT}", "REIN_WEB_MAX_BODY")

    async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: counted as it comes
        yield b'{"effect": "allow", "tool": "*", "reason": "'
        for _ in range(LIMIT // 1024 + 1):
            yield b"y" * 1024
        yield b'"}'

    refused(await site.call("POST", "/inbox/api/rules", content=chunks(), headers={"Content-Type": "application/json"}),
            413, f"more than {LIMIT}")
    run_id = await waiting(site.runs, AGENT, "delete /srv/many")
    many = [{"run_id": run_id, **await shown(site.runs, run_id)}] + [
        {"run_id": f"run-{n}", "wait": "1-00000000", "tool_call_ids": ["call_0"]} for n in range(MAX_BULK_IDS)]
    refused(await site.call("POST", "/inbox/api/bulk", json={"items": many, "action": "approve"}), 422,
            f"{MAX_BULK_IDS + 1} run ids", f"at most {MAX_BULK_IDS}")
    assert await site.rules() == rules
    assert (await site.runs.status(run_id)).status == "waiting_approval"
    fine = await site.call("POST", "/inbox/api/bulk", json={"items": many[:MAX_BULK_IDS], "action": "deny"})
    assert [o["outcome"] for o in fine.json() if o["run_id"] == run_id] == ["applied"]
    assert {(o["outcome"], o["detail"], o["item"]) for o in fine.json() if o["run_id"] != run_id} == {
        ("refused", "not waiting for approval (or not yours)", None)}


async def test_a_decision_for_an_unknown_run_is_404(site: Site) -> None:
    card = {"wait": "1-00000000", "tool_call_ids": ["call_0"]}
    for body in ({"run_id": f"no-such-run-{SUFFIX}", "action": "approve", **card},
                 {"run_id": f"no-such-run-{SUFFIX}", "action": "deny", "reason": "x", **card}):
        refused(await site.call("POST", "/inbox/api/decide", json=body), 404, "no such run")


def test_every_web_surface_is_built_through_the_guard() -> None:
    """rein/web builds a Starlette app only in guard.surface: a new surface cannot leave the guard out."""
    for path in sorted((ROOT / "rein" / "web").glob("*.py")):
        calls = [node for node in ast.walk(ast.parse(path.read_text())) if isinstance(node, ast.Call)
                 and getattr(node.func, "id", getattr(node.func, "attr", None)) == "Starlette"]
        assert not calls or path.name == "guard.py", f"{path.name} builds a Starlette app itself: use guard.surface"


async def test_the_agui_endpoint_mounted_elsewhere_is_guarded_too(dev) -> None:  # noqa: ANN001
    from starlette.applications import Starlette
    from starlette.routing import Mount

    endpoint = agui.app(dev.client, agents=["nobody"], task_queue=QUEUE, auth=BearerAuth(token=OPERATOR))
    theirs = Starlette(routes=[Mount("/chat", app=endpoint)])  # a user's own app, unguarded itself
    async with served(theirs) as url, httpx.AsyncClient(timeout=30) as http:
        bearer = {"Authorization": f"Bearer {OPERATOR}"}
        body = json.dumps({"threadId": f"m-{SUFFIX}", "runId": "r", "messages": [{"id": "m", "role": "user", "content": "hi"}]})
        answer = await http.post(f"{url}/chat/nobody", content=body, headers={**bearer, "Content-Type": "text/plain"})
        refused(answer, 415, "application/json")
        answer = await http.post(f"{url}/chat/nobody", content=body, headers={
            **bearer, "Content-Type": "application/json", "Origin": "http://evil.example"})
        refused(answer, 403, "another origin")
        answer = await http.get(f"{url}/chat/nobody/m-{SUFFIX}", headers={**bearer, "Host": "evil.example"})
        refused(answer, 403, "host")
        assert answer.headers["x-content-type-options"] == "nosniff"
