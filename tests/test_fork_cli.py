"""`rein fork`, `rein rewind`, `rein list --fork-of`, `rein show` lineage: happy path in-process,
mistakes as the real console script (one line on stderr, non-zero exit)."""

from __future__ import annotations

import asyncio
import json
import uuid

import rein
from rein import Agent
from rein.cli import EXIT_ERROR, EXIT_NOT_FOUND, EXIT_USAGE, main
from rein.client import ReinClient
from tests.support.providers import RecordingProvider
from tests.support.waiting import poll
from tests.test_cli import assert_one_line_error, rein_cli
from tests.test_fork import Counted, five_steps


async def test_fork_cli(dev, capsys):
    names = uuid.uuid4().hex[:6]
    address = dev.client.service_client.config.target_host
    tools = Counted()
    agent = Agent(provider=RecordingProvider(five_steps()), tools=tools.tools(), name=f"cli-{names}")
    tq = f"fork-cli-{names}"
    async with rein.create_worker(dev.client, agents=[agent], task_queue=tq):
        client = ReinClient(dev.client, tq)
        handle = await client.start(agent.name, "go")
        await handle.result()
        original = handle.id
        capsys.readouterr()
        code = await asyncio.to_thread(main, ["fork", original, "--at-step", "3", "--tool-result", "c-b=EDITED",
                                              "--by", "ops-bob", "--id", f"{original}-f", "--address", address])
        assert code == 0
        assert capsys.readouterr().out.strip() == f"{original}-f"
        assert (await client.result(f"{original}-f")).output == "fork answer"

        async def listed() -> list:
            capsys.readouterr()
            assert await asyncio.to_thread(main, ["list", "--fork-of", original, "--json", "--address", address]) == 0
            return [row["run_id"] for row in json.loads(capsys.readouterr().out)]

        assert await poll(listed, "rein list --fork-of") == [f"{original}-f"]
        assert await asyncio.to_thread(main, ["show", f"{original}-f", "--json", "--address", address]) == 0
        shown = json.loads(capsys.readouterr().out)
        assert shown["fork_of"]["of"] == original and shown["fork_of"]["by"] == "ops-bob"
        assert await asyncio.to_thread(main, ["show", f"{original}-f", "--address", address]) == 0
        assert f"{original} at step 3 (tool result c-b replaced) by ops-bob" in " ".join(capsys.readouterr().out.split())

        mistakes = [
            (["fork", original, "--address", address], EXIT_USAGE, "give RUN_ID and --at-step N"),
            (["fork", original, "--at-step", "3", "--tool-result", "nonsense", "--address", address], EXIT_USAGE, "is not CALL_ID=TEXT"),
            (["fork", "--failed", "--since", "soon", "--address", address], EXIT_USAGE, "is not a duration"),
            (["fork", original, "--at-step", "7", "--address", address], EXIT_ERROR, "has no step 7"),
            (["fork", original, "--at-step", "3", "--tool-result", "zz=1", "--address", address], EXIT_ERROR, "no tool call 'zz'"),
            (["fork", f"nope-{names}", "--at-step", "0", "--address", address], EXIT_NOT_FOUND, "no run with id"),
            (["rewind", original, "--to-step", "1", "--address", address], EXIT_ERROR, "--rerun-tools"),
        ]
        for argv, code, needle in mistakes:
            proc = await asyncio.to_thread(rein_cli, *argv)
            assert_one_line_error(proc, code, needle)
    assert tools.calls == ["a", "b"]
