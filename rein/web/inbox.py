"""The inbox on the web (`rein serve`, /inbox): the page, its JSON API and its live list (server-sent events).

One poller reads visibility (ReinClient.inbox) once per interval while anyone watches and fans each change out to
every browser; each sees its own tenant's items only. Decisions go through the runs' validated updates with the
approver and the tenant the sign-in verified: a run of another tenant refuses them itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from temporalio.service import RPCError, RPCStatusCode

from rein.core.contract import SEARCH_KEYS
from rein.core.durations import parse_duration
from rein.core.inbox import InboxItem, cut
from rein.core.policy import PolicyError, parse_args
from rein.durable.inbox import InboxError
from rein.ops.ui_links import run_url
from rein.temporal import history
from rein.web.auth import Viewer, WebAuth, until_expired
from rein.web.guard import OPEN_NOTICE
from rein.web.inbox_page import STATIC, page

if TYPE_CHECKING:
    from rein.client import ReinClient

KEEP_ALIVE_S = 15.0
TURNS = 6
"""The conversation's last messages an item shows."""
MAX_BULK_IDS = 500
"""The most run ids one bulk decision names (more: 422)."""
PAGES = ("/", "/inbox")
"""What a link from elsewhere may open (rein.web.guard: a cross-site navigation GET)."""
EXPIRED = 'event: expired\ndata: {"error": "your sign-in expired: sign in again"}\n\n'


class Poller:
    """One reader of visibility for every browser: polls while someone listens, publishes each change."""

    def __init__(self, client: ReinClient, every_s: float):
        self.client, self.every_s = client, every_s
        self.items: list[InboxItem] | None = None
        self.version = 0
        self.changed = asyncio.Condition()
        self.listeners = 0
        self.kicked = asyncio.Event()
        self.task: asyncio.Task[None] | None = None

    def kick(self) -> None:
        """Poll now (a decision was just made)."""
        self.kicked.set()

    async def _run(self) -> None:
        last = None
        while self.listeners > 0:
            try:
                items = await self.client.inbox()
                snapshot = json.dumps([i.model_dump(mode="json") for i in items], sort_keys=True)
                if snapshot != last:
                    last, self.items = snapshot, items
                    async with self.changed:
                        self.version += 1
                        self.changed.notify_all()
            except Exception:  # the server restarting: try again next round
                pass
            self.kicked.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.kicked.wait(), self.every_s)
        self.task = None

    async def watch(self) -> AsyncIterator[list[InboxItem] | None]:
        """Each new list (the current one first) for as long as the caller reads; None now and then when nothing
        changed (a keep-alive)."""
        self.listeners += 1
        if self.task is None:
            self.task = asyncio.ensure_future(self._run())
        seen = 0  # version 0: nothing read yet

        def news() -> bool:
            return self.version != seen

        try:
            while True:
                async with self.changed:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self.changed.wait_for(news), KEEP_ALIVE_S)
                if self.version != seen and self.items is not None:
                    seen = self.version
                    yield self.items
                else:
                    yield None
        finally:
            self.listeners -= 1

    async def close(self) -> None:
        self.listeners = 0
        self.kick()
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(BaseException):
                await self.task


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


