"""With tracing on, rein's LiteLLM path is quiet and local: no red `Provider List: ...` banner for a
model LiteLLM cannot classify, and its shipped price map (LITELLM_LOCAL_MODEL_COST_MAP), no download."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = """
import os
from rein import Completion, Message, Usage
from rein.tracing.genai import cost_usd, provider_of

for _ in range(6):  # one traced run's model calls: a model name LiteLLM cannot classify
    provider_of("my-scripted-model")
    cost_usd("my-scripted-model", Completion(message=Message(role="assistant", content="hi"), finish_reason="stop",
                                             usage=Usage(input_tokens=3, output_tokens=2)))
import litellm
print("local map:", os.environ.get("LITELLM_LOCAL_MODEL_COST_MAP"), "quiet:", litellm.suppress_debug_info)
"""


def test_rein_litellm_path_is_quiet_and_offline() -> None:
    env = {k: v for k, v in os.environ.items() if k != "LITELLM_LOCAL_MODEL_COST_MAP"}
    unreachable = "http://127.0.0.1:9"  # the discard port: nothing listens, every download fails at once
    env.update(HTTP_PROXY=unreachable, HTTPS_PROXY=unreachable, http_proxy=unreachable, https_proxy=unreachable,
               NO_PROXY="", no_proxy="")
    done = subprocess.run([sys.executable, "-c", SCRIPT], cwd=str(ROOT), env=env, capture_output=True, text=True,
                          timeout=240, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Provider List" not in done.stdout + done.stderr
    assert "local map: True quiet: True" in done.stdout
