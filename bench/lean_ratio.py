#!/usr/bin/env python
"""rein against the sandboxed floor at N = 80 iterations, interleaved in one process: ms and process CPU per
iteration (issue 33 item 7's two ratios, quickly). Not a test.

    python bench/lean_ratio.py rein,floor-sandboxed 6        # variants (lean.Bench.one), repetitions
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import lean  # noqa: E402

from rein.durable.embedded_server import start_dev_server  # noqa: E402


async def main(variants: list[str], reps: int, n: int = 80) -> None:
    server = start_dev_server()
    bench = lean.Bench(server.address)
    await bench.start()
    try:
        for variant in variants:  # warm: imports, the sandbox's first module loads
            await bench.one(variant, 5, 1024, shape_of=False)
        wall: dict[str, list[float]] = {v: [] for v in variants}
        cpu: dict[str, list[float]] = {v: [] for v in variants}
        for _ in range(reps):
            for variant in variants:
                began = time.process_time()
                sample = await bench.one(variant, n, 1024, shape_of=False)
                cpu[variant].append((time.process_time() - began) / n * 1000)
                wall[variant].append(sample["s"] / n * 1000)
        for variant in variants:
            print(f"{variant}: ms/iteration {sorted(wall[variant])[reps // 2]:.2f}, "
                  f"CPU ms/iteration {sorted(cpu[variant])[reps // 2]:.2f} (medians of {reps})")
    finally:
        await bench.stop()
        server.stop()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1].split(","), int(sys.argv[2])))
