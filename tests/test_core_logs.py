"""temporalio's core (its Rust `temporalio_sdk_core`) logs warnings of its own, which temporalio prints straight to
the terminal: under load the demo printed `WARN temporalio_sdk_core::worker::workflow ... Workflow task not
found.` before its answer. Through rein's connection (rein.temporal.connection.core_runtime) they reach a
terminal only when asked: --debug / REIN_DEBUG=1 (printed by the core itself: nothing is forwarded through
Python, which a process at its exit may no longer take).

A real warning, made on purpose: an activity that finishes after its start-to-close timeout (its run has
moved on), which the core reports as "Activity not found on completion". A script connects with
`rein.client.connect()` (the public entry point; the CLI, `rein worker` and `Agent.run` connect through the same
function) and serves a plain temporalio worker, against the session's dev server.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

SCRIPT = textwrap.dedent('''
    import asyncio, sys, uuid
    from datetime import timedelta

    from temporalio import activity, workflow
    from temporalio.common import RetryPolicy
    from temporalio.worker import Worker

    from rein.client import connect

    finished = asyncio.Event()


    @activity.defn
    async def late() -> str:
        await asyncio.sleep(2)  # past its 1 s timeout: the run has moved on when it completes
        finished.set()
        return "late"


    @workflow.defn(sandboxed=False)
    class Impatient:
        @workflow.run
        async def run(self) -> str:
            try:
                return await workflow.execute_activity(late, start_to_close_timeout=timedelta(seconds=1),
                                                       retry_policy=RetryPolicy(maximum_attempts=1))
            except Exception:
                return "timed out"


    async def main():
        client = await connect()
        queue = f"late-{uuid.uuid4().hex[:8]}"
        async with Worker(client, task_queue=queue, workflows=[Impatient], activities=[late]):
            print(await client.execute_workflow(Impatient.run, id=queue, task_queue=queue), flush=True)
            await finished.wait()
        # The worker has shut down: the late completion was reported (and refused) by now; the core prints
        # its warning from its own thread: give it a moment before the process exits.
        if sys.argv[1] == "wait-for-the-warning":
            await asyncio.sleep(2)


    asyncio.run(main())
''')


@pytest.mark.parametrize("debug", [False, True], ids=["quiet", "debug"])
def test_the_cores_warnings_reach_the_terminal_only_when_asked(dev, tmp_path: Path, debug: bool) -> None:  # noqa: ANN001
    script = tmp_path / "late.py"
    script.write_text(SCRIPT)
    env = {k: v for k, v in os.environ.items() if k not in ("REIN_DEBUG", "TEMPORAL_NAMESPACE")}
    env.update(TEMPORAL_ADDRESS=dev.client.service_client.config.target_host, REIN_DEBUG="1" if debug else "")
    proc = subprocess.run([sys.executable, str(script), "wait-for-the-warning" if debug else "leave"], cwd=str(tmp_path),
                          env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=240)
    assert proc.returncode == 0, proc.stderr
    if debug:  # the warning happened, and the core printed it (on stdout, as it does by default)
        assert proc.stdout.startswith("timed out\n") and "Activity not found on completion" in proc.stdout, proc.stdout
    else:
        assert (proc.stdout, proc.stderr) == ("timed out\n", "")
