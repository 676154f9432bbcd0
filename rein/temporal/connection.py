"""Where rein connects: the one place that reads Temporal connection settings.

Settings come from `temporalio.envconfig`: the profile (`TEMPORAL_PROFILE`, default
"default") of the TOML config file (`TEMPORAL_CONFIG_FILE`, default
~/.config/temporalio/temporal.toml), overridden by `TEMPORAL_ADDRESS`, `TEMPORAL_NAMESPACE`,
`TEMPORAL_API_KEY`, `TEMPORAL_TLS*` and `TEMPORAL_GRPC_META_*`, and finally by explicit
`address=` / `namespace=` arguments (the CLI's `--address` / `--namespace`).

No address anywhere: the shared embedded server (`rein.durable.embedded_server.ensure_embedded`), whose
state lives in REIN_HOME, so runs outlive the process and every rein process sees them.
The engine, `worker.py`, `rein.client.connect()` and the CLI all connect through here, with
rein's one data converter and rein's one temporalio Runtime (`core_runtime`: the core's own warnings,
"Workflow task not found", "Activity not found on completion", what the core retries or a client already
reports, reach a terminal only when asked for).
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from temporalio.client import Client
from temporalio.envconfig import ClientConfigProfile
from temporalio.service import RPCError

if TYPE_CHECKING:
    from temporalio.runtime import Runtime

DEFAULT_NAMESPACE = "default"
EMBEDDED_READY_S = 30.0


@dataclass(frozen=True)
class Target:
    """A resolved connection: where, which namespace, and the rest of Client.connect's settings."""

    address: str
    namespace: str
    embedded: bool
    """True when `address` is the shared embedded server of REIN_HOME."""
    options: dict[str, Any] = field(default_factory=dict)
    """api_key, tls, rpc_metadata from the profile (never logged: may hold a secret)."""

    def __repr__(self) -> str:  # options may carry an API key
        return f"Target(address={self.address!r}, namespace={self.namespace!r}, embedded={self.embedded})"


def settings(address: str | None = None, namespace: str | None = None, *, profile: str | None = None) -> Target | None:
    """The configured connection, or None when no address is configured (the embedded default)."""
    found, chosen, options = _load(address, namespace, profile)
    return Target(found, chosen, embedded=False, options=options) if found else None


def resolve(address: str | None = None, namespace: str | None = None, *, profile: str | None = None) -> Target:
    """The configured connection, else the embedded server (started and healthy). Blocking."""
    found, chosen, options = _load(address, namespace, profile)
    if found:
        return Target(found, chosen, embedded=False, options=options)
    from rein.durable.embedded_server import ensure_embedded

    return Target(ensure_embedded(), chosen, embedded=True)


def _load(address: str | None, namespace: str | None, profile: str | None) -> tuple[str | None, str, dict[str, Any]]:
    try:
        options: dict[str, Any] = dict(ClientConfigProfile.load(profile=profile).to_client_connect_config())
    except Exception as exc:  # a broken config file or an unknown profile: say which
        raise ValueError(f"Temporal connection settings could not be read: {exc}") from None
    found = address or options.get("target_host")
    chosen = namespace or options.get("namespace") or DEFAULT_NAMESPACE
    options = {k: v for k, v in options.items() if k not in ("target_host", "namespace")}
    return found, chosen, options


async def connect(
    address: str | None = None,
    namespace: str | None = None,
    *,
    profile: str | None = None,
    target: Target | None = None,
    **client_kwargs: Any,
) -> Client:
    """A Client with rein's data converter, connected where the settings say (or embedded).

    `client_kwargs` go to `Client.connect` (for example `plugins=[...]`, or `identity=person()`: the CLI's and
    `rein.client.connect()`'s clients are the person's; a worker's keeps temporalio's `PID@HOST`).
    """
    from rein.temporal.converter import rein_data_converter

    free_core_at_exit()
    if target is None:
        target = await asyncio.to_thread(resolve, address, namespace, profile=profile)
    client_kwargs.setdefault("data_converter", rein_data_converter())
    client_kwargs.setdefault("runtime", core_runtime())
    if not target.embedded:
        return await Client.connect(target.address, namespace=target.namespace, **target.options, **client_kwargs)
    return await _connect_embedded(target, client_kwargs)


async def _connect_embedded(target: Target, client_kwargs: dict[str, Any]) -> Client:
    """Connect once the embedded server's workflow service answers (it may still be warming up)."""
    from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest

    deadline = asyncio.get_running_loop().time() + EMBEDDED_READY_S
    while True:
        try:
            client = await Client.connect(target.address, namespace=target.namespace, **client_kwargs)
            await client.workflow_service.describe_namespace(DescribeNamespaceRequest(namespace=target.namespace))
            return client
        except (RPCError, RuntimeError):  # e.g. "Frontend is not healthy yet", or a refused connection
            if asyncio.get_running_loop().time() > deadline:
                raise
            await asyncio.sleep(0.1)


def core_runtime() -> Runtime:
    """rein's temporalio Runtime (one per process, made on first use): temporalio's defaults, but the core's own
    warnings are printed only under --debug / REIN_DEBUG=1 (its errors always). The core prints them itself: no
    log line is forwarded through Python, which a process at exit may no longer be able to take. A client of
    your own (`connect(runtime=...)`) keeps its own Runtime."""
    global _runtime
    with _making:  # the engine's thread and the caller's may connect at once
        if _runtime is None:
            from temporalio.runtime import LoggingConfig, Runtime, TelemetryConfig, TelemetryFilter

            from rein.core.log import debug_enabled

            level = "WARN" if debug_enabled() else "ERROR"
            _runtime = Runtime(telemetry=TelemetryConfig(logging=LoggingConfig(
                filter=TelemetryFilter(core_level=level, other_level="ERROR"))))
        return _runtime


def free_core_at_exit() -> None:
    """Free temporalio's core (clients, its Rust runtime) at exit, while the interpreter is alive.

    Left to interpreter teardown, the core's threads may call into Python while it finalizes,
    which aborts a process that has done its work (exit 134, `PyGILState_Release`, upstream
    sdk-python#300): 12 of 40 short scripts here, 0 of 40 with this hook. atexit hooks run after
    threading's (the engine's close), so workers are shut down by then.
    """
    global _core_hook
    if _core_hook:
        return
    _core_hook = True
    import atexit

    def free() -> None:
        import gc

        from rein.temporal.sdk_private import forget_default_runtime

        global _runtime
        _runtime = None
        forget_default_runtime()
        gc.collect()

    atexit.register(free)


_core_hook = False
_runtime: Runtime | None = None
_making = threading.Lock()
