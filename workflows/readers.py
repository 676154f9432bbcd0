"""Who reads the run's stream right now, known without a history event of rein's own.

Every attached reader (ReinClient.stream, `rein watch`, Agent.astream, A2A) keeps one long-poll
Update of the workflow_streams contrib in flight: the poll returns when items arrive and the
reader polls again at once. Counting the polls in flight is therefore a count of readers. The
model call reads it when it is scheduled (a reader already there: publish live from the start)
and the model activity asks for it with the READERS_QUERY while the model answers (a query is
no history event), so text goes into history only while someone reads it.

A reader that went away leaves its last poll in flight until the next item is published: at
most the model call in flight then is published for nobody.
"""

from __future__ import annotations

from temporalio import workflow
from temporalio.contrib.workflow_streams import PollInput, PollResult, WorkflowStream

with workflow.unsafe.imports_passed_through():
    from rein.temporal.sdk_private import stream_poll


class StreamReaders:
    """Wraps the contrib's poll Update handler to count the polls in flight."""

    def __init__(self, stream: WorkflowStream) -> None:
        self.polls = 0
        name, self._on_poll, validator = stream_poll(stream)
        # Same handler and validator, only counted: the Update's result and the run's commands
        # are unchanged, so histories recorded before this replay as they were.
        workflow.set_update_handler(name, self._poll, validator=validator)

    async def _poll(self, payload: PollInput) -> PollResult:
        self.polls += 1
        try:
            return await self._on_poll(payload)
        finally:
            self.polls -= 1
