"""temporalio's core (its Rust `temporalio_sdk_core`) logs warnings of its own, which temporalio prints straight to
the terminal: under load the demo printed `WARN temporalio_sdk_core::worker::workflow ... Workflow task not
found.` before its answer. Through rein's connection (rein.temporal.connection.core_runtime) they reach a
terminal only when asked: --debug / REIN_DEBUG=1.

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
    import asyncio, logging, sys, threading, uuid
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


    class Seen(logging.Handler):
        """Where the script's own logging sees the core's lines (REIN_DEBUG=1 passes them on; they come from
        the core's thread)."""
        warned = threading.Event()

        def emit(self, record):
            if "Activity not found on completion" in record.getMessage():
                self.warned.set()


    async def main():
        logging.basicConfig(format="LOGGED %(message)s")
        logging.getLogger().addHandler(Seen())
        client = await connect()
        queue = f"late-{uuid.uuid4().hex[:8]}"
        async with Worker(client, task_queue=queue, workflows=[Impatient], activities=[late]):
            print(await client.execute_workflow(Impatient.run, id=queue, task_queue=queue), flush=True)
            await finished.wait()
        # The worker has shut down: the late completion was reported (and refused) by now. Logged, it comes
        # through Python logging; asked for it, wait until it has.
        if sys.argv[1] == "wait-for-the-warning":
            await asyncio.to_thread(Seen.warned.wait)


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
    assert proc.stdout == "timed out\n"
    if debug:  # the warning happened, and was passed on to the script's logging
        assert "LOGGED [sdk_core::temporalio_sdk_core::worker::activities] Activity not found on completion" in proc.stderr
    else:
        assert proc.stderr == ""
