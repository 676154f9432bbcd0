"""What every web surface of rein goes through: one ASGI middleware (`Guard`), and `surface()`, the one way rein
builds a web app (`rein serve`'s, `rein.web.agui.app` mounted in someone else's app, any later one), so the next
surface cannot forget it (tests/test_web_guard.py checks that rein/web builds no Starlette app another way).

Refused before the app sees anything, each in one line of JSON (`{"error": ...}`), changing nothing:
- a Host the surface does not serve (403): loopback names (localhost, 127.0.0.1, [::1], any port) and
  REIN_WEB_PUBLIC_HOST; a DNS-rebound name gets nothing;
- an `Origin` that is neither the request's own (http or https://Host) nor one of REIN_WEB_ORIGINS (403); those
  are answered with CORS (preflight included);
- `Sec-Fetch-Site: cross-site` or `same-site` (another localhost port is same-site) without a configured Origin
  (403), except a top-level navigation GET of a page, so a link from a chat or an e-mail still opens it;
- a POST, PUT or PATCH (or a DELETE with a body) whose body is not `application/json` (415): what a form or a
  "simple" cross-site request can send;
- a body over REIN_WEB_MAX_BODY bytes (413);
- in open mode, any peer but loopback (403).
Every response gets a Content-Security-Policy without inline script, `frame-ancestors 'none'`, `nosniff` and
`Referrer-Policy: no-referrer`; in open mode also `X-Rein-Open`.
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Awaitable, Callable, Collection, MutableMapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.routing import BaseRoute

from rein import settings

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]")
WRITES = ("POST", "PUT", "PATCH", "DELETE")
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
       "base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
SECURITY_HEADERS = {"content-security-policy": CSP, "x-content-type-options": "nosniff",
                    "referrer-policy": "no-referrer", "x-frame-options": "DENY",
                    "cross-origin-opener-policy": "same-origin"}
CORS_HEADERS = "Authorization, Content-Type, Last-Event-ID"
CORS_METHODS = "GET, POST, DELETE, OPTIONS"
OPEN_NOTICE = "open: no sign-in (loopback only)"
GUARDED = "rein.guarded"
"""Set in the ASGI scope by the outermost guard: a surface mounted inside another passes it through."""


@dataclass
class Policy:
    """What a guard lets through. `from_settings()` reads REIN_WEB_ORIGINS, REIN_WEB_PUBLIC_HOST, REIN_WEB_MAX_BODY;
    `pages` are the paths a cross-site link may open (GET, top-level navigation)."""

    origins: Collection[str] = ()
    hosts: Collection[str] = ()
    max_body: int = 4 * 1024 * 1024
    pages: Collection[str] = ()
    open: bool = False

    @classmethod
    def from_settings(cls, *, pages: Collection[str] = (), open: bool = False, origins: Sequence[str] | None = None,
                      hosts: Sequence[str] | None = None) -> Policy:
        now = settings.current()
        return cls(origins={o.rstrip("/").lower() for o in (origins if origins is not None else now.web_origins)},
                   hosts={re.sub(r"^https?://", "", h.lower()).rstrip("/")
                          for h in (hosts if hosts is not None else now.web_public_host)},
                   max_body=now.web_max_body, pages=set(pages), open=open)


class Refusal(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


@dataclass
class Guard:
    """The ASGI middleware around a surface (see the module's docstring)."""

    app: App
    policy: Policy = field(default_factory=Policy)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or scope.get(GUARDED):
            await self.app(scope, receive, send)
            return
        scope[GUARDED] = True
        headers = _headers(scope)
        origin = headers.get("origin")
        try:
            self._check(scope, headers, origin)
        except Refusal as refused:
            await _refuse(scope, send, refused.status, str(refused), self._extra(origin))
            return
        if scope["type"] == "websocket":
            await self.app(scope, receive, send)
            return
        cors = self._extra(origin)
        if scope["method"] == "OPTIONS" and "access-control-request-method" in headers:
            await _respond(send, 204, b"", cors + [("access-control-allow-methods", CORS_METHODS),
                                                   ("access-control-allow-headers", CORS_HEADERS),
                                                   ("access-control-max-age", "600")])
            return
        if scope["method"] in WRITES:
            try:
                receive = await self._body(scope, headers, receive)
            except Refusal as refused:
                await _refuse(scope, send, refused.status, str(refused), cors)
                return
        await self.app(scope, receive, _with_headers(send, cors))

    def _extra(self, origin: str | None) -> list[tuple[str, str]]:
        """CORS for a configured origin; `Vary: Origin` always; the open-mode notice."""
        extra = [("vary", "Origin")]
        if origin and origin.rstrip("/").lower() in self.policy.origins:
            extra.append(("access-control-allow-origin", origin))
        if self.policy.open:
            extra.append(("x-rein-open", OPEN_NOTICE))
        return extra

    def _check(self, scope: Scope, headers: dict[str, str], origin: str | None) -> None:
        host = headers.get("host", "").lower()
        if not self._serves(host):
            raise Refusal(403, f"this server does not serve the host {host or '(none)'!r} (set REIN_WEB_PUBLIC_HOST "
                               "for the name people reach it under)")
        if self.policy.open and not _loopback_peer(scope):
            raise Refusal(403, "open mode serves this machine only (loopback): sign-in is required from elsewhere")
        configured = False
        if origin is not None:
            given = origin.rstrip("/").lower()
            configured = given in self.policy.origins
            scheme, _, netloc = given.partition("://")
            own = scheme in ("http", "https") and netloc == host  # behind a TLS proxy the scheme may differ
            if not configured and not own:
                raise Refusal(403, f"a request from the page of another origin ({origin}) is refused (REIN_WEB_ORIGINS "
                                   "lists the ones allowed)")
        site = headers.get("sec-fetch-site", "")
        if site in ("cross-site", "same-site") and not configured and not self._navigation(scope, headers):
            raise Refusal(403, f"a {site} request is refused: open the page itself, or list its origin in REIN_WEB_ORIGINS")

    def _serves(self, host: str) -> bool:
        """Loopback names on any port; the public name (with its port, or on 80/443), never in open mode."""
        name, port = _split_host(host)
        if port is not None and not port.isdigit():
            return False
        if name in LOOPBACK_NAMES:
            return True
        if self.policy.open:
            return False
        return host in self.policy.hosts or (name in self.policy.hosts and port in (None, "80", "443"))

    def _navigation(self, scope: Scope, headers: dict[str, str]) -> bool:
        """A link opened at the top level: a GET of a page, in a tab (not a frame, not a fetch)."""
        return (scope.get("method") == "GET" and headers.get("sec-fetch-mode") == "navigate"
                and headers.get("sec-fetch-dest", "document") == "document" and scope.get("path") in self.policy.pages)

    async def _body(self, scope: Scope, headers: dict[str, str], receive: Receive) -> Receive:
        """The whole body, checked (JSON, at most max_body bytes), replayed to the app."""
        declared = headers.get("content-length")
        limit = self.policy.max_body
        if declared is not None and declared.isdigit() and int(declared) > limit:
            raise Refusal(413, f"the request body is {declared} bytes, more than {limit} (REIN_WEB_MAX_BODY)")
        chunks, size, more = [], 0, True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                raise Refusal(400, "the client went away before sending the body")
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                raise Refusal(413, f"the request body is more than {limit} bytes (REIN_WEB_MAX_BODY)")
            chunks.append(chunk)
            more = message.get("more_body", False)
        media = headers.get("content-type", "").split(";")[0].strip().lower()
        if media != "application/json" and (scope["method"] != "DELETE" or size or media):
            raise Refusal(415, f"send the body as application/json (not {media or 'without a Content-Type'})")
        body, sent = b"".join(chunks), False

        async def replay() -> Message:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        return replay


def surface(routes: Sequence[BaseRoute], *, pages: Collection[str] = (), open: bool = False, lifespan: Any = None,
            policy: Policy | None = None) -> Starlette:
    """A Starlette app for `routes`, guarded (every rein web surface is built here). `app.state.policy` is its
    policy."""
    web = Starlette(routes=list(routes), lifespan=lifespan)
    chosen = policy or Policy.from_settings(pages=pages, open=open)
    web.add_middleware(Guard, policy=chosen)  # before routing and the app's own error handlers
    web.state.policy = chosen
    return web


def _headers(scope: Scope) -> dict[str, str]:
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}


