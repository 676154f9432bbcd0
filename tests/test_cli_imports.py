"""Short `rein` commands import only what they use (rein issue 21: CLI latency, the suite's time).

A heavy module creeping back into a short command costs every `rein status` a person types and
every CLI subprocess the tests start (bench/cli_startup.py measures it). So this checks which
modules a real command loaded, in a fresh process against the session's dev server; not timing.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import uuid
from pathlib import Path

import rein
from rein import Agent, LoopConfig
from rein.cli.app import app
from rein.cli.dispatch import only_the_named_command
from rein.client import ReinClient
from rein.durable.embedded_server import free_port
from tests.support.providers import OpsModel, restart
from tests.support.waiting import poll

ROOT = Path(__file__).resolve().parent.parent

NOT_FOR_READS = (
    "temporalio.worker",  # the Replayer: only when no worker answers a query
    "temporalio.plugin", "rein.temporal.plugin",  # only when a client lacks rein's converter, or for a worker
    "rein.workflows", "rein.activities", "rein.blueprint.agent", "rein.blueprint.signature", "griffe",  # agents, their tools
    "rein.durable.engine", "rein.local.loop", "litellm", "httpx", "cryptography",  # running agents; a codec key
)

SCRIPT = """import json, sys
from rein.cli import main
code = main(sys.argv[1:])
print("MODULES " + json.dumps(sorted(sys.modules)), file=sys.stderr)
sys.exit(code)
"""


def modules_after(*argv: str) -> tuple[int, set[str]]:
    """(exit code, the modules loaded) of `rein ARGV` run in a fresh interpreter from this tree."""
    proc = subprocess.run([sys.executable, "-c", SCRIPT, *argv], cwd=str(ROOT), capture_output=True, text=True,
                          timeout=120, stdin=subprocess.DEVNULL)
    line = proc.stderr.splitlines()[-1] if proc.stderr else ""
    assert line.startswith("MODULES "), (proc.returncode, proc.stdout, proc.stderr)
    return proc.returncode, set(json.loads(line.removeprefix("MODULES ")))


def heavy(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if any(m == h or m.startswith(h + ".") for h in NOT_FOR_READS))


def rich(modules: set[str]) -> list[str]:
    """rich (~50 ms of CPU): loaded by the commands that print through it, not by JSON or one-line errors."""
    return sorted(m for m in modules if m == "rich" or m.startswith("rich."))


def test_help_and_usage_errors_import_no_temporal_and_no_models() -> None:
    for argv in (["--help"], ["status"]):  # `status` without its RUN_ID: a usage error (exit 2)
        code, modules = modules_after(*argv)
        assert code in (0, 2), argv
        assert not [m for m in modules if m.startswith(("temporalio", "rein.core.contract", "rein.client"))], argv


def test_a_refused_connection_loads_no_client() -> None:
    code, modules = modules_after("status", "x", "--address", f"127.0.0.1:{free_port()}")
    assert code == 4
    assert "rein.client" not in modules and heavy(modules) == []
    assert rich(modules) == []  # a one-line error is a plain print


async def test_reading_and_deciding_a_served_run_import_no_worker_side(dev) -> None:  # noqa: ANN001
    queue = f"imports-{uuid.uuid4().hex[:6]}"
    agent = Agent(provider=OpsModel(), tools=[restart], config=LoopConfig(permission="ask"), name=queue)
    address = dev.client.service_client.config.target_host
    async with rein.create_worker(dev.client, agents=[agent], task_queue=queue):
        client = ReinClient(dev.client, queue)
        run_id = (await client.start(queue, "web is down")).id

        async def waiting() -> bool:
            return (await client.status(run_id)).status == "waiting_approval"

        await poll(waiting, f"{run_id} to wait for approval", 30)
        for argv in (["status", run_id, "--json"], ["list", "--json", "--limit", "5"], ["approve", run_id]):
            code, modules = await asyncio.to_thread(modules_after, *argv, "--address", address)
            assert code == 0, argv
            assert heavy(modules) == [], argv
            if "--json" in argv:
                assert rich(modules) == [], argv  # rich only where a table or a line is styled


def test_only_the_named_command_is_built() -> None:

    for name in ("status", "server", "deployment", "codec-server"):
        view = only_the_named_command([name, "--help"])
        names = [c.name or c.callback.__name__ for c in view.registered_commands] + [g.name for g in view.registered_groups]
        assert names in ([name], [name.replace("-", "_")]), (name, names)
        assert view.registered_callback is app.registered_callback  # the global options stay
    for argv in ([], ["--help"], ["-h", "status"], ["stat"], ["--debug"]):
        assert only_the_named_command(argv) is app, argv
