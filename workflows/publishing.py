"""Publishing: what a run shows the world (search attributes, current details, its status and outcome).

A collaborator of the loop, not a mixin: it reads the run's state and keeps its own (what it last
published). Each upsert is a history event and a visibility write, so only changed values are upserted,
and the counters (ReinIterations, ReinTokens) are refreshed now and then between status changes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from rein.core import machine, threads
    from rein.core.contract import FORK_MEMO, SEARCH_KEYS, RunOutcome, RunStatusView
    from rein.core.summaries import details_for

from rein.workflows import window
from rein.workflows.patches import PATCH_TIMED_COUNTERS

if TYPE_CHECKING:
    from rein.workflows.state import RunState

COUNTER_EVERY = 5
"""Iterations between ReinIterations/ReinTokens refreshes at most (and COUNTER_SECONDS between them)."""
COUNTER_SECONDS = 10.0
"""Workflow seconds between ReinIterations/ReinTokens refreshes while the status stays the same."""
INT64_MAX = 2**63 - 1

COUNTERS = frozenset({"ReinIterations", "ReinTokens", "ReinCostUsd"})
"""Refreshed now and then (with a status change, or when due), not on every iteration."""


class Publisher:
    """The run's status view and outcome, and publishing them where ops look."""

    def __init__(self, run: RunState) -> None:
        self.run = run
        self.published: dict[str, Any] = {}
        """Search attribute values as last upserted (or set at start)."""
        self.counters_at = workflow.time()
        """Workflow time of the last ReinIterations/ReinTokens upsert (or of the run's start)."""
        self.progressed = False
        """An iteration ended and its counters (or a status change) are not published yet."""
        self.details = ""
        """The current details as last set (the UI's summary of where the run is)."""
        self.timed_counters: bool | None = None
        """A run of f732bd2 (rein.workflows.window): workflow.patched(PATCH_TIMED_COUNTERS), once asked."""

    def status_view(self) -> RunStatusView:
        run = self.run
        child = run.child_wait[1] if run.child_wait is not None else None
        return RunStatusView(
            status=child.status if child else ("stuck" if run.stuck else run.status),
            stage=run.session.stage.value,
            iteration=run.session.iteration,
            usage=run.session.usage,
            interrupt=child.interrupt if child else run.interrupt,
            pending_tool_calls=child.pending_tool_calls if child else run.session.pending_tool_calls,
            stop_reason="interrupted" if child else run.session.stop_reason,
            pause=run.carry.pause,
            ignored_signals=run.carry.ignored_signals,
            first_step=run.first_step,
            continued_from=run.continued_from,
            stuck=run.stuck,
            turn=run.carry.thread.turns if run.carry.thread is not None else 0,
            wait=child.wait if child else run.interrupt.wait if run.interrupt is not None else None,
            waiting_on=child.waiting_on if child else self._waiting_on(),
        )

    def _waiting_on(self) -> list[str]:
        run = self.run
        if run.interrupt is None:
            return []
        return [c.id for c in machine.waiting_on(run.session, run.interrupt.type, run.answered_outside())]

    def outcome(self) -> RunOutcome:
        run = self.run
        interrupt = run.child_wait[1].interrupt if run.child_wait is not None else run.interrupt
        interrupted = interrupt is not None
        thread = run.carry.thread
        return RunOutcome(
            status="interrupted" if interrupted else "done",
            output=machine.run_output(run.session) if thread is None else threads.turn_output(run.session, thread),
            data=machine.run_data(run.session),
            usage=run.session.usage,
            elapsed_s=run.carry.active_s,
            stop_reason="interrupted" if interrupted else (run.session.stop_reason or "done"),
            interrupt=interrupt,
            run_id=run.workflow_id,
            iterations=run.session.iteration,
            step_count=run.first_step + len(run.steps),
            message_count=len(run.session.messages),
            turn=thread.turns if thread is not None else 0,
            turn_first_step=thread.turn_first_step if thread is not None else 0,
            diverged=run.what_if.diverged if run.what_if is not None else "",
        )

    def published_at_start(self) -> None:
        """Search attributes the client set at start (or the predecessor had) need no upsert."""
        attributes = workflow.info().typed_search_attributes
        for name, key in SEARCH_KEYS.items():
            value = attributes.get(key)
            if value is not None:
                self.published[name] = value

    def publish_progress(self, ending: bool = False) -> None:
        """Publish an iteration's progress, if any since the last time."""
        if self.progressed:
            self.progressed = False
            self.publish(ending)

    def finishing(self) -> None:
        """The loop ends: the last iteration's counters go with the final status, but in a run of f732bd2's
        where its rule published them on their own (rein.workflows.window)."""
        if self.progressed and window.untimed_counters(self.run) and not self._f732bd2_folds_final_publish():
            self.publish_progress(ending=True)

    def publish(self, ending: bool = False) -> None:
        """Tell visibility and the UI where the run is; upserts only the values that changed."""
        view = self.status_view()
        # Counters change every iteration; each upsert is a history event and a visibility
        # write, so between status changes they are refreshed now and then (`_counters_due`).
        if self._running_unpublished(view):  # nothing until due, then everything with the counters
            counters = workflow.time() - self.counters_at >= COUNTER_SECONDS
            updates, published = self.search_updates(view, True) if counters else ([], {})
        else:
            counters = self.published.get("ReinStatus") != view.status or self._counters_due(view, ending)
            updates, published = self.search_updates(view, counters)
        if updates:
            updates += self._version_update(published)
            workflow.upsert_search_attributes(updates)
            self.published.update(published)
            if counters:
                self.counters_at = workflow.time()
        self._set_details(view)

    def _set_details(self, view: RunStatusView) -> None:
        run, info = self.run, workflow.info()
        details = details_for(
            view,
            workflow_id=info.workflow_id,
            namespace=info.namespace,
            prompt=run.prompt,
            output=machine.last_assistant_text(run.session) if view.status in ("done", "cancelled", "idle") else None,
            last_ignored=run.last_ignored,
            fork=self._lineage(),
            model=(run.request.model or "") if run.request is not None else "",
        )
        if details != self.details:
            workflow.set_current_details(details)
            self.details = details

    def _running_unpublished(self, view: RunStatusView) -> bool:
        """A lean run a plain client started (no start-time search attributes) publishes `running` only
        once it has run COUNTER_SECONDS, with its counters: Temporal's ExecutionStatus says Running
        meanwhile, and a short run pays one upsert (its final status) instead of two."""
        return self.run.lean and "ReinStatus" not in self.published and view.status == "running"

    def _counters_due(self, view: RunStatusView, ending: bool) -> bool:
        """Refresh the counters now (the status is unchanged)? At most every COUNTER_EVERY iterations and
        COUNTER_SECONDS of workflow time; the last ones go with the final status."""
        if window.untimed_counters(self.run):
            return self._f732bd2_counters_due(view, ending)
        return view.iteration % COUNTER_EVERY == 0 and workflow.time() - self.counters_at >= COUNTER_SECONDS

    def _f732bd2_counters_due(self, view: RunStatusView, ending: bool) -> bool:
        """f732bd2's `_counters_due` (its runs keep it: rein.workflows.window): every window.COUNTER_EVERY
        iterations; since rein-timed-counters only when window.COUNTER_SECONDS have passed since the last refresh."""
        if view.iteration % window.COUNTER_EVERY:
            return False
        if workflow.time() - self.counters_at >= window.COUNTER_SECONDS:
            return True
        if len(self.search_updates(view, True)[0]) == len(self.search_updates(view, False)[0]):
            return True  # the counters are published already: both rules send the same
        if ending and self.timed_counters is None:
            return True  # the old rule's last refresh
        if self.timed_counters is None:
            self.timed_counters = workflow.patched(PATCH_TIMED_COUNTERS)
        return not self.timed_counters

    def _f732bd2_folds_final_publish(self) -> bool:
        """f732bd2's `_fold_final_publish`: whether the last iteration's progress goes with the final status in one upsert."""
        view = self.status_view()
        old_due = self.published.get("ReinStatus") != view.status or view.iteration % window.COUNTER_EVERY == 0
        if not self.search_updates(view, old_due)[0]:
            return True  # the old code published nothing here: the same commands either way
        return bool(self.timed_counters)

    def search_updates(self, view: RunStatusView, counters: bool) -> tuple[list[Any], dict[str, Any]]:
        """The search attribute updates that publish `view` (the counters only if `counters`)."""
        agent = self.run.agent
        wanted: dict[str, Any] = {
            "ReinAgent": (agent.name or None) if agent else None,
            "ReinStatus": view.status,
            "ReinIterations": view.iteration,
            "ReinTokens": view.usage.total_tokens,
            "ReinCostUsd": view.usage.cost_usd,
            # A child run inherits its parent's tenant (Temporal's fairness key), not its search attributes.
            "ReinTenant": workflow.info().priority.fairness_key or None,
        }
        available = set(agent.search_attributes) if agent else set()
        if not counters:
            available -= COUNTERS
        updates = [
            SEARCH_KEYS[name].value_set(min(value, INT64_MAX) if isinstance(value, int) else value)
            for name, value in wanted.items()
            if name in available and value is not None and self.published.get(name) != value
        ]
        return updates, {k: v for k, v in wanted.items() if k in available}

    def _lineage(self) -> dict[str, Any] | None:
        """A fork's lineage (rein.durable.fork puts it in the input's metadata as well as in its memo)."""
        request = self.run.request
        lineage = request.metadata.get(FORK_MEMO) if request is not None else None
        return lineage if isinstance(lineage, dict) else None

    def _version_update(self, published: dict[str, Any]) -> list[Any]:
        """ReinAgentVersion (the definition the run follows), only along with an upsert that happens
        anyway: at the start of a raw client's run, else at the next status change or counter refresh."""
        agent = self.run.agent
        version = agent.version if agent else ""
        if not version or "ReinAgentVersion" not in agent.search_attributes:  # type: ignore[union-attr]
            return []
        if self.published.get("ReinAgentVersion") == version:
            return []
        published["ReinAgentVersion"] = version
        return [SEARCH_KEYS["ReinAgentVersion"].value_set(version)]
