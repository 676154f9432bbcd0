"""A small real MCP server for the tests, built on the official SDK's server side (MCPServer).

    python tests/mcp_server.py stdio
    python tests/mcp_server.py http PORT          # streamable HTTP on 127.0.0.1:PORT/mcp

`die` ends the server process in the middle of a call, as a crash would.
"""

from __future__ import annotations

import os
import sys

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("rein-test", log_level="WARNING")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def shout(text: str) -> str:
    """Upper-case a text."""
    return text.upper()


@server.tool()
def read_env() -> str:
    """The value of REINTEST_VALUE in the server's environment."""
    return os.environ.get("REINTEST_VALUE", "(unset)")


@server.tool()
def check_auth(ctx: Context) -> str:
    """Whether the HTTP request carried `Authorization: Bearer $REINTEST_TOKEN` (the token is never echoed)."""
    request = ctx.request_context.request
    sent = request.headers.get("authorization") if request is not None else None
    return "authorized" if sent == f"Bearer {os.environ.get('REINTEST_TOKEN')}" else "unauthorized"


@server.tool()
def refuse(reason: str) -> str:
    """Always fails, with the given reason."""
    raise ToolError(f"refused: {reason}")


@server.tool()
async def sleep(seconds: float) -> str:
    """Answers after `seconds`."""
    await anyio.sleep(seconds)
    return "awake"


@server.tool()
def pid() -> int:
    """This server's process id."""
    return os.getpid()


@server.tool()
def die() -> str:
    """Crashes the server mid-call."""
    sys.stdout.flush()
    os._exit(3)


if __name__ == "__main__":
    if sys.argv[1:2] == ["http"]:
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run("stdio")
