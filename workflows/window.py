"""The support window (docs/deploys.md): how the build that started a run did it, and f732bd2's two rules.

A run records in its first activation that this build's rules started it (rein-recorded-start: LEAN, the agent asked
first for a Session, continuation or thread), so this table never grows. A run without the marker is read by the
build id its first task recorded: temporalio's default (32 hex digits, rein before 39e2702) is ASKED since f732bd2,
else outside the window (OutsideWindow: the SDK cannot fail a run while replaying it); rein's digests below
(`python -m tests.support.build_ids 39e2702 8fdf44c` lists their commits) are ASKED or MARKED; anything else LEAN.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from enum import Enum
from typing import TYPE_CHECKING, Protocol

from temporalio import workflow

from rein.workflows.patches import PATCH_RECORDED_START

if TYPE_CHECKING:
    from rein.core.contract import AgentDescription

SUPPORT_DAYS, OLDEST_BUILD = 30, "f732bd2"
OLDEST_BUILD_AT = datetime(2026, 11, 30, 18, 51, 28, tzinfo=UTC)
TEMPORAL_DEFAULT = re.compile(r"[0-9a-f]{32}")
COUNTER_EVERY, COUNTER_SECONDS = 5, 10.0
"""f732bd2's counter rule (its runs replay with it, whatever this build's publishing uses)."""


class Start(Enum):
    LEAN, ASKED, MARKED = "lean", "asked", "marked"


ASKED_BUILDS = frozenset(f"rein-{d}" for d in """
    cb5bdaf308d6 44f0b41e8695 d3584ce9fee2 1b1ca2880900 38e8982a0d4e bf017fbe9653 8846831044b5 88972092fb0c
    88da5c2571d5 fdc13e71a13f""".split())
MARKED_BUILDS = frozenset(f"rein-{d}" for d in """
    cda172f54bae 20a9e6296942 038897ee70ad 2a0408dac05b 3d23bea92ba3 c2965d9faca8 5ee0c37d45b8 14a71611f6d5
    5b6c3e076ec8 17c44eb37832 e8fafa2d420b a3cf18daed05 87df60a4858d 6ee94e9d539a 8aa9540419b5 1bfaa8d5362f
    2c664b62a458 389e9fd4f8b4 990194a4e8cd 561d292a408d 7e2737b66ba1 2e4a0130b515 3fc7cf4aca61 f144e843cc34
    96b0c8769b59 aff634e1286d ee49e4ec5991 0dc893c989b6 7b004d4e0ee2 0467414ca9d0 50c6c4662303 6fec4af4b688
    a84cf7afba05 2ef1c8dbd98b 9e31ca675749 7f1cebfee9d7 fd547835f8c7 5a9da58e2953 13e2b77d89dc""".split())


class Started(Protocol):
    """The run as f732bd2's rules read it (rein.workflows.state, which imports this module, is one)."""

    first: Start
    agent: AgentDescription | None


class OutsideWindow(Exception):
    """A run this build cannot replay: it fails the workflow task (not the run) with one line saying why."""


def first_start() -> Start:
    """In the run's first activation, before any command: its recorded start, else its build id's."""
    if workflow.patched(PATCH_RECORDED_START):
        return Start.LEAN
    info = workflow.info()
    return start_of(info.get_current_build_id(), info.start_time)


def start_of(build_id: str, started: datetime) -> Start:
    """How the build whose id a run's first task recorded started it, for runs without the marker."""
    if TEMPORAL_DEFAULT.fullmatch(build_id):
        if started < OLDEST_BUILD_AT:
            raise OutsideWindow(
                f"this run was started on {started:%Y-%m-%d %H:%M} UTC by rein build {build_id} (a build from before "
                f"{OLDEST_BUILD}), older than this build's support window of {SUPPORT_DAYS} days (builds from "
                f"{OLDEST_BUILD} on, docs/deploys.md): finish it on a worker of the build that started it, or end it "
                "(temporal workflow terminate)")
        return Start.ASKED
    return Start.ASKED if build_id in ASKED_BUILDS else Start.MARKED if build_id in MARKED_BUILDS else Start.LEAN


# f732bd2's runs lack the flags later workers set: they refresh counters every COUNTER_EVERY iterations until they ask
# rein-timed-counters (rein.workflows.publishing), and a cancelled one closes COMPLETED. Retired with f732bd2.


def untimed_counters(run: Started) -> bool:
    return run.first is Start.ASKED and run.agent is not None and not run.agent.timed_counters


def closes_completed(run: Started) -> bool:
    return run.first is Start.ASKED and run.agent is not None and not run.agent.close_canceled
