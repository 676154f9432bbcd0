"""MCP servers as tool sources: `Agent(..., mcp_servers=[MCPServerStdio(...), MCPServerHTTP(...)])`.

Built on the official `mcp` SDK's `Client`. Everything here runs worker-side (or in the
in-process runner): the durable workflow only ever sees the tool specs the worker listed in
`rein.describe_agent` (recorded in history) and the results of `rein.run_tool` activities, so
an MCP tool call has the same summary, retries, timeout and approval rules as any other tool.

Connections are pooled per worker: one per server and event loop, opened on first use and
kept, since a stdio server costs a process start per connection (about a second here), and
closed when the worker shuts down (ReinPlugin.run_worker). A call
that fails on the connection (the server died, the network dropped, a timeout) closes it and
becomes an `is_error` tool result naming the server; the next use reconnects (a stdio server
is started again). A server that cannot be reached when tools are listed is left out of that
listing, with a warning; its tools come back with the next listing that reaches it.

Configs stay in the worker: `env` and `headers` (which may hold credentials) are never sent
to the workflow and are left out of `repr`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import shlex
import weakref
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from rein.blueprint.tools import Tool, ToolRegistry

__all__ = ["MCPServerHTTP", "MCPServerStdio", "MCPServerStreamableHTTP", "MCPServerError", "MCPTools"]

log = logging.getLogger("rein.mcp")

_MAX_PAGES = 100
_LABEL_CHARS = 80
LISTING_TIMEOUT_S = 20.0
"""Bounds listing one server, connecting included, when a run starts (below `rein.describe_agent`'s
30 s): a server that takes longer is left out of that listing rather than failing the run."""
_closing: set[asyncio.Task] = set()


class MCPServerError(Exception):
    """An MCP server could not be reached, or failed during a call; the model gets the text."""


class MCPToolError(Exception):
    """The MCP tool itself reported an error (`isError`); the model gets the text."""


@dataclass(eq=False)
class _Server:
    tool_prefix: str | None = field(default=None, kw_only=True)
    """Prepended as `<prefix>_<tool>` to every tool name of this server, to keep names apart."""
    timeout_s: float = field(default=30.0, kw_only=True)
    """Bounds each request: a listing, a call (the durable tool activity allows connecting on top)."""
    connect_timeout_s: float = field(default=30.0, kw_only=True)
    """Bounds opening a connection (starting a stdio server, the HTTP handshake)."""
    retries: int = field(default=0, kw_only=True)
    """Durable engine: extra attempts of a failed call, as `@tool(retries=...)`."""
    requires_approval: bool = field(default=False, kw_only=True)
    """Every call to this server's tools waits for a person, as `@tool(requires_approval=True)`."""
    _pool: weakref.WeakKeyDictionary = field(
        default_factory=weakref.WeakKeyDictionary, init=False, repr=False, compare=False
    )

    @property
    def label(self) -> str:
        raise NotImplementedError

    def _target(self, stack: AsyncExitStack) -> Any:
        raise NotImplementedError

    # ------------------------------------------------------------ connections

    async def _client(self) -> Any:
        loop = asyncio.get_running_loop()
        conn = self._pool.get(loop)
        if conn is None or conn.closed:
            conn = _Connection(self)
            self._pool[loop] = conn
        try:
            return await asyncio.wait_for(asyncio.shield(conn.ready), self.connect_timeout_s)
        except TimeoutError:
            self._drop(conn)
            raise MCPServerError(
                f"MCP server {self.label} could not be connected to within {self.connect_timeout_s:g}s"
            ) from None
        except Exception as exc:
            self._drop(conn)
            raise MCPServerError(f"MCP server {self.label} is unreachable: {_why(exc)}") from None

    async def aclose(self) -> None:
        """Close this event loop's pooled connection (a stdio server's process ends with it)."""
        conn = self._pool.pop(asyncio.get_running_loop(), None)
        if conn is not None:
            conn.close()
            await asyncio.wait([conn.task], timeout=self.connect_timeout_s)

    def _drop(self, conn: _Connection) -> None:
        loop = asyncio.get_running_loop()
        if self._pool.get(loop) is conn:
            del self._pool[loop]
        conn.close()

    async def _use(self, what: str, operation: Any) -> Any:
        client = await self._client()
        conn = self._pool.get(asyncio.get_running_loop())
        try:
            return await operation(client)
        except Exception as exc:
            if conn is not None:
                self._drop(conn)
            raise MCPServerError(f"MCP server {self.label} failed during {what}: {_why(exc)}") from None

    async def list_tools(self) -> list[Any]:
        """The server's tools (`mcp.types.Tool`), every page."""

        async def listing(client: Any) -> list[Any]:
            tools, cursor = [], None
            for _ in range(_MAX_PAGES):
                page = await asyncio.wait_for(client.list_tools(cursor=cursor, cache_mode="refresh"), self.timeout_s)
                tools.extend(page.tools)
                cursor = page.next_cursor
                if cursor is None:
                    break
            return tools

        return await self._use("tools/list", listing)

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> str:
        """The call's result as text; raises MCPToolError for a tool error, MCPServerError otherwise."""

        async def call(client: Any) -> Any:
            return await client.call_tool(name, arguments, read_timeout_seconds=self.timeout_s)

        result = await self._use(f"the call to '{name}'", call)
        text = result_text(result)
        if result.is_error:
            raise MCPToolError(text or "the tool reported an error without details")
        return text


