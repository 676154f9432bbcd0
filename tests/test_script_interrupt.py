"""Ctrl-C during `agent.run(...)` in a user's script that catches KeyboardInterrupt prints only what
the script prints (issue 34): no "Task exception was never retrieved" traceback from the engine's
task for the run, whose update temporalio turns into WorkflowUpdateRPCTimeoutOrCancelledError when
it is cancelled. A real script process on a dev server, sent SIGINT while its model call is under way."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.support.processes import ROOT

SCRIPT = textwrap.dedent('''
    import asyncio
    import faulthandler
    import signal
    import sys

    from rein import Agent
    from rein.core.ir import Completion, Message


    class Slow:
        model = "scripted/slow"

        async def complete(self, messages, tools=None, **kwargs):
            print("calling the model", flush=True)
            await asyncio.sleep(300)
            return Completion(message=Message(role="assistant", content="late"), finish_reason="stop")


    faulthandler.register(signal.SIGUSR1)  # the test asks where each thread is if the script does not end
    agent = Agent(provider=Slow(), name="slowpoke")
    try:
        agent.run("hi")
    except KeyboardInterrupt:
        print("stopped by Ctrl-C", flush=True)
        sys.exit(3)
''')


@pytest.fixture
def server(private_server):
    return private_server


def test_ctrl_c_in_agent_run_leaves_only_the_scripts_own_output(server, tmp_path: Path) -> None:
    script = tmp_path / "script.py"
    script.write_text(SCRIPT)
    env = {k: v for k, v in os.environ.items() if k not in ("REIN_DEBUG", "REIN_TASK_QUEUE", "TEMPORAL_NAMESPACE")}
    env.update(TEMPORAL_ADDRESS=server.address, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, str(script)], cwd=str(tmp_path), env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()  # the run's worker (in the script) is calling the model: agent.run waits
        assert first == "calling the model\n", (first, proc.poll())
        proc.send_signal(signal.SIGINT)  # what Ctrl-C sends
        try:
            out, err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGUSR1)
            time.sleep(2)  # faulthandler writes the stacks at once; then the script is stopped
            proc.kill()
            out, err = proc.communicate()
            raise AssertionError(f"the script did not end within 60 s of SIGINT; its threads:\n{err}") from None
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert (proc.returncode, out, err) == (3, "stopped by Ctrl-C\n", "")
