"""rein's logger: silent unless enabled; never logs arguments, results or message text."""

from __future__ import annotations

import json
import logging
import sys
from typing import IO

logger = logging.getLogger("rein")
logger.addHandler(logging.NullHandler())

_RESERVED = set(logging.makeLogRecord({}).__dict__) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    """One JSON object per line, with the record's `extra` fields at top level."""

    def format(self, record: logging.LogRecord) -> str:
        data = {
            "ts": self.formatTime(record),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in record.__dict__.items():
            if key not in _RESERVED and not key.startswith("_"):
                data[key] = value
        if record.exc_info:
            data["exc"] = self.formatException(record.exc_info)
        return json.dumps(data, ensure_ascii=False, default=str)


def enable_logging(level: str | int = "INFO", *, json: bool = False, stream: IO[str] | None = None) -> None:
    """Send rein's records to `stream` (stderr) at `level`, as text or one JSON object per line."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(
        JsonFormatter() if json else logging.Formatter("%(asctime)s [%(levelname)s] rein: %(message)s")
    )
    logger.addHandler(handler)
    logger.setLevel(level)
    logger.propagate = False


def disable_logging() -> None:
    """Remove the handlers enable_logging added; records propagate to the root logger again."""
    for handler in list(logger.handlers):
        if not isinstance(handler, logging.NullHandler):
            logger.removeHandler(handler)
    logger.propagate = True


def debug_enabled() -> bool:
    """`--debug` on the command line or REIN_DEBUG=1: tracebacks for expected failures too (False while a
    setting holds a bad value: that error is told as its own line)."""
    from rein import settings  # here: importing rein's logger loads no pydantic

    try:
        return settings.current().debug
    except settings.SettingsError:
        return False


class ExpectedActivityFailures(logging.Filter):
    """One line, not a traceback, when one of rein's activities fails the way rein meant it to.

    temporalio logs every failed activity attempt with its traceback ("Completing activity as
    failed"). rein's activities raise ApplicationError for what is expected (a missing API key,
    a vendor outage, an unknown agent), with a message that already says what happened; the
    traceback is only noise there. Any other exception from a rein activity is a bug and keeps it,
    as do other activities' failures and everything with REIN_DEBUG set.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info is None or debug_enabled():
            return True
        info = getattr(record, "temporal_activity", None) or {}
        kind = str(info.get("activity_type", ""))
        error = record.exc_info[1]
        from temporalio.exceptions import ApplicationError

        if not kind.startswith("rein.") or not isinstance(error, ApplicationError):
            return True
        what = "not retried" if error.non_retryable else f"attempt {info.get('attempt', '?')}, retried while attempts remain"
        if error.non_retryable:  # the run's caller hears of it (a failed run, an error interrupt): INFO here
            record.levelno, record.levelname = logging.INFO, logging.getLevelName(logging.INFO)
        record.msg = "%s failed (%s, %s): %s"
        record.args = (kind, error.type or "ApplicationError", what, " ".join(error.message.split()))
        record.exc_info = None
        record.exc_text = None
        return True


_FILTER = ExpectedActivityFailures()


def quiet_expected_failures() -> None:
    """Install ExpectedActivityFailures on temporalio's activity logger (once per process)."""
    activity_logger = logging.getLogger("temporalio.activity")
    if _FILTER not in activity_logger.filters:
        activity_logger.addFilter(_FILTER)


def expected_failure(error: BaseException) -> bool:
    """A failure rein reports with a message that says it all (a run failed, no worker, a rejected decision, a missing key)."""
    from rein.core.errors import CodecKeyError, DecisionRejected, NoWorker, RunFailed
    from rein.settings import SettingsError

    return isinstance(error, (RunFailed, NoWorker, DecisionRejected, CodecKeyError, SettingsError))


def install_excepthook() -> None:
    """A script that dies of an expected failure prints one line, not a traceback (REIN_DEBUG=1: the traceback)."""
    previous = sys.excepthook
    if getattr(previous, "rein", False):
        return

    def hook(kind: type[BaseException], error: BaseException, traceback: object) -> None:
        if debug_enabled() or not expected_failure(error):
            previous(kind, error, traceback)  # type: ignore[arg-type]
            return
        print(f"rein: {' '.join(str(error).split())} (REIN_DEBUG=1 shows the traceback)", file=sys.stderr)

    hook.rein = True  # type: ignore[attr-defined]
    sys.excepthook = hook
