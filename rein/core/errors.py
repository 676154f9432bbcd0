"""What rein's clients raise for expected failures, and how a bad input reads: each says it all in one line
(rein.core.log prints it so). Pure: workflow code uses `validation_text` too."""

from __future__ import annotations

from typing import Any


def validation_text(err: Exception, whole: str = "value", limit: int = 300) -> str:
    """A pydantic ValidationError in one line, `where: what; where: what` (`whole` names an error about
    the entire input; "": such an error says only what); any other error's own text. Cut at `limit` characters."""
    from pydantic import ValidationError

    if isinstance(err, ValidationError):
        said = []
        for e in err.errors():
            where = ".".join(str(p) for p in e["loc"]) or whole
            said.append(f"{where}: {error_text(e)}" if where else error_text(e))
        return "; ".join(said)[:limit]
    return str(err)[:limit]


def error_text(error: Any) -> str:
    """One pydantic error's message in rein's words: a check of rein's own says its sentence, without pydantic's
    "Value error, " (or "Assertion failed, ") in front of it."""
    raised = (error.get("ctx") or {}).get("error") if error.get("type") in ("value_error", "assertion_error") else None
    return str(raised) if raised is not None and str(raised) else str(error.get("msg", ""))


class RunFailed(RuntimeError):
    """A durable run ended in failure, for example a non-retryable model error.

    The original exception lives in the worker that raised it (maybe another process); what
    reaches the caller is its type name (`error_type`, e.g. the provider's `AuthenticationError`)
    and its message, secrets scrubbed.
    """

    def __init__(self, run_id: str, error_type: str, message: str):
        super().__init__(f"run {run_id} failed: {message}")
        self.run_id = run_id
        self.error_type = error_type
        self.message = message


class DecisionRejected(ValueError):
    """The run rejected a decision (approve/deny/answer/retry/cancel) that does not fit its state."""


class NoWorker(RuntimeError):
    """No worker serves the run's task queue, so the decision was not sent.

    A decision is an Update a worker must accept; one sent with no worker would wait on the
    server and could be applied whenever a worker starts, long after the caller gave up. So
    nothing is sent: start a worker and decide again (the CLI's `--wait` waits for one).
    """


class CodecKeyError(ValueError):
    """REIN_CODEC_KEY is malformed, or a payload was encrypted with a key this process lacks."""