class Inbox:
    """The routes of /inbox, on a ReinClient."""

    def __init__(self, client: ReinClient, auth: WebAuth, *, ui_url: str | None = None, poll_s: float = 1.0):
        self.client, self.auth, self.ui_url = client, auth, ui_url
        self.poller = Poller(client, poll_s)

    def routes(self) -> list[BaseRoute]:
        return [
            Route("/", lambda _: Response(status_code=307, headers={"Location": "/inbox"})),
            Route("/inbox", self.page),
            Mount("/inbox/static", StaticFiles(packages=[("rein.web", STATIC)])),
            Route("/inbox/api/me", self.api(self.me)),
            Route("/inbox/api/read-token", self.api(self.read_token), methods=["POST"]),
            Route("/inbox/api/items", self.api(self.items)),
            Route("/inbox/api/events", self.events),
            Route("/inbox/api/runs/{run_id:path}/turns", self.api(self.turns)),
            Route("/inbox/api/decide", self.api(self.decide), methods=["POST"]),
            Route("/inbox/api/bulk", self.api(self.bulk), methods=["POST"]),
            Route("/inbox/api/rules", self.api(self.rules), methods=["GET", "POST"]),
            Route("/inbox/api/rules/{rule_id}", self.api(self.remove_rule), methods=["DELETE"]),
        ]

    async def close(self) -> None:
        await self.poller.close()

    async def page(self, _: Request) -> Response:
        notice = f"OPEN: {OPEN_NOTICE}; anyone on this machine decides here" if self.auth.open else None
        return HTMLResponse(page(notice), headers={"Cache-Control": "no-store"})

    def api(self, handler: Any) -> Any:
        """`handler(request, viewer)` as an endpoint: signed in, JSON out, every mistake one line."""
        async def endpoint(request: Request) -> Response:
            try:
                viewer = await self.auth.viewer(request)
                return JSONResponse(await handler(request, viewer))
            except HTTPException as exc:
                return _error(exc.status_code, str(exc.detail))
            except (InboxError, PolicyError, ValueError) as exc:
                return _error(400, " ".join(str(exc).split())[:500])
            except RPCError as exc:
                if exc.status == RPCStatusCode.NOT_FOUND:
                    return _error(404, f"no such run ({exc.message})")
                return _error(502, f"Temporal said: {exc.message}")
        return endpoint

    # ------------------------------------------------------------------ reading

    def item_json(self, item: InboxItem) -> dict[str, Any]:
        data = item.model_dump(mode="json")
        data["call_line"] = item.call_line()
        data["ui"] = run_url(self.ui_url, item.run_id, self.client.client.namespace) if self.ui_url else ""
        return data

    async def me(self, _: Request, viewer: Viewer) -> dict[str, Any]:
        return {"subject": viewer.subject, "tenant": viewer.tenant, "open": self.auth.open, "signin": self.auth.mode,
                "expires": viewer.expires, "ui": self.ui_url or "", "namespace": self.client.client.namespace}

    async def read_token(self, _: Request, viewer: Viewer) -> dict[str, Any]:
        """A short-lived token for reads only (`?read_token=`), for an EventSource (it cannot send headers)."""
        return self.auth.mint_read(viewer)

    async def items(self, request: Request, viewer: Viewer) -> list[dict[str, Any]]:
        q = request.query_params
        tenant = self._tenant(viewer, q.get("tenant") or None)
        older = parse_duration(q["older_than"]) if q.get("older_than") else None
        items = await self.client.inbox(agent=q.get("agent") or None, tenant=tenant, tool=q.get("tool") or None,
                                        older_than=older)
        return [self.item_json(i) for i in items]

    def _tenant(self, viewer: Viewer, asked: str | None) -> str | None:
        if viewer.tenant is not None and asked not in (None, viewer.tenant):
            raise HTTPException(403, f"you decide for tenant {viewer.tenant!r} only")
        return viewer.tenant or asked

    async def events(self, request: Request) -> Response:
        """Server-sent events: `items` with the viewer's whole list whenever it changes (a comment keeps it open);
        `expired` and the end when the viewer's sign-in expires."""
        try:
            viewer = await self.auth.viewer(request)
        except HTTPException as exc:
            return _error(exc.status_code, str(exc.detail))

        async def stream() -> AsyncIterator[str]:
            async for items in self.poller.watch():
                if items is None:
                    yield ": still here\n\n"
                    continue
                mine = [self.item_json(i) for i in items if viewer.allows(i.tenant)]
                yield f"event: items\ndata: {json.dumps(mine)}\n\n"

        return StreamingResponse(until_expired(viewer, stream(), EXPIRED), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-store"})

    async def _run_tenant(self, run_id: str, viewer: Viewer) -> tuple[str, str | None]:
        """(agent, tenant) of the run; 404 for a run the viewer may not see."""
        description = await self.client.handle(run_id).describe()
        attributes = description.typed_search_attributes
        tenant = attributes.get(SEARCH_KEYS["ReinTenant"]) or None
        if not viewer.allows(tenant):
            raise HTTPException(404, f"no run {run_id!r} of tenant {viewer.tenant!r}")
        return attributes.get(SEARCH_KEYS["ReinAgent"]) or "", tenant

    async def turns(self, request: Request, viewer: Viewer) -> list[dict[str, Any]]:
        run_id = request.path_params["run_id"]
        await self._run_tenant(run_id, viewer)
        session = await history.query(self.client.client, run_id, "session")
        out = []
        for m in [m for m in session.get("messages", []) if m.get("role") != "system"][-TURNS:]:
            calls = "; ".join(f"{c.get('name')}({cut(json.dumps(c.get('arguments'), ensure_ascii=False), 120)})"
                              for c in m.get("tool_calls") or [])
            out.append({"role": m.get("role"), "text": cut(m.get("content") or "", 600), "calls": calls})
        return out

    # ------------------------------------------------------------------ deciding

    async def _body(self, request: Request) -> dict[str, Any]:
        try:
            body = await request.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise ValueError("the request body is not JSON") from None
        if not isinstance(body, dict):
            raise ValueError("the request body must be a JSON object")
        return body

    async def decide(self, request: Request, viewer: Viewer) -> dict[str, Any]:
        """{run_id, action: approve|deny|answer|retry, tool_call_id?, text?, reason?, remember?: always|run|thread,
        tool?}: one decision; `remember` (with approve) also adds the rule, which decides the other calls it covers."""
        body = await self._body(request)
        run_id, action = str(body.get("run_id") or ""), body.get("action")
        if not run_id or action not in ("approve", "deny", "answer", "retry"):
            raise ValueError("give run_id and an action: approve, deny, answer or retry")
        remember = body.get("remember")
        if remember not in (None, "", "always", "run", "thread") or (remember and action != "approve"):
            raise ValueError("remember is always, run or thread, with approve")
        agent, tenant = await self._run_tenant(run_id, viewer)  # an unknown run (or another tenant's): 404
        outcome = await self.client.decide_item(run_id, action, tool_call_id=body.get("tool_call_id") or None,
                                                text=str(body.get("text") or ""), reason=str(body.get("reason") or ""),
                                                approver=viewer.subject, tenant=viewer.tenant)
        result: dict[str, Any] = outcome.to_json()
        if remember and outcome.outcome == "applied":
            tool = str(body.get("tool") or "")
            change = await self.client.policy.add(
                "allow", tool, agent=agent or None, tenant=tenant, scope=remember,
                run=run_id if remember == "run" else None, thread=run_id if remember == "thread" else None,
                by=viewer.subject, reason="approved and remembered in the inbox", scope_tenant=viewer.tenant)
            result["rule"] = change.rule.model_dump(mode="json")
            result["also"] = [o.to_json() for o in change.decided]
        self.poller.kick()
        return result

    async def bulk(self, request: Request, viewer: Viewer) -> list[dict[str, Any]]:
        """{run_ids: [...], action: approve|deny, reason?}: each listed approval decided (scoped to the viewer)."""
        body = await self._body(request)
        ids, action = body.get("run_ids"), body.get("action")
        if action not in ("approve", "deny") or not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
            raise ValueError("give run_ids (a list) and an action: approve or deny")
        if len(ids) > MAX_BULK_IDS:
            raise HTTPException(422, f"{len(ids)} run ids given, at most {MAX_BULK_IDS} in one bulk decision")
        listed = {i.run_id: i for i in await self.client.inbox(tenant=viewer.tenant, kind="approval")}
        missing = [i for i in ids if i not in listed]
        outcomes = await self.client.decide_inbox(action, [listed[i] for i in ids if i in listed],
                                                  reason=str(body.get("reason") or ""), approver=viewer.subject,
                                                  tenant=viewer.tenant)
        self.poller.kick()
        return [o.to_json() for o in outcomes] + [
            {"run_id": i, "outcome": "refused", "detail": "not waiting for approval (or not yours)", "decided": []}
            for i in missing]

    async def rules(self, request: Request, viewer: Viewer) -> Any:
        if request.method == "GET":
            return [r.model_dump(mode="json") | {"line": r.line()} for r in await self.client.policy.list(tenant=viewer.tenant)]
        body = await self._body(request)
        raw = body.get("args") or {}
        args = parse_args(raw.split()) if isinstance(raw, str) else raw
        change = await self.client.policy.add(
            str(body.get("effect") or ""), str(body.get("tool") or ""), agent=body.get("agent") or None,
            tenant=body.get("tenant") or viewer.tenant, args=args, scope=str(body.get("scope") or "always"),
            run=body.get("run") or None, thread=body.get("thread") or None, by=viewer.subject,
            reason=str(body.get("reason") or ""), scope_tenant=viewer.tenant)
        self.poller.kick()
        return {"rule": change.rule.model_dump(mode="json"), "version": change.version,
                "decided": [o.to_json() for o in change.decided]}

    async def remove_rule(self, request: Request, viewer: Viewer) -> Any:
        change = await self.client.policy.remove(request.path_params["rule_id"], scope_tenant=viewer.tenant)
        return {"rule": change.rule.model_dump(mode="json"), "version": change.version}
