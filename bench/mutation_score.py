"""Per-module mutation score from mutmut's results in mutants/ (run by bench/mutation.sh).

Killed = a test failed (or timed out) with the mutant in place. Every other verdict ("survived",
"no tests", "suspicious", ...) counts against the score and is listed, so docs/mutation.md can
give each survivor a reason.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

from mutmut.stats import status_by_exit_code

DETECTED = {"killed", "timeout"}


def main(root: Path = Path("mutants")) -> int:
    metas = sorted(root.glob("**/*.py.meta"))
    if not metas:
        print("no mutmut results under mutants/: run bench/mutation.sh first", file=sys.stderr)
        return 1
    print(f"{'module':<22} {'mutants':>7} {'killed':>7} {'score':>7}  other (timeouts count as killed)")
    survivors: list[tuple[str, str]] = []
    for meta in metas:
        codes = json.loads(meta.read_text())["exit_code_by_key"]
        statuses = {key: status_by_exit_code[code] for key, code in codes.items()}
        counts = Counter(statuses.values())
        killed = sum(counts[s] for s in DETECTED)
        other = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()) if s != "killed")
        module = str(meta.relative_to(root)).removesuffix(".meta")
        score = 100 * killed / len(codes) if codes else 100.0
        print(f"{module:<22} {len(codes):>7} {killed:>7} {score:>6.1f}%  {other}")
        survivors += sorted((key, s) for key, s in statuses.items() if s not in DETECTED)
    if survivors:
        print("\nnot killed (inspect with `mutmut show NAME`):")
        for key, status in survivors:
            print(f"  {status:<10} {key}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
