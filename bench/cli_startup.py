"""CPU of short `rein` commands (a subprocess each, as users and tests run them), per source tree.

    python bench/cli_startup.py --runs 7                                # this tree
    python bench/cli_startup.py --tree before=/tmp/old --tree after=.   # two trees, interleaved

Each tree is copied to a temporary directory twice: once with its bytecode compiled (as an
installed rein runs) and once without, run under PYTHONDONTWRITEBYTECODE=1 (as the test suite's
`rein` subprocesses ran on this machine: every rein module compiled again in every command).
Each command runs as `python -m rein.cli ARGS` with PYTHONPATH=COPY (it wins over an installed
rein) against a dev server from `rein.testing.start_local`, with a worker in this process serving
`rein.examples.calculator:agent` and runs waiting for approval. CPU is the child's own user+sys
(os.wait4), median of --runs; the variants alternate run by run, so machine load hits all alike.
Then the floor (python alone, `import temporalio.client`) and the top cumulative `-X importtime`
entries of `rein status ID --json`. Asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import compileall
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent


def run_cli(tree: Path, args: list[str], address: str, extra: tuple[str, ...] = ()) -> tuple[float, int, str]:
    """(CPU seconds of the child, exit code, stderr) of `python -m rein.cli ARGS` from `tree`."""
    environ = {k: v for k, v in os.environ.items() if k not in ("TEMPORAL_ADDRESS", "REIN_DEBUG", "COLUMNS")}
    environ.update(PYTHONPATH=str(tree), TEMPORAL_ADDRESS=address, PYTHONDONTWRITEBYTECODE="1")
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen([sys.executable, *extra, "-m", "rein.cli", *args], cwd=str(tree), env=environ,
                                stdin=subprocess.DEVNULL, stdout=out, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        return usage.ru_utime + usage.ru_stime, proc.returncode, err.read().decode(errors="replace")


def floor(tree: Path, code: str) -> float:
    """CPU seconds of `python -c CODE`: what any Python Temporal command pays before rein's code."""
    with subprocess.Popen([sys.executable, "-c", code], cwd=str(tree), stdin=subprocess.DEVNULL) as proc:
        _, _, usage = os.wait4(proc.pid, 0)
        proc.returncode = 0
    return usage.ru_utime + usage.ru_stime


def copies(trees: dict[str, Path], into: Path, bytecode: str) -> dict[str, Path]:
    """Each tree's sources copied under `into`, compiled and/or not: label -> copy."""
    out: dict[str, Path] = {}
    for label, tree in trees.items():
        for kind in (["compiled", "source"] if bytecode == "both" else [bytecode]):
            copy = into / f"{label}-{kind}"
            shutil.copytree(tree, copy, ignore=shutil.ignore_patterns(".git", "__pycache__", "*.egg-info", ".venv"))
            if kind == "compiled":
                for folder in ("rein", "workflows", "activities", "examples"):
                    compileall.compile_dir(copy / folder, quiet=1)
            out[f"{label}, {kind}" if bytecode == "both" else label] = copy
    return out


def commands(waiting: list[str]) -> dict[str, tuple[list[str], int]]:
    """label -> (arguments, expected exit code). `approve` takes one waiting run per call."""
    return {
        "rein --help": (["--help"], 0),
        "rein status ID --json": (["status", waiting[0], "--json"], 0),
        "rein list --json": (["list", "--json", "--limit", "20"], 0),
        "rein approve ID": (["approve", "<next>"], 0),
        "rein status NOSUCH (exit 3)": (["status", "no-such-run"], 3),
        "rein list, no server (exit 4)": (["list", "--address", "127.0.0.1:1"], 4),
    }


def importtime_top(tree: Path, args: list[str], address: str, top: int) -> list[tuple[int, str]]:
    _, code, err = run_cli(tree, args, address, extra=("-X", "importtime"))
    rows = []
    for line in err.splitlines():
        if line.startswith("import time:") and "|" in line and "cumulative" not in line:
            _, cumulative, name = line.split("|")
            rows.append((int(cumulative), name.rstrip()))
    return sorted(rows, reverse=True)[:top]


async def waiting_runs(client, count: int) -> list[str]:  # noqa: ANN001
    from rein.client import ReinClient

    rein = ReinClient(client)
    ids = [(await rein.start("calculator", "what is 2 + 3?")).id for _ in range(count)]
    for run_id in ids:
        for _ in range(200):
            if (await rein.status(run_id)).status == "waiting_approval":
                break
            await asyncio.sleep(0.05)
    return ids


async def main(trees: dict[str, Path], runs: int, top: int, bytecode: str) -> None:
    with tempfile.TemporaryDirectory(prefix="cli-startup-") as scratch:
        await measure(copies(trees, Path(scratch), bytecode), runs, top)


async def measure(trees: dict[str, Path], runs: int, top: int) -> None:
    sys.path.insert(0, str(HERE))
    import rein
    from rein.examples.calculator import agent
    from rein.testing import start_local

    env = await start_local()
    address = env.client.service_client.config.target_host
    cpu: dict[tuple[str, str], list[float]] = {}
    try:
        async with rein.create_worker(env.client, agents=[agent], task_queue="rein"):
            waiting = await waiting_runs(env.client, runs * len(trees) + 1)
            to_approve = iter(waiting[1:])
            table = commands(waiting)
            for rep in range(runs):
                print(f"rep {rep + 1}/{runs}", file=sys.stderr)
                for label, (args, expected) in table.items():
                    for name, tree in trees.items():
                        argv = [next(to_approve) if a == "<next>" else a for a in args]
                        seconds, code, err = await asyncio.to_thread(run_cli, tree, argv, address)
                        assert code == expected, (name, label, code, err)
                        cpu.setdefault((label, name), []).append(seconds)
            floors = {label: statistics.median([await asyncio.to_thread(floor, HERE, code) for _ in range(runs)])
                      for label, code in (("python -c pass", "pass"), ("import temporalio.client", "import temporalio.client"))}
            tops = {name: await asyncio.to_thread(importtime_top, tree, ["status", waiting[0], "--json"], address, top)
                    for name, tree in trees.items()}
    finally:
        await env.shutdown()
    names = list(trees)
    print(f"| command | {' | '.join(f'{n} CPU ms' for n in names)} |")
    print(f"|---|{'---|' * len(names)}")
    for label in table:
        cells = [f"{statistics.median(cpu[(label, n)]) * 1000:.0f}" for n in names]
        print(f"| `{label}` | {' | '.join(cells)} |")
    print("\nThe floor, median CPU ms: " + ", ".join(f"`{k}` {v * 1000:.0f}" for k, v in floors.items()))
    for name in names:
        print(f"\n`-X importtime` of `rein status ID --json`, {name}: top {top} cumulative (ms)\n")
        for micros, module in tops[name]:
            print(f"    {micros / 1000:7.1f}  {module}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=7, help="runs of each command per tree (the median is shown)")
    parser.add_argument("--tree", action="append", default=[], metavar="LABEL=PATH",
                        help="a source tree to run the CLI from (default: this one)")
    parser.add_argument("--top", type=int, default=15, help="importtime entries to show")
    parser.add_argument("--bytecode", choices=["both", "compiled", "source"], default="both",
                        help="run each tree with its bytecode compiled, without, or both (default)")
    options = parser.parse_args()
    chosen = dict(t.split("=", 1) for t in options.tree) or {"this tree": str(HERE)}
    asyncio.run(main({k: Path(v).resolve() for k, v in chosen.items()}, options.runs, options.top, options.bytecode))
