"""What reading rein's settings costs: importing them, `rein.settings.current()` when nothing changed (the common
case: every call site reads it where it uses it) and when a variable changed (the model is built again), beside a
plain `os.environ.get` and `import rein`. Asserts nothing.

    python bench/settings_read.py [--calls 20000] [--imports 5]

Import CPU is the median user+sys of a fresh interpreter doing the import (`python -c`), minus the interpreter
alone; call costs are the median of five timed loops in this process.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path


def child_cpu(code: str) -> float:
    """CPU seconds (user + sys) of `python -c CODE` in a fresh interpreter."""
    with subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.DEVNULL) as proc:
        _, _, usage = os.wait4(proc.pid, 0)
        proc.returncode = 0
    return usage.ru_utime + usage.ru_stime


def per_call_us(fn: Callable[[], object], calls: int) -> float:
    """Median microseconds per call over five loops of `calls`."""
    loops = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        loops.append((time.perf_counter() - start) / calls * 1e6)
    return statistics.median(loops)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--imports", type=int, default=5)
    args = parser.parse_args()
    floor = statistics.median(child_cpu("pass") for _ in range(args.imports))
    for code in ("import rein", "import pydantic", "import rein.settings", "import rein.settings; rein.settings.current()"):
        cpu = statistics.median(child_cpu(code) for _ in range(args.imports))
        print(f"{code:<48} {1000 * (cpu - floor):7.1f} ms CPU above the interpreter ({1000 * floor:.0f} ms)")

    from rein import settings

    with tempfile.TemporaryDirectory() as home:
        os.environ["REIN_HOME"] = home
        settings.current()
        print(f"os.environ.get                                   {per_call_us(lambda: os.environ.get('REIN_X'), args.calls):7.2f} us")
        print(f"settings.current(), nothing changed               {per_call_us(settings.current, args.calls):7.2f} us")
        (Path(home) / "settings.env").write_text("REIN_TASK_QUEUE=jobs\nREIN_CODEC_TOKEN=a-secret-token\n")
        settings.current()
        print(f"  ... with a settings file                        {per_call_us(settings.current, args.calls):7.2f} us")
        flip = iter(range(10**9))

        def changed() -> object:
            os.environ["REIN_QUERY_GRACE_S"] = str(next(flip) % 7)
            return settings.current()

        print(f"settings.current(), a variable changed each call  {per_call_us(changed, args.calls // 100):7.2f} us")
        print(f"Settings() (the model built, no cache)            {per_call_us(settings.Settings, args.calls // 100):7.2f} us")
    print(f"{len(settings.Settings.model_fields)} settings; load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
