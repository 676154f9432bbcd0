"""The options AgentWorkflow gives rein's activities, defined once for the loop and for worker steps.

Timeouts and retry policies are not part of a history's command sequence, but what a run waits for
and how often it retries is the contract users tune through LoopConfig and `@tool(retries=, timeout_s=)`.
"""

from __future__ import annotations

from collections.abc import Awaitable
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError, FailureError

with workflow.unsafe.imports_passed_through():
    from rein.core.config import LoopConfig
    from rein.core.contract import DESCRIBE_AGENT, MAX_SECONDS, AgentDescription, DescribeInput

HEARTBEAT = timedelta(seconds=LoopConfig().heartbeat_timeout_s)
TOOL_TIMEOUT = timedelta(minutes=5)
DESCRIBE_TIMEOUT = timedelta(seconds=30)


def describe_agent(agent: str, summary: str) -> Awaitable[AgentDescription]:
    """The describe_agent local activity, the same wherever a workflow asks it: a run's start, a run
    that failed before it knew its agent (`agent=""`: only the search attributes), ReinDescribeAgent."""
    return workflow.execute_local_activity(
        DESCRIBE_AGENT,
        DescribeInput(agent=agent),
        result_type=AgentDescription,
        start_to_close_timeout=DESCRIBE_TIMEOUT,
        retry_policy=RetryPolicy(maximum_attempts=3, non_retryable_error_types=["UnknownAgent"]),
        summary=summary,
    )


def seconds(value: float) -> timedelta:
    """A duration Temporal can hold; an absurd configured value is capped, not a crash."""
    return timedelta(seconds=min(max(float(value), 0.001), MAX_SECONDS))


def heartbeat_timeout(config: LoopConfig | None, cap: timedelta | None = None) -> timedelta:
    """How long a call may go without a heartbeat (`heartbeat_timeout_s`), at most `cap` (a tool's
    own timeout). An option of the ScheduleActivityTask command, not part of the command sequence."""
    beat = seconds(config.heartbeat_timeout_s) if config is not None else HEARTBEAT
    return min(beat, cap) if cap is not None else beat


MODEL_RETRY_MAX = timedelta(seconds=30)


def model_retry(config: LoopConfig) -> RetryPolicy:
    """Transient model errors are retried by Temporal (litellm's own retries are off), first after
    `model_retry_interval_s`. An option of the command, not part of the command sequence."""
    first = seconds(config.model_retry_interval_s)
    return RetryPolicy(
        initial_interval=first,
        backoff_coefficient=2.0,
        maximum_interval=max(first, MODEL_RETRY_MAX),
        maximum_attempts=config.model_attempts,
    )


def tool_retry(retries: int) -> RetryPolicy:
    """A raising tool is retried only `retries` times (the activity decides); two more attempts
    cover a worker lost mid-call."""
    return RetryPolicy(
        initial_interval=timedelta(seconds=1),
        maximum_interval=timedelta(seconds=30),
        maximum_attempts=retries + 3,
    )


def failure_detail(err: BaseException) -> str:
    """What went wrong, in the words of the error at the bottom of a Temporal failure chain."""
    cause = getattr(err, "cause", None)
    return cause.message if isinstance(cause, ApplicationError) else str(cause or err)


def fail_if_final(err: ActivityError, what: str, kind: str) -> None:
    """Raise, failing the run, when the activity failed with a non-retryable error."""
    cause = err.cause
    if isinstance(cause, ApplicationError) and cause.non_retryable:
        raise ApplicationError(
            f"{what} failed and cannot be retried: {cause.message}", type=cause.type or kind, non_retryable=True
        ) from None


def final_error(err: FailureError) -> ApplicationError:
    """An activity that failed for good (e.g. describe_agent), as the run's own failure."""
    cause = getattr(err, "cause", None)
    kind = cause.type if isinstance(cause, ApplicationError) else type(err).__name__
    return ApplicationError(failure_detail(err), type=kind or "RunFailed", non_retryable=True)


