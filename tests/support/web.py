"""rein's web surfaces served for a test: in this process under uvicorn (as `rein serve` runs them), with the
environment's web settings set for the app's build and put back after; or `rein serve` in a process of its own."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from rein import settings
from rein.durable.embedded_server import free_port
from tests.support.processes import ROOT, wait_for_text
from tests.support.waiting import poll


@contextlib.contextmanager
def environment(**values: str | None) -> Iterator[None]:
    """`REIN_*` settings set (None: unset) for the block, then as they were (rein.settings.override)."""
    with settings.override(**{name.removeprefix("REIN_").lower(): value for name, value in values.items()}):
        yield


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
                     until: str | tuple[str, ...] | None = None, within_s: float = 60,
                     body: Any = None) -> tuple[int, list[str]]:
    """A stream's SSE blocks (comments included) until it ends, or until a block containing `until` (any of them);
    a GET, or a POST of `body`. A stream still open after `within_s` fails the test."""
    try:
        return await asyncio.wait_for(_blocks(http, url, headers or {}, until, body), within_s)
    except TimeoutError:
        raise AssertionError(f"the stream {url} did not end within {within_s:g}s") from None


async def _blocks(http: httpx.AsyncClient, url: str, headers: dict[str, str], until: str | tuple[str, ...] | None,
                  body: Any) -> tuple[int, list[str]]:
    blocks: list[str] = []
    ends = (until,) if isinstance(until, str) else until or ()
    sent = {"json": body} if body is not None else {}
    async with http.stream("POST" if body is not None else "GET", url, headers=headers, **sent) as response:
        if response.status_code != 200:
            return response.status_code, [(await response.aread()).decode()]
        buffer = ""
        async for text in response.aiter_text():
            buffer += text
            while "\n\n" in buffer:
                block, buffer = buffer.split("\n\n", 1)
                blocks.append(block)
                if any(end in block for end in ends):
                    return 200, blocks
    return 200, blocks


def start_rein_serve(log: Path, address: str, queue: str, *args: str, poll: str = "0.2",
                     **env: str) -> tuple[subprocess.Popen[bytes], str]:
    """`rein serve` as a user runs it (its own process, no sign-in variables but `env`, reading the inbox every
    `poll` seconds); its base URL once it says where it listens (and, when it signs in with its own token, the link)."""
    port = free_port()
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("REIN_CODEC", "REIN_WEB", "REIN_IDENTITY"))}
    clean.update(REIN_TASK_QUEUE=queue, PYTHONUNBUFFERED="1", **env)
    with open(log, "wb") as out:
        process = subprocess.Popen([str(Path(sys.executable).parent / "rein"), "serve", "--port", str(port), "--address",
                                    address, "--poll", poll, *args], env=clean, cwd=str(ROOT), stdout=out,
                                   stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    wait_for_text(log, f"the inbox at http://127.0.0.1:{port}/inbox", process, 60)
    return process, f"http://127.0.0.1:{port}"
