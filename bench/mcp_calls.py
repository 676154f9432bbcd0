"""What one MCP tool call costs the worker: rein's pooled connection against a connection per call.

    python bench/mcp_calls.py [--reps 5 --calls 20]

Runs tests/mcp_server.py (the SDK's MCPServer) over stdio and over streamable HTTP on loopback
and times `add(a, b)`: through `rein.blueprint.mcp` (one connection per server and event loop, kept), and
with a fresh `mcp.Client` per call (what a stateless worker would do). Variants run interleaved,
repetition by repetition; the report gives medians and the ratio to the pooled call.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import time
from pathlib import Path

from mcp import Client, StdioServerParameters

from rein.blueprint.mcp import MCPServerHTTP, MCPServerStdio
from rein.durable.embedded_server import free_port

ROOT = Path(__file__).resolve().parent.parent

SERVER = ROOT / "tests" / "mcp_server.py"


async def pooled(server, calls: int) -> float:
    start = time.perf_counter()
    for i in range(calls):
        assert await server.call_tool("add", {"a": i, "b": 1}) == str(i + 1)
    return (time.perf_counter() - start) / calls


async def fresh(target, calls: int) -> float:
    start = time.perf_counter()
    for i in range(calls):
        async with Client(target()) as client:
            result = await client.call_tool("add", {"a": i, "b": 1})
            assert result.content[0].text == str(i + 1)
    return (time.perf_counter() - start) / calls


async def main(reps: int, calls: int) -> None:
    port = free_port()
    http = subprocess.Popen([sys.executable, str(SERVER), "http", str(port)], stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        await asyncio.sleep(3)  # the HTTP server starts
        stdio = MCPServerStdio(sys.executable, [str(SERVER), "stdio"])
        streamable = MCPServerHTTP(url)
        await stdio.call_tool("add", {"a": 0, "b": 0})  # open the pooled connections once, as a worker does
        await streamable.call_tool("add", {"a": 0, "b": 0})
        variants = {
            "stdio, pooled (rein)": lambda: pooled(stdio, calls),
            "stdio, connection per call": lambda: fresh(
                lambda: StdioServerParameters(command=sys.executable, args=[str(SERVER), "stdio"]), max(2, calls // 10)
            ),
            "HTTP, pooled (rein)": lambda: pooled(streamable, calls),
            "HTTP, connection per call": lambda: fresh(lambda: url, calls),
        }
        times: dict[str, list[float]] = {name: [] for name in variants}
        for rep in range(reps):
            for name, variant in variants.items():
                times[name].append(await variant())
            print(f"rep {rep + 1}/{reps} done", file=sys.stderr)
    finally:
        http.kill()
        http.wait()
    print(f"| variant | ms / call (median of {reps}) | min | × pooled |\n|---|---|---|---|")
    for name, values in times.items():
        base = statistics.median(times[name.split(",")[0] + ", pooled (rein)"])
        print(f"| {name} | {statistics.median(values) * 1000:.1f} | {min(values) * 1000:.1f} "
              f"| {statistics.median(values) / base:.1f}× |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--calls", type=int, default=20)
    args = parser.parse_args()
    asyncio.run(main(args.reps, args.calls))