@dataclass(eq=False)
class MCPServerStdio(_Server):
    """An MCP server the worker starts as a subprocess and talks to over stdin/stdout."""

    command: str
    args: list[str] = field(default_factory=list)
    env: dict[str, str] | None = field(default=None, repr=False)
    """Extra environment variables for the server process (the SDK's safe defaults underneath)."""
    cwd: str | None = None

    @property
    def label(self) -> str:
        return repr(_elide_middle(shlex.join([self.command, *self.args]), _LABEL_CHARS))

    def _target(self, stack: AsyncExitStack) -> Any:
        from mcp import StdioServerParameters

        return StdioServerParameters(command=self.command, args=list(self.args), env=self.env, cwd=self.cwd)


@dataclass(eq=False)
class MCPServerHTTP(_Server):
    """An MCP server reached over streamable HTTP (`http://host:port/mcp`)."""

    url: str
    headers: dict[str, str] | None = field(default=None, repr=False)
    """Sent with every request, e.g. {"Authorization": "Bearer ..."}."""

    @property
    def label(self) -> str:
        parts = urlsplit(self.url)
        return repr(f"{parts.scheme}://{parts.hostname}{f':{parts.port}' if parts.port else ''}{parts.path}")

    def _target(self, stack: AsyncExitStack) -> Any:
        import httpx2
        from mcp.client.streamable_http import streamable_http_client

        http = httpx2.AsyncClient(headers=self.headers, timeout=httpx2.Timeout(self.timeout_s, read=300))
        stack.push_async_callback(http.aclose)
        return streamable_http_client(self.url, http_client=http)


MCPServerStreamableHTTP = MCPServerHTTP
"""pydantic-ai's name for the same thing."""


class _Connection:
    """One live `mcp.Client`, owned by a task of its own (anyio contexts must exit where they entered)."""

    def __init__(self, server: _Server):
        self.server = server
        self.ready: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.ready.add_done_callback(lambda f: f.cancelled() or f.exception())  # the waiter reports it
        self._stop = asyncio.Event()
        self.closed = False
        self.task = asyncio.ensure_future(self._own())

    async def _own(self) -> None:
        from mcp import Client

        try:
            async with AsyncExitStack() as stack:
                client = await stack.enter_async_context(Client(self.server._target(stack)))
                self.ready.set_result(client)
                await self._stop.wait()
        except Exception as exc:  # it could not connect, or broke while idle: whoever waits is told why
            if not self.ready.done():
                self.ready.set_exception(exc)
        finally:
            self.closed = True
            if not self.ready.done():
                self.ready.set_exception(MCPServerError("connection closed"))

    def close(self) -> None:
        self.closed = True
        self._stop.set()
        if not self.ready.done():
            self.task.cancel()  # still connecting: give up now
        _closing.add(self.task)
        self.task.add_done_callback(_closing.discard)


