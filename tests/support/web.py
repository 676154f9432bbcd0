"""rein's web surfaces served for a test: in this process under uvicorn (as `rein serve` runs them), with the
environment's web settings set for the app's build and put back after."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import uvicorn

from rein.durable.embedded_server import free_port
from tests.support.waiting import poll


@contextlib.contextmanager
def environment(**values: str | None) -> Iterator[None]:
    """Environment variables set (None: removed) for the block, then as they were."""
    before = {name: os.environ.get(name) for name in values}
    try:
        for name, value in values.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@contextlib.asynccontextmanager
async def served(web: Any, host: str = "127.0.0.1") -> AsyncIterator[str]:
    """`web` listening on a free port of `host`; its base URL."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(web, host=host, port=port, log_level="warning"))
    task = asyncio.create_task(server.serve())
    try:
        await poll(lambda: server.started or task.done(), "uvicorn to start")
        assert not task.done(), task
        yield f"http://{host}:{port}"
    finally:
        server.should_exit = True
        await task


async def sse_blocks(http: httpx.AsyncClient, url: str, headers: dict[str, str] | None = None,
                     until: str | None = None, within_s: float = 60) -> tuple[int, list[str]]:
    """A GET stream's SSE blocks (comments included) until it ends, or until a block containing `until`; a stream
    still open after `within_s` fails the test."""
    try:
        return await asyncio.wait_for(_blocks(http, url, headers or {}, until), within_s)
    except TimeoutError:
        raise AssertionError(f"the stream {url} did not end within {within_s:g}s") from None


async def _blocks(http: httpx.AsyncClient, url: str, headers: dict[str, str], until: str | None) -> tuple[int, list[str]]:
    blocks: list[str] = []
    async with http.stream("GET", url, headers=headers) as response:
        if response.status_code != 200:
            return response.status_code, [(await response.aread()).decode()]
        buffer = ""
        async for text in response.aiter_text():
            buffer += text
            while "\n\n" in buffer:
                block, buffer = buffer.split("\n\n", 1)
                blocks.append(block)
                if until is not None and until in block:
                    return 200, blocks
    return 200, blocks
