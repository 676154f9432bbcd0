"""Sign-in on rein's web surfaces, over real HTTP: never open by default (the local token under REIN_HOME), who
decided is who signed in (never a name from the body, never a process id), read tokens for an EventSource, live
streams that end when the sign-in expires, the open mode (loopback only, said on every page), and `rein serve` /
`rein inbox link` from the command line. One dev server and worker for the module; each app in this process under
uvicorn, built with the environment it is about.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio

import rein
from rein.client import ReinClient
from rein.temporal.bearer import BearerAuth
from rein.web.app import build
from rein.web.auth import WebAuth
from rein.web.tokens import TOKEN_FILE
from tests.support.inbox import AUDIENCE, IdentityProvider, files_agent, waiting
from tests.support.processes import stop_process
from tests.support.waiting import poll
from tests.support.web import environment, served, sse_blocks, start_rein_serve
from tests.support.wipe import shown

pytestmark = pytest.mark.timeout(180)
SUFFIX = uuid.uuid4().hex[:6]
QUEUE = f"web-signin-{SUFFIX}"
AGENT = f"signin-files-{SUFFIX}"
ROOT = Path(__file__).resolve().parent.parent
REIN_BIN = str(Path(sys.executable).parent / "rein")
ME = "alice@laptop"


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def runs(dev) -> AsyncIterator[ReinClient]:  # noqa: ANN001
    async with rein.create_worker(dev.client, agents=[files_agent(AGENT)], task_queue=QUEUE):
        yield ReinClient(dev.client, QUEUE)


@pytest.fixture(scope="module")
def idp() -> Any:
    provider = IdentityProvider()
    yield provider
    provider.close()


def app(runs: ReinClient, auth: BearerAuth | None = None, **env: str | None) -> Any:
    with environment(**{"REIN_WEB_OPEN": None, "REIN_IDENTITY": ME, **env}):
        return build(runs.client, [files_agent(AGENT)], task_queue=QUEUE, auth=auth, poll_s=0.2)


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def approvers(runs: ReinClient, run_id: str) -> list[str]:
    return [d.approver for d in (await runs.session(run_id)).decisions]


async def test_with_no_sign_in_set_the_local_token_signs_in_as_the_local_person(runs: ReinClient, tmp_path: Path) -> None:
    web = app(runs, BearerAuth(), REIN_HOME=str(tmp_path))
    token = web.state.auth.local
    path = tmp_path / TOKEN_FILE
    assert token and path.read_text().strip() == token and stat.S_IMODE(path.stat().st_mode) == 0o600
    assert app(runs, BearerAuth(), REIN_HOME=str(tmp_path)).state.auth.local == token  # kept: reused on every start
    run_id = await waiting(runs, AGENT, "delete /srv/laptop")
    async with served(web) as url, httpx.AsyncClient(timeout=30) as http:
        assert (await http.get(f"{url}/inbox/api/items")).status_code == 401  # never open by default
        assert (await http.get(f"{url}/inbox/api/items", headers=bearer("guess"))).status_code == 401
        me = (await http.get(f"{url}/inbox/api/me", headers=bearer(token))).json()
        assert (me["subject"], me["signin"], me["open"]) == (ME, "local", False)
        forged = {"run_id": run_id, "action": "approve", "approver": "mallory", "by": "rule r1", "via": "rule",
                  **await shown(runs, run_id)}
        decided = (await http.post(f"{url}/inbox/api/decide", json=forged, headers=bearer(token))).json()
        assert decided["outcome"] == "applied", decided
    assert await approvers(runs, run_id) == [ME]  # who signed in; the body's approver is never trusted


async def test_the_shared_token_decides_as_its_configured_name_and_a_jwt_as_its_subject(runs: ReinClient, idp: Any) -> None:
    web = app(runs, BearerAuth(token="s3cret", jwks_url=idp.url, audience=AUDIENCE), REIN_WEB_TOKEN_NAME="ops-team")
    first, second = await waiting(runs, AGENT, "delete /srv/a"), await waiting(runs, AGENT, "delete /srv/b")
    async with served(web) as url, httpx.AsyncClient(timeout=30) as http:
        one = await http.post(f"{url}/inbox/api/decide", json={"run_id": first, "action": "approve", **await shown(runs, first)},
                              headers=bearer("s3cret"))
        jwt = idp.token(sub="bob@example.com", tenant="*")
        two = await http.post(f"{url}/inbox/api/decide", json={"run_id": second, "action": "deny", "approver": "x",
                                                                **await shown(runs, second)},
                              headers=bearer(jwt))
        assert one.json()["outcome"] == two.json()["outcome"] == "applied", (one.text, two.text)
    assert await approvers(runs, first) == ["ops-team"]
    assert await approvers(runs, second) == ["bob@example.com"]


async def test_a_decision_through_agui_records_who_signed_in(runs: ReinClient, tmp_path: Path) -> None:
    web = app(runs, BearerAuth(), REIN_HOME=str(tmp_path))
    token, thread_id = web.state.auth.local, f"ui-{SUFFIX}"
    async with served(web) as url, httpx.AsyncClient(timeout=60) as http:
        asked = await _run(http, f"{url}/agui/{AGENT}", token, {"threadId": thread_id, "runId": "r1", "messages": [
            {"id": "m1", "role": "user", "content": "delete /srv/agui"}]})
        [interrupt] = asked[-1]["outcome"]["interrupts"]
        done = await _run(http, f"{url}/agui/{AGENT}", token, {"threadId": thread_id, "runId": "r2", "messages": [],
                                                              "resume": [{"interruptId": interrupt["id"], "status": "resolved",
                                                                          "payload": {"approve": True}}]})
        assert done[-1]["type"] == "RUN_FINISHED", done[-1]
    assert await approvers(runs, thread_id) == [ME]  # not the server's process id


async def _run(http: httpx.AsyncClient, url: str, token: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    full = {"state": None, "tools": [], "context": [], "forwardedProps": {}, **body}
    status, blocks = await sse_blocks(http, url, bearer(token), until=('"RUN_FINISHED"', '"RUN_ERROR"'), body=full)
    assert status == 200, blocks
    return [json.loads(b.split("data: ", 1)[1]) for b in blocks if "data: " in b]


async def test_an_expired_jwt_ends_the_live_streams(runs: ReinClient, idp: Any) -> None:
    web = app(runs, BearerAuth(jwks_url=idp.url, audience=AUDIENCE))
    long, thread_id = idp.token(tenant="*"), f"ex-{SUFFIX}"
    async with served(web) as url, httpx.AsyncClient(timeout=60) as http:
        await _run(http, f"{url}/agui/{AGENT}", long, {"threadId": thread_id, "runId": "r1", "messages": [
            {"id": "m1", "role": "user", "content": "read /srv/expiring"}]})
        short = idp.token(tenant="*", exp=int(time.time()) + 6)
        status, blocks = await sse_blocks(http, f"{url}/inbox/api/events", bearer(short))
        assert status == 200 and any(b.startswith("event: items") for b in blocks)
        assert blocks[-1].startswith("event: expired") and "sign in again" in blocks[-1]  # then the stream ended
        short = idp.token(tenant="*", exp=int(time.time()) + 6)
        status, blocks = await sse_blocks(http, f"{url}/agui/{AGENT}/{thread_id}", bearer(short))
        assert status == 200 and '"code":"SignInExpired"' in blocks[-1].replace(" ", ""), blocks[-3:]
        await poll(lambda: time.time() > json.loads(_payload(short))["exp"], "the token to expire", 30, 0.2)
        status, _ = await sse_blocks(http, f"{url}/inbox/api/events", bearer(short))
        assert status == 401  # and it opens no new one
    await runs.cancel(thread_id)


def _payload(token: str) -> str:
    import base64

    part = token.split(".")[1]
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)).decode()


async def test_a_read_token_reads_only_and_ends_its_stream_when_it_expires(runs: ReinClient, idp: Any) -> None:
    web = app(runs, BearerAuth(jwks_url=idp.url, audience=AUDIENCE), REIN_WEB_READ_TOKEN_S="5")
    jwt = idp.token(sub="carol@acme", tenant="acme")
    async with served(web) as url, httpx.AsyncClient(timeout=60) as http:
        assert (await http.post(f"{url}/inbox/api/read-token", json={})).status_code == 401  # minted signed in only
        minted = (await http.post(f"{url}/inbox/api/read-token", json={}, headers=bearer(jwt))).json()
        read = minted["read_token"]
        assert minted["param"] == "read_token" and 0 < minted["expires_in"] <= 5
        me = (await http.get(f"{url}/inbox/api/me?read_token={read}")).json()
        assert (me["subject"], me["tenant"]) == ("carol@acme", "acme")  # the minter's identity and scope
        write = await http.post(f"{url}/inbox/api/rules?read_token={read}", json={"effect": "allow", "tool": "*"})
        assert write.status_code == 401  # reads only
        tampered = read[:-2] + ("AA" if not read.endswith("AA") else "BB")
        assert (await http.get(f"{url}/inbox/api/items?read_token={tampered}")).status_code == 401
        status, blocks = await sse_blocks(http, f"{url}/inbox/api/events?read_token={read}")
        assert status == 200 and blocks[-1].startswith("event: expired")
        assert (await http.get(f"{url}/inbox/api/items?read_token={read}")).status_code == 401  # expired now
        agui_read = (await http.post(f"{url}/agui/read-token", json={}, headers=bearer(jwt))).json()["read_token"]
        keyed = app(runs, BearerAuth(jwks_url=idp.url, audience=AUDIENCE), REIN_WEB_READ_KEY="k" * 40)
        async with served(keyed) as elsewhere:  # a server with a key of its own: not this one's tokens
            refused = await http.get(f"{elsewhere}/inbox/api/me?read_token={agui_read}")
            assert refused.status_code == 401 and "REIN_WEB_READ_KEY" in refused.json()["error"]
        assert (await http.get(f"{url}/inbox/api/me?read_token={agui_read}")).status_code == 200


async def test_open_mode_is_for_this_machine_only_and_says_so(runs: ReinClient) -> None:
    web = app(runs, BearerAuth(), REIN_WEB_OPEN="1", REIN_WEB_PUBLIC_HOST="rein.example")
    assert web.state.auth.mode == "open"
    run_id = await waiting(runs, AGENT, "delete /srv/open")
    async with served(web) as url, httpx.AsyncClient(timeout=30) as http:
        page = await http.get(f"{url}/inbox")
        assert '<div id="open" role="alert">OPEN' in page.text and page.headers["x-rein-open"]
        assert (await http.get(f"{url}/")).json()["open"]
        items = await http.get(f"{url}/inbox/api/items")
        assert items.status_code == 200 and run_id in items.text and items.headers["x-rein-open"]
        proxied = await http.get(f"{url}/inbox/api/items", headers={"X-Forwarded-For": "203.0.113.9"})
        assert proxied.status_code == 403 and "loopback" in proxied.json()["error"]  # a proxy forwarding a stranger
        public = await http.get(f"{url}/inbox/api/items", headers={"Host": "rein.example"})
        assert public.status_code == 403 and run_id not in public.text
        decided = await http.post(f"{url}/inbox/api/decide", json={"run_id": run_id, "action": "deny", "approver": "x",
                                                                    **await shown(runs, run_id)})
        assert decided.json()["outcome"] == "applied"
    assert await approvers(runs, run_id) == [ME]
    with pytest.raises(ValueError, match="pick one"), environment(REIN_WEB_OPEN="1"):
        WebAuth(BearerAuth(token="s3cret"))


def rein_cli(*argv: str, home: Path, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("REIN_CODEC", "REIN_WEB"))}
    return subprocess.run([REIN_BIN, *argv], env={**base, "REIN_HOME": str(home), **env}, cwd=str(ROOT), text=True,
                          capture_output=True, timeout=120, stdin=subprocess.DEVNULL)


def one_line(result: subprocess.CompletedProcess[str], code: int, *words: str) -> None:
    assert result.returncode == code and result.stdout == "" and "Traceback" not in result.stderr, result
    [line] = result.stderr.splitlines()
    assert all(w in line for w in words), line


def test_open_mode_off_loopback_and_open_with_a_sign_in_are_refused_in_one_line(tmp_path: Path) -> None:
    one_line(rein_cli("serve", "--open", "--host", "0.0.0.0", "--port", "1", home=tmp_path), 2, "loopback only", "0.0.0.0")
    one_line(rein_cli("serve", "--host", "192.0.2.10", "--port", "1", home=tmp_path, REIN_WEB_OPEN="1"), 2, "loopback only")
    one_line(rein_cli("serve", "--open", "--port", "1", home=tmp_path, REIN_CODEC_TOKEN="s3cret"), 2, "pick one")
    assert not (tmp_path / TOKEN_FILE).exists()


def test_rein_inbox_link_shows_the_sign_in_link_again(tmp_path: Path) -> None:
    first = rein_cli("inbox", "link", home=tmp_path)
    assert first.returncode == 0, first.stderr
    token = (tmp_path / TOKEN_FILE).read_text().strip()
    assert first.stdout == f"http://127.0.0.1:8000/inbox#token={token}\n"
    assert stat.S_IMODE((tmp_path / TOKEN_FILE).stat().st_mode) == 0o600
    (tmp_path / "web-serve.json").write_text(json.dumps({"url": "http://127.0.0.1:8123"}))  # what `rein serve` records
    assert rein_cli("inbox", "link", home=tmp_path).stdout == f"http://127.0.0.1:8123/inbox#token={token}\n"
    assert rein_cli("inbox", "link", "--url", "http://[::1]:9000", home=tmp_path).stdout.startswith("http://[::1]:9000/inbox#")
    one_line(rein_cli("inbox", "link", home=tmp_path, REIN_CODEC_TOKEN="s3cret"), 2, "sign-in is configured")


async def test_a_read_token_is_good_on_every_server_that_shares_the_key(runs: ReinClient, tmp_path: Path) -> None:
    """`rein serve` processes behind one address: a page mints its read token on one and opens its stream on
    another. Servers of one REIN_HOME share its key; servers of other homes share REIN_WEB_READ_KEY; any other
    server refuses the token."""
    address, key = runs.client.service_client.config.target_host, "shared-read-key-" + "x" * 24
    homes = {"one": {}, "two": {}, "three": {"REIN_WEB_READ_KEY": key}, "four": {"REIN_WEB_READ_KEY": key}}
    started = {name: start_rein_serve(tmp_path / f"{name}.log", address, QUEUE,
                                      REIN_HOME=str(tmp_path / ("one" if name == "two" else name)), **env)
               for name, env in homes.items()}
    urls = {name: url for name, (_, url) in started.items()}
    try:
        async with httpx.AsyncClient(timeout=30) as http:
            async def mint(name: str) -> str:
                local = (tmp_path / name / TOKEN_FILE).read_text().strip()
                return (await http.post(f"{urls[name]}/inbox/api/read-token", json={}, headers=bearer(local))).json()["read_token"]

            async def reads(name: str, token: str) -> int:
                return (await http.get(f"{urls[name]}/inbox/api/me?read_token={token}")).status_code

            one, three = await mint("one"), await mint("three")
            assert [await reads(name, one) for name in ("one", "two", "three")] == [200, 200, 401]
            assert [await reads(name, three) for name in ("four", "one")] == [200, 401]
    finally:
        for process, _ in started.values():
            stop_process(process)