def _split_host(host: str) -> tuple[str, str | None]:
    if host.startswith("["):
        name, _, rest = host.partition("]")
        return name + "]", rest[1:] if rest.startswith(":") else None
    name, colon, port = host.partition(":")
    return name, port if colon else None


def _loopback_peer(scope: Scope) -> bool:
    client = scope.get("client")
    if not client:
        return False
    try:
        return ipaddress.ip_address(str(client[0])).is_loopback
    except ValueError:
        return False


def _with_headers(send: Send, extra: list[tuple[str, str]]) -> Send:
    """`send` adding the security headers (and `extra`) to the response's start, where the app set none."""
    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            have = {k.decode("latin-1").lower() for k, _ in message.get("headers", [])}
            added = [(k, v) for k, v in [*SECURITY_HEADERS.items(), *extra] if k not in have or k == "vary"]
            message["headers"] = [*message.get("headers", []), *[(k.encode(), v.encode()) for k, v in added]]
        await send(message)
    return sending


async def _respond(send: Send, status: int, body: bytes, extra: list[tuple[str, str]],
                   media: str = "application/json") -> None:
    headers = [("content-type", media), ("content-length", str(len(body))), *extra]
    await _with_headers(send, [])({"type": "http.response.start", "status": status,
                                   "headers": [(k.encode(), v.encode()) for k, v in headers]})
    await send({"type": "http.response.body", "body": body})


async def _refuse(scope: Scope, send: Send, status: int, message: str, extra: list[tuple[str, str]]) -> None:
    if scope["type"] == "websocket":
        await send({"type": "websocket.close", "code": 1008, "reason": message[:120]})
        return
    await _respond(send, status, json.dumps({"error": message}).encode(), extra)
