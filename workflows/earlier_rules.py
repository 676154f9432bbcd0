"""Two rules runs of f732bd2 followed, replayed as that build applied them (rein.workflows.window).

f732bd2 described its runs' agents first, and the description its workers recorded carries neither
flag later workers set (AgentDescription.timed_counters, close_canceled; builds between set one of them).
Without the first, a run refreshes its counters every COUNTER_EVERY iterations until it asks the patch
rein-timed-counters (where the old rule would send an upsert the new one does not); without the second, a
cancelled run closes COMPLETED with stop_reason `cancelled`. Every other run follows this build's rules.
Retired with f732bd2 when it leaves the window.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from temporalio import workflow

from rein.workflows.patches import PATCH_TIMED_COUNTERS
from rein.workflows.window import Start

if TYPE_CHECKING:
    from rein.core.contract import RunStatusView
    from rein.workflows.publishing import Publisher
    from rein.workflows.state import RunState

COUNTER_EVERY = 5
COUNTER_SECONDS = 10.0
"""f732bd2's values (its runs replay with them, whatever this build's publishing uses)."""


def untimed_counters(run: RunState) -> bool:
    """The run refreshes its counters by f732bd2's rule: described first by a worker that set no
    AgentDescription.timed_counters (f732bd2 and the builds up to that flag)."""
    return run.first is Start.ASKED and run.agent is not None and not run.agent.timed_counters


def closes_completed(run: RunState) -> bool:
    """A cancelled run closes COMPLETED: described first by a worker that set no AgentDescription.close_canceled."""
    return run.first is Start.ASKED and run.agent is not None and not run.agent.close_canceled


def counters_due(publisher: Publisher, view: RunStatusView, ending: bool) -> bool:
    """f732bd2's `_counters_due`: every COUNTER_EVERY iterations, and since rein-timed-counters only when
    COUNTER_SECONDS have passed since the last refresh."""
    if view.iteration % COUNTER_EVERY:
        return False
    if workflow.time() - publisher.counters_at >= COUNTER_SECONDS:
        return True
    if len(publisher.search_updates(view, True)[0]) == len(publisher.search_updates(view, False)[0]):
        return True  # the counters are published already: both rules send the same
    if ending and publisher.timed_counters is None:
        return True  # the old rule's last refresh
    if publisher.timed_counters is None:
        publisher.timed_counters = workflow.patched(PATCH_TIMED_COUNTERS)
    return not publisher.timed_counters


def folds_final_publish(publisher: Publisher) -> bool:
    """f732bd2's `_fold_final_publish`: whether the last iteration's progress goes with the final status
    in one upsert (else it is published first, on its own)."""
    view = publisher.status_view()
    old_due = publisher.published.get("ReinStatus") != view.status or view.iteration % COUNTER_EVERY == 0
    if not publisher.search_updates(view, old_due)[0]:
        return True  # the old code published nothing here: the same commands either way
    return bool(publisher.timed_counters)
