"""A patch id never changes meaning: a moved patch gets a new id.

Runs in flight (and every stored history) carry the patch ids of the build that recorded them.
If a constant's id changed, or an id came to guard other code, those runs would take the other
branch on replay: a nondeterminism error, or worse, a silent divergence. So every
`PATCH_* = "..."` constant under workflows/ must keep the id it had in the landed builds
(KNOWN below), ids are never reused, every id a workflow asks is a known constant, and every id
a stored history recorded is still known to the code.

Changing what a patch guards? Add a NEW constant with a new id, list it here, keep the old one.
"""

from __future__ import annotations

import ast
import base64
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORKFLOWS = ROOT / "workflows"
HISTORIES = ROOT / "tests" / "histories"

KNOWN = {
    "PATCH_THROTTLED_COUNTERS": "rein-throttled-counters",
    "PATCH_PROMPT_CANCEL": "rein-prompt-cancel",
    "PATCH_NATIVE_CANCEL": "rein-native-cancel",
    "PATCH_FAILED_STATUS": "rein-failed-status",
    "PATCH_TIMED_COUNTERS": "rein-timed-counters",
    "PATCH_FAMILY_USAGE": "rein-family-usage",  # 0.4.0: children report usage to the family budget
    "PATCH_DESCRIBED_FIRST": "rein-described-first",  # a new run that asked its agent first (the logic flag retired)
    "PATCH_WAITING_TIMER": "rein-waiting-timer",  # every wait on the UI's timer (the opt-in flag retired)
    "PATCH_THREAD_MEMO": "rein-thread-memo",  # a thread started by a stock tool marks itself
    "PATCH_CLIENT_TOOLS": "rein-client-tools",  # a thread turn's client tools (AG-UI frontend tools)
    "PATCH_INBOX": "rein-inbox",  # rules before a wait, the waiting memo, the webhook
    "PATCH_TURN_WAIT": "rein-turn-wait",  # a turn's waiter hears it past its own receipt (a steer into a wait)
    "PATCH_STOP_TURN": "rein-stop-turn",  # a thread's turn stopped (rein.stop_turn, a page's stop button)
    "PATCH_RECORDED_START": "rein-recorded-start",  # a run records how it started (rein.workflows.window)
    "PATCH_BOUND_DECISIONS": "rein-bound-decisions",  # a decision belongs to its batch (call ids repeat)
    "PATCH_CLIENT_PROVENANCE": "rein-client-provenance",  # a client's `rule`/`via` ignored
    "PATCH_RULES_REACH_RUNS": "rein-rules-reach-runs",  # ReinPolicy: an added rule told to the waiting runs
}
"""Patch constants as builds define them (f732bd2 and after): name -> id, never edited."""

PATCH_CALLS = ("patched", "deprecate_patch")


def _modules() -> list[tuple[Path, ast.Module]]:
    return [(path, ast.parse(path.read_text(), str(path))) for path in sorted(WORKFLOWS.rglob("*.py"))]


def patch_constants() -> dict[str, str]:
    """Every module-level `PATCH_* = "id"` under workflows/ (the same name in two modules must agree)."""
    found: dict[str, str] = {}
    for path, module in _modules():
        for node in module.body:
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(node.value, ast.Constant):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    if isinstance(target, ast.Name) and target.id.startswith("PATCH_"):
                        assert found.get(target.id, node.value.value) == node.value.value, (path, target.id)
                        found[target.id] = node.value.value
    return found


def patch_arguments() -> list[tuple[Path, ast.expr]]:
    """The argument of every workflow.patched(...) / workflow.deprecate_patch(...) call under workflows/."""
    calls = []
    for path, module in _modules():
        for node in ast.walk(module):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in PATCH_CALLS:
                calls.append((path, node.args[0]))
    return calls


def recorded_patch_ids() -> dict[str, set[str]]:
    """Patch ids in the stored histories' core_patch markers, by file."""
    recorded: dict[str, set[str]] = {}
    for path in sorted(HISTORIES.rglob("*.json")):
        data = json.loads(path.read_text())
        for event in data["events"] if isinstance(data, dict) else data:
            marker = event.get("markerRecordedEventAttributes")
            if marker and marker.get("markerName") == "core_patch":
                payload = marker["details"]["patch-data"]["payloads"][0]["data"]
                recorded.setdefault(path.name, set()).add(json.loads(base64.b64decode(payload))["id"])
    return recorded


def test_landed_patch_ids_keep_their_value():
    constants = patch_constants()
    for name, patch_id in KNOWN.items():
        assert name in constants, f"{name} ({patch_id!r}) was removed: histories that recorded it need it to replay"
        assert constants[name] == patch_id, (
            f"{name} changed from {patch_id!r} to {constants[name]!r}: a patch id never changes meaning; "
            "add a new constant with a new id instead")


def test_new_patch_ids_are_listed_and_never_reuse_an_id():
    constants = patch_constants()
    unlisted = sorted(set(constants) - set(KNOWN))
    assert not unlisted, f"list new patch constants in KNOWN (tests/test_patch_ids.py): {unlisted}"
    values = list(constants.values())
    assert len(values) == len(set(values)), f"two patch constants share an id: {constants}"


def test_workflows_ask_only_known_patch_constants():
    calls = patch_arguments()
    assert calls, "no workflow.patched/deprecate_patch call found: the scan is broken"
    for path, argument in calls:
        assert isinstance(argument, ast.Name) and argument.id in KNOWN, (
            f"{path.name}:{argument.lineno}: patch ids are named constants listed in KNOWN, got {ast.unparse(argument)}")


def test_every_recorded_patch_id_is_still_known():
    recorded = recorded_patch_ids()
    assert recorded, "no patch marker in tests/histories: the scan is broken"
    known = set(patch_constants().values())
    for name, ids in recorded.items():
        assert ids <= known, f"{name} recorded patch ids the code no longer knows: {sorted(ids - known)}"
