"""The eight places rein reaches into private parts of temporalio or the standard library, in one module.

Each has no public equivalent today; each is used for one reason given below. When a temporalio or
Python upgrade breaks one, this module is the only place to look.
"""

from __future__ import annotations

import dataclasses
import functools
import threading
from collections.abc import Callable
from typing import Any


def query_handler(instance: Any, name: str) -> Callable[..., Any]:
    """The query handler `name` of a workflow object (a history replayed in the caller answers queries
    without a worker: rein.temporal.history). temporalio keeps handler definitions in `_Definition`."""
    from temporalio import workflow

    definition = workflow._Definition.must_from_class(type(instance))
    fn = definition.queries[name].fn
    return lambda *args: fn(instance, *args)


def logic_flag(flag: int, set_now: bool) -> bool:
    """A version gate that records no event: temporalio's own workflow logic flags, which a workflow task
    carries in its completion's sdk_metadata (lang_used_flags) and a replay reads back for that task.
    True when the run's history carries `flag`, or when this first execution of the task sets it
    (`set_now`). `workflow.patched` records a marker and an upsert, two billable actions; a run's start
    must not pay them for the change that saves one (rein.workflows.start). Ask it in the run's first
    activation only: on replay, only the flags of tasks completed so far are known."""
    from temporalio import workflow

    instance: Any = workflow._Runtime.current()
    if flag in instance._current_internal_flags:
        return True
    if instance._is_replaying or not set_now:
        return False
    instance._current_completion.successful.used_internal_flags.append(flag)
    return True


def forget_default_runtime() -> None:
    """Drop temporalio's default Runtime at exit so its Rust core is freed before interpreter teardown
    (otherwise its threads may outlive the objects they use); the module-level reference is the only one."""
    from temporalio import runtime

    runtime._runtime_ref._default_runtime = None  # type: ignore[attr-defined]


def at_exit_before_threads_join(fn: Callable[[], None]) -> None:
    """Run `fn` when the interpreter starts to exit, before it joins non-daemon threads and shuts the
    default executors down: the engine's worker still needs them to finish. `atexit` runs too late."""
    threading._register_atexit(fn)  # type: ignore[attr-defined]


def stream_poll(stream: Any) -> tuple[str, Callable[..., Any], Callable[..., Any]]:
    """The workflow_streams contrib's long-poll Update of `stream` (a WorkflowStream): its name, handler
    and validator. rein.workflows.readers registers the same handler, counted, to know how many readers
    are attached; the contrib offers no hook for it. Pure: workflow code calls it."""
    from temporalio.contrib.workflow_streams import _stream

    return _stream._POLL, stream._on_poll, stream._validate_poll


def stream_log(stream: Any) -> tuple[list[Any], int]:
    """The retained items of a WorkflowStream and the offset of the first, read from a replayed
    workflow object (rein.temporal.history.stream_items: a closed run's stream with no worker to poll).
    The public `get_state()` needs a running workflow's clock; a finished replay has none."""
    return stream._log, stream._base_offset


def attached_otel_context(context: Any) -> Any:
    """The OpenTelemetry contrib's context manager that attaches `context` in workflow code and detaches
    it without the "Failed to detach context" noise of a workflow evicted mid-block (its docstring says
    why only it can tell). rein.tracing.workflow_spans opens run and child-tool spans with it."""
    from temporalio.contrib.opentelemetry._context import attached_context

    return attached_context(context)


def sandbox_without_context_round_trips(restrictions: Any) -> Any:
    """temporalio's workflow sandbox with `restrictions`, minus one `exec` per payload sequence.

    Before it encodes or decodes a workflow task's payloads (three passes each way, with or without
    a codec), the worker asks the workflow instance for each payload's serialization context, and the
    sandbox answers every such question by compiling and `exec`-ing a snippet under its import hooks:
    22 round trips per rein loop iteration, ~0.2 ms each, on the event loop thread between workflow
    tasks (bench/README.md, worker CPU). The answer is a lookup in the instance's pending commands
    that imports nothing, so this runner calls the sandboxed instance directly. The workflow's own
    code still runs only inside the sandbox; a custom `runner_class` keeps temporalio's instance."""
    from temporalio.worker import UnsandboxedWorkflowRunner
    from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

    runner = _direct_context_runner_class()(restrictions=restrictions)
    assert isinstance(runner, SandboxedWorkflowRunner) and runner.runner_class is UnsandboxedWorkflowRunner
    return runner


@functools.cache
def _direct_context_runner_class() -> type:
    from temporalio.worker import UnsandboxedWorkflowRunner
    from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, _runner

    class DirectContextInstance(_runner._Instance):
        def _in_sandbox(self) -> Any:
            return self.globals_and_locals["__temporal_in_sandbox"]  # the InSandbox that _create_instance made

        def get_serialization_context(self, command_info: Any) -> Any:
            return self._in_sandbox().get_serialization_context(command_info)

        def get_external_store_context(self, command_info: Any) -> Any:
            return self._in_sandbox().get_external_store_context(command_info)

    @dataclasses.dataclass(frozen=True)
    class DirectContextSandboxedWorkflowRunner(SandboxedWorkflowRunner):
        def create_instance(self, det: Any) -> Any:
            if self.runner_class is not UnsandboxedWorkflowRunner:
                return super().create_instance(det)
            return DirectContextInstance(det, self.runner_class, self.restrictions)

    return DirectContextSandboxedWorkflowRunner
