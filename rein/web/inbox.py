"""The inbox on the web (`rein serve`, /inbox): the page, its JSON API and its live list (server-sent events).

One poller reads visibility (ReinClient.inbox) once per interval while anyone watches and fans each change out to
every browser; each sees its own tenant's items only. Decisions go through the runs' validated updates with the
approver and the tenant the sign-in verified: a run of another tenant refuses them itself. Each names what its card
showed (the wait and the call ids): a run that waits on something else by then refuses it, and the card shows that.
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

from rein.core.contract import MAX_ID, MAX_NAMED_CALLS, SEARCH_KEYS
from rein.core.durations import parse_duration
from rein.core.inbox import InboxItem, cut
from rein.core.policy import PolicyError, parse_args
from rein.durable.inbox import BULK_CONCURRENCY, InboxError
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
        else:
            self.kick()  # a page that opens (or reloads) gets the list as it is now, not the last poll's
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


def shown(body: dict[str, Any], action: str) -> tuple[str, list[str]]:
    """The wait and the calls a card showed, which its decision names (call ids alone repeat across turns): a
    decision from the web that names neither is what approved calls nobody saw, so it is refused (422)."""
    wait, ids = body.get("wait"), body.get("tool_call_ids")
    if not isinstance(wait, str) or not wait or len(wait) > MAX_ID:
        raise HTTPException(422, f"name the wait the card showed (wait): a decision from the page decides what it "
                                 f"showed, nothing else (an earlier build's run without a wait id: rein {action} RUN)")
    if not isinstance(ids, list) or not all(isinstance(i, str) and 0 < len(i) <= MAX_ID for i in ids) \
            or len(ids) > MAX_NAMED_CALLS or (action in ("approve", "deny") and not ids):
        raise HTTPException(422, f"name the calls the card showed (tool_call_ids: a list of call ids, at most "
                                 f"{MAX_NAMED_CALLS}{'; at least one to ' + action if action in ('approve', 'deny') else ''})")
    return wait, list(ids)


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
        """{run_id, action: approve|deny|answer|retry, wait, tool_call_ids, text?, reason?, remember?:
        always|run|thread, tool?}: one decision on what the card showed (`wait`, `tool_call_ids`: required, 422);
        `remember` (with approve) also adds the rule, which decides the other calls it covers. A refusal carries
        the run as it waits now (`item`; null: it waits for nobody), so the card shows that instead."""
        body = await self._body(request)
        run_id, action = str(body.get("run_id") or ""), body.get("action")
        if not run_id or action not in ("approve", "deny", "answer", "retry"):
            raise ValueError("give run_id and an action: approve, deny, answer or retry")
        wait, ids = shown(body, action)
        remember = body.get("remember")
        if remember not in (None, "", "always", "run", "thread") or (remember and action != "approve"):
            raise ValueError("remember is always, run or thread, with approve")
        agent, tenant = await self._run_tenant(run_id, viewer)  # an unknown run (or another tenant's): 404
        outcome = await self.client.decide_item(run_id, action, tool_call_ids=ids, wait=wait,
                                                text=str(body.get("text") or ""), reason=str(body.get("reason") or ""),
                                                approver=viewer.subject, tenant=viewer.tenant)
        result: dict[str, Any] = outcome.to_json()
        if outcome.outcome == "refused":
            result["item"] = await self._now(run_id, viewer)
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

    async def _now(self, run_id: str, viewer: Viewer) -> dict[str, Any] | None:
        """The run's card as it waits now (read from the run itself), or None: it waits for nobody, or not for
        this viewer."""
        try:
            item = await self.client.inbox_item(run_id)
        except RPCError:
            return None
        return self.item_json(item) if item is not None and viewer.allows(item.tenant) else None

    async def bulk(self, request: Request, viewer: Viewer) -> list[dict[str, Any]]:
        """{items: [{run_id, wait, tool_call_ids}], action: approve|deny, reason?}: each card's decision on what it
        showed (scoped to the viewer); per run applied, refused (with `item`, the run as it waits now) or queued."""
        body = await self._body(request)
        cards, action = body.get("items"), body.get("action")
        if action not in ("approve", "deny"):
            raise ValueError("give items (the cards) and an action: approve or deny")
        if not isinstance(cards, list):
            raise HTTPException(422, "name what each card showed: items: [{run_id, wait, tool_call_ids}] "
                                     "(a list of run ids alone decides nothing)")
        if len(cards) > MAX_BULK_IDS:
            raise HTTPException(422, f"{len(cards)} run ids given, at most {MAX_BULK_IDS} in one bulk decision")
        named: dict[str, tuple[str, list[str]]] = {}
        for card in cards:
            run_id = card.get("run_id") if isinstance(card, dict) else None
            if not isinstance(run_id, str) or not run_id:
                raise HTTPException(422, "each of items is {run_id, wait, tool_call_ids}")
            named.setdefault(run_id, shown(card, action))
        gate = asyncio.Semaphore(BULK_CONCURRENCY)

        async def one(run_id: str, wait: str, ids: list[str]) -> dict[str, Any]:
            async with gate:
                outcome = (await self.client.decide_item(run_id, action, tool_call_ids=ids, wait=wait,
                                                         reason=str(body.get("reason") or ""),
                                                         approver=viewer.subject, tenant=viewer.tenant)).to_json()
                if outcome["outcome"] == "refused":
                    outcome["item"] = await self._now(run_id, viewer)
                    if outcome["item"] is None:  # ended, unknown, or another tenant's: nothing more is said
                        outcome["detail"] = "not waiting for approval (or not yours)"
            return outcome

        outcomes = await asyncio.gather(*(one(run_id, *card) for run_id, card in named.items()))
        self.poller.kick()
        return list(outcomes)

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
