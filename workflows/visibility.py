"""What a run shows the world: search attributes, current details, the queries, the outcome.

Each upsert is a history event and a visibility write, so only changed values are upserted, and
the counters (ReinIterations, ReinTokens) are refreshed now and then between status changes.
"""

from __future__ import annotations

from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from rein.core import machine
    from rein.core.contract import FORK_MEMO, RECORD_QUERY, SEARCH_KEYS, RunOutcome, RunStatusView
    from rein.core.summaries import details_for

from rein.workflows.state import RunState

COUNTER_EVERY = 5
"""Iterations between ReinIterations/ReinTokens refreshes at most (and COUNTER_SECONDS between them)."""
COUNTER_SECONDS = 10.0
"""Workflow seconds between ReinIterations/ReinTokens refreshes while the status stays the same."""
PATCH_TIMED_COUNTERS = "rein-timed-counters"
"""Retired: its rule (counters refreshed by workflow time, the last ones with the final status) is the
only one; histories that carry its marker still replay (workflow.deprecate_patch, rein.workflows.loop)."""
INT64_MAX = 2**63 - 1

COUNTERS = frozenset({"ReinIterations", "ReinTokens", "ReinCostUsd"})
"""Refreshed now and then (with a status change, or when due), not on every iteration."""

class Visibility(RunState):
    """Queries, the outcome, and publishing the run's status where ops look."""

    @workflow.query(name="status", description="status, stage, iteration, usage, interrupt, pending_tool_calls, stop_reason")
    def status_query(self) -> dict[str, Any]:
        return self._status_view().model_dump(mode="json")

    @workflow.query(name="session", description="The run's Session (conversation and loop state)")
    def session_query(self) -> dict[str, Any]:
        return self.session.model_dump(mode="json")

    @workflow.query(
        name="steps",
        description="The Step records this run made, from index `start` (earlier runs of a "
        "continue-as-new chain hold earlier steps; see status.first_step and status.continued_from)",
    )
    def steps_query(self, start: int = 0) -> list[dict[str, Any]]:
        return [s.model_dump(mode="json") for s in self.steps if s.index >= start]

    @workflow.query(name=RECORD_QUERY, description="rein's client: the session, status and steps queries' answers in one")
    def record_query(self, start: int = 0) -> dict[str, Any]:
        return {"session": self.session_query(), "status": self.status_query(), "steps": self.steps_query(start)}

    @workflow.query(name="outcome", description="The ended run's result (a run closed as CANCELED returns none)")
    def outcome_query(self) -> dict[str, Any] | None:
        return self.final.model_dump(mode="json") if self.final is not None else None

    def _status_view(self) -> RunStatusView:
        child = self.child_wait[1] if self.child_wait is not None else None
        return RunStatusView(
            status=child.status if child else ("stuck" if self.stuck else self.status),
            stage=self.session.stage.value,
            iteration=self.session.iteration,
            usage=self.session.usage,
            interrupt=child.interrupt if child else self.interrupt,
            pending_tool_calls=child.pending_tool_calls if child else self.session.pending_tool_calls,
            stop_reason="interrupted" if child else self.session.stop_reason,
            pause=self.carry.pause,
            ignored_signals=self.carry.ignored_signals,
            first_step=self.first_step,
            continued_from=self.continued_from,
            stuck=self.stuck,
            turn=self.carry.thread.turns if self.carry.thread is not None else 0,
        )

    def _outcome(self) -> RunOutcome:
        interrupt = self.child_wait[1].interrupt if self.child_wait is not None else self.interrupt
        interrupted = interrupt is not None
        return RunOutcome(
            status="interrupted" if interrupted else "done",
            output=machine.run_output(self.session),
            data=machine.run_data(self.session),
            usage=self.session.usage,
            elapsed_s=self.carry.active_s,
            stop_reason="interrupted" if interrupted else (self.session.stop_reason or "done"),
            interrupt=interrupt,
            run_id=workflow.info().workflow_id,
            iterations=self.session.iteration,
            step_count=self.first_step + len(self.steps),
            message_count=len(self.session.messages),
            turn=self.carry.thread.turns if self.carry.thread is not None else 0,
            turn_first_step=self.carry.thread.turn_first_step if self.carry.thread is not None else 0,
            diverged=self.what_if.diverged if self.what_if is not None else "",
        )

    def _published_at_start(self) -> None:
        """Search attributes the client set at start (or the predecessor had) need no upsert."""
        attributes = workflow.info().typed_search_attributes
        for name, key in SEARCH_KEYS.items():
            value = attributes.get(key)
            if value is not None:
                self.published[name] = value

    def _publish_progress(self) -> None:
        if self.progressed:
            self.progressed = False
            self._publish()

    def _running_unpublished(self, view: RunStatusView) -> bool:
        """A lean run a plain client started (no start-time search attributes) publishes `running` only
        once it has run COUNTER_SECONDS, with its counters: Temporal's ExecutionStatus says Running
        meanwhile, and a short run pays one upsert (its final status) instead of two."""
        return self.lean and "ReinStatus" not in self.published and view.status == "running"

    def _counters_due(self, view: RunStatusView) -> bool:
        """Refresh the counters now (the status is unchanged)? At most every COUNTER_EVERY iterations and
        COUNTER_SECONDS of workflow time; the last ones go with the final status."""
        return view.iteration % COUNTER_EVERY == 0 and workflow.time() - self.counters_at >= COUNTER_SECONDS

    def _search_updates(self, view: RunStatusView, counters: bool) -> tuple[list[Any], dict[str, Any]]:
        """The search attribute updates that publish `view` (the counters only if `counters`)."""
        wanted: dict[str, Any] = {
            "ReinAgent": (self.agent.name or None) if self.agent else None,
            "ReinStatus": view.status,
            "ReinIterations": view.iteration,
            "ReinTokens": view.usage.total_tokens,
            "ReinCostUsd": view.usage.cost_usd,
            # A child run inherits its parent's tenant (Temporal's fairness key), not its search attributes.
            "ReinTenant": workflow.info().priority.fairness_key or None,
        }
        available = set(self.agent.search_attributes) if self.agent else set()
        if not counters:
            available -= COUNTERS
        updates = [
            SEARCH_KEYS[name].value_set(min(value, INT64_MAX) if isinstance(value, int) else value)
            for name, value in wanted.items()
            if name in available and value is not None and self.published.get(name) != value
        ]
        return updates, {k: v for k, v in wanted.items() if k in available}

    def _lineage(self) -> dict[str, Any] | None:
        """A fork's lineage (rein.ops.fork puts it in the input's metadata as well as in its memo)."""
        lineage = self.request.metadata.get(FORK_MEMO) if self.request is not None else None
        return lineage if isinstance(lineage, dict) else None

    def _version_update(self, published: dict[str, Any]) -> list[Any]:
        """ReinAgentVersion (the definition the run follows), only along with an upsert that happens
        anyway: at the start of a raw client's run, else at the next status change or counter refresh."""
        version = self.agent.version if self.agent else ""
        if not version or "ReinAgentVersion" not in self.agent.search_attributes:  # type: ignore[union-attr]
            return []
        if self.published.get("ReinAgentVersion") == version:
            return []
        published["ReinAgentVersion"] = version
        return [SEARCH_KEYS["ReinAgentVersion"].value_set(version)]

    def _publish(self) -> None:
        """Tell visibility and the UI where the run is; upserts only the values that changed."""
        view = self._status_view()
        # Counters change every iteration; each upsert is a history event and a visibility
        # write, so between status changes they are refreshed now and then (`_counters_due`).
        if self._running_unpublished(view):  # nothing until due, then everything with the counters
            counters = workflow.time() - self.counters_at >= COUNTER_SECONDS
            updates, published = self._search_updates(view, True) if counters else ([], {})
        else:
            counters = self.published.get("ReinStatus") != view.status or self._counters_due(view)
            updates, published = self._search_updates(view, counters)
        if updates:
            updates += self._version_update(published)
            workflow.upsert_search_attributes(updates)
            self.published.update(published)
            if counters:
                self.counters_at = workflow.time()
        info = workflow.info()
        details = details_for(
            view,
            workflow_id=info.workflow_id,
            namespace=info.namespace,
            prompt=self.prompt,
            output=machine.last_assistant_text(self.session) if view.status in ("done", "cancelled", "idle") else None,
            last_ignored=self.last_ignored,
            fork=self._lineage(),
            model=(self.request.model or "") if self.request is not None else "",
        )
        if details != self.details:
            workflow.set_current_details(details)
            self.details = details
