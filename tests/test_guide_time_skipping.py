"""The guide's time-skipping test (docs/guide.md) runs as written in a user's own project: copied into
a fresh directory and run by pytest there, without rein's pytest config or conftest (so without its
`asyncio_mode = auto`), with only what `rein[testing]` installs."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GUIDE = (ROOT / "docs" / "guide.md").read_text()


def test_the_guides_time_skipping_test_passes_in_a_fresh_project(tmp_path: Path) -> None:
    blocks = [b for b in re.findall(r"```python\n(.*?)```", GUIDE, re.S) if "start_time_skipping" in b]
    assert len(blocks) == 1, "the guide has one time-skipping test"
    assert "pip install 'rein[testing]'" in GUIDE
    (tmp_path / "test_my_agent.py").write_text(blocks[0])
    env = {k: v for k, v in os.environ.items() if k not in ("TEMPORAL_ADDRESS", "REIN_MODEL", "PYTEST_ADDOPTS",
                                                            "PYTEST_XDIST_WORKER", "PYTEST_XDIST_TESTRUNUID")}
    done = subprocess.run(
        # -c /dev/null: no ini file, so pytest's (and pytest-asyncio's) defaults. -p no:phoenix: this venv
        # also has rein[test-otel], whose Phoenix plugin a user's rein[testing] does not install (~16 s).
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:phoenix", "-c", os.devnull,
         "--rootdir", str(tmp_path), "test_my_agent.py"],
        cwd=str(tmp_path), env=env, capture_output=True, text=True, timeout=240, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "1 passed" in done.stdout, done.stdout
