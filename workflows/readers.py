"""Who reads the run's stream right now, known without a history event of rein's own.

Every attached reader (ReinClient.stream, `rein watch`, Agent.astream, A2A) keeps one long-poll
Update of the workflow_streams contrib in flight: the poll returns when items arrive and the
reader polls again at once. Counting the polls in flight is therefore a count of readers. The
model call reads it when it is scheduled (a reader already there: publish live from the start)
and the model activity asks for it with the READERS_QUERY while the model answers (a query is
no history event), so text goes into history only while someone reads it.

A reader that went away leaves its last poll in flight until the next item is published: at
most the model call in flight then is published for nobody.

Public SDK only: the contrib's poll Update is looked up by its documented name
(`WorkflowStream.detach_pollers`) with `workflow.get_update_handler`, and registered again, counted,
with a validator that refuses new polls once the run detached them, as the contrib's own does.
"""

from __future__ import annotations

from temporalio import workflow
from temporalio.contrib.workflow_streams import PollInput, PollResult, WorkflowStream
from temporalio.exceptions import ApplicationError

POLL_UPDATE = "__temporal_workflow_stream_poll"
"""The contrib's long-poll Update, as its public docs name it (WorkflowStream.detach_pollers)."""
OFFSET_QUERY = "__temporal_workflow_stream_offset"
"""The contrib's query of the stream's global offset (its log's end), as its public docs name it."""
STREAM_DRAINING = "StreamDraining"
"""The error type a reader retries on: the run is handing its stream over (the contrib's well-known type)."""


class StreamReaders:
    """The stream's poll Update handler, counted."""

    def __init__(self, stream: WorkflowStream) -> None:
        self.polls = 0
        self._stream = stream
        self._detached = False
        self._offset = workflow.get_query_handler(OFFSET_QUERY)
        """Taken here, in the workflow's context: a query of a replayed history runs outside it."""
        on_poll = workflow.get_update_handler(POLL_UPDATE)
        assert on_poll is not None, "WorkflowStream registers its poll Update when it is made"
        self._on_poll = on_poll
        # The same handler, only counted: the Update's result and the run's commands are unchanged,
        # so histories recorded before this replay as they were.
        workflow.set_update_handler(POLL_UPDATE, self._poll, validator=self._validate)

    async def _poll(self, payload: PollInput) -> PollResult:
        self.polls += 1
        try:
            return await self._on_poll(payload)
        finally:
            self.polls -= 1

    def _validate(self, payload: PollInput) -> None:
        if self._detached:
            raise ApplicationError("the run's stream readers are detached (it ends or continues as new)",
                                   type=STREAM_DRAINING)

    def offset(self) -> int:
        """The stream's global offset now: the next item published goes there (the contrib's own offset query)."""
        return int(self._offset()) if self._offset is not None else 0

    def detach(self) -> None:
        """Release the waiting readers and refuse new polls: the run closes."""
        self._detached = True
        self._stream.detach_pollers()
