"""The "temporal" runner (rein.blueprint.runners): what an Agent on the durable engine calls, runs
(rein.durable.engine) and threads (rein.durable.thread_runs)."""

from rein.durable.engine import cancel_session, resume_session, run_session, stream_run, stream_session
from rein.durable.thread_runs import send_to_thread, stream_thread

__all__ = ["cancel_session", "resume_session", "run_session", "send_to_thread", "stream_run", "stream_session",
           "stream_thread"]