def _why(exc: BaseException) -> str:
    """The innermost useful message of an exception (anyio wraps failures in groups)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def result_text(result: Any) -> str:
    """An MCP `CallToolResult` as the text the model reads: text blocks, then placeholders for the rest."""
    parts: list[str] = []
    for block in result.content or []:
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(block.text)
        elif kind in ("image", "audio"):
            parts.append(f"[{kind} {block.mime_type}, {len(block.data) * 3 // 4} bytes]")
        elif kind == "resource":
            resource = block.resource
            parts.append(getattr(resource, "text", None) or f"[resource {resource.uri}]")
        elif kind == "resource_link":
            parts.append(f"[resource link {block.uri}]")
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False))
    return "\n".join(parts)


class MCPTool(Tool):
    """One tool of an MCP server, runnable like any rein Tool (its arguments are checked by the server)."""

    def __init__(self, server: _Server, remote: Any, name: str):
        async def call(**arguments: Any) -> str:
            return await server.call_tool(remote.name, arguments)

        super().__init__(
            fn=call,
            name=name,
            description=remote.description or remote.title or "",
            parameters=dict(remote.input_schema or {"type": "object", "properties": {}}),
            is_async=True,
            retries=server.retries,
            timeout_s=server.connect_timeout_s + server.timeout_s + 5,
            requires_approval=server.requires_approval,
        )
        self.server = server

    def validate_arguments(self, arguments: dict[str, Any]) -> dict[str, Any]:
        return dict(arguments)


class MCPTools:
    """An agent's MCP servers seen as tools; the latest listing is kept per worker process."""

    def __init__(self, servers: list[_Server], local: ToolRegistry):
        for server in servers:
            if not isinstance(server, _Server):
                raise TypeError(
                    f"mcp_servers takes rein.blueprint.mcp.MCPServerStdio / MCPServerHTTP objects, got {type(server).__name__}"
                )
        self.servers = list(servers)
        self.local = local
        """The agent's own tools, whose names MCP tools must not take."""
        self._tools: dict[str, MCPTool] | None = None

    async def refresh(self) -> list[MCPTool]:
        """List every server again, concurrently."""
        reserved = set(self.local.names())
        listings = await asyncio.gather(
            *(asyncio.wait_for(s.list_tools(), LISTING_TIMEOUT_S) for s in self.servers),
            return_exceptions=True,
        )
        tools: dict[str, MCPTool] = {}
        owner: dict[str, str] = {}
        for server, listing in zip(self.servers, listings, strict=False):
            if isinstance(listing, BaseException):
                if not isinstance(listing, Exception):
                    raise listing
                why = listing if str(listing) else f"no tool list within {LISTING_TIMEOUT_S:g}s"
                log.warning("MCP server %s left out of the tool list: %s", server.label, why)
                continue
            for remote in listing:
                name = f"{server.tool_prefix}_{remote.name}" if server.tool_prefix else remote.name
                if name in reserved or name in tools:
                    other = owner.get(name, "the agent's own tools")
                    raise ValueError(
                        f"MCP tool name {name!r} of server {server.label} clashes with {other}; "
                        "give the server a tool_prefix"
                    )
                tools[name] = MCPTool(server, remote, name)
                owner[name] = f"server {server.label}"
        self._tools = tools
        return list(tools.values())

    async def aclose(self) -> None:
        """Close the pooled connections of this event loop (a worker shutting down)."""
        await asyncio.gather(*(server.aclose() for server in self.servers))

    async def tools(self) -> list[MCPTool]:
        """The latest listing (listing the servers first if this process has none)."""
        if self._tools is None:
            return await self.refresh()
        return list(self._tools.values())

    async def get(self, name: str) -> MCPTool | None:
        """A tool by name; a name the latest listing lacks triggers one new listing."""
        if self._tools is None or name not in self._tools:
            await self.refresh()
        return (self._tools or {}).get(name)


def _elide_middle(text: str, limit: int) -> str:
    """`text` cut to `limit` characters in its middle: a long command keeps the program's start and
    its last words (the script and its arguments) and loses the directories in between."""
    if len(text) <= limit:
        return text
    head = (limit - 1) // 2
    return f"{text[:head]}…{text[len(text) - (limit - 1 - head):]}"
