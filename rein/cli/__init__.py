"""`rein`: the operator's command line (typer + rich).

    rein server                                   the Temporal dev server with rein's search attributes and the UI
    rein worker --agent examples.calculator:agent serve agents' runs
    rein start calculator "what is 2+3?"          start a run (served by a worker)
    rein run examples.calculator:agent "2+3?"     run an agent here, live, asking at the terminal
    rein list | show ID | status ID | result ID | watch ID
    rein approve ID | deny ID | answer ID TEXT | retry ID | cancel ID
    rein send THREAD "hi" --agent NAME [--mode steer]  a message to a conversation thread (starts it)
    rein threads | watch THREAD                   conversation threads; follow one across its turns
    rein schedule create ID --agent A --prompt P --every 1h | list | describe | pause | trigger | delete
    rein deployment status | set-current BUILD   Worker Versioning (docs/deploys.md)
    rein trace ID | --since 1d                    send finished runs' traces to OTEL_EXPORTER_OTLP_ENDPOINT
    rein codec-server                             let the UI decrypt payloads (REIN_CODEC_KEY)
    rein serve [--port 8000]                      rein's web surfaces: the AG-UI endpoint at /agui/AGENT
    rein new my-agent                             create a new agent project
    rein replay --since 7d | FILE...              replay histories against this build (the CI gate)
    rein history export ID -o FILE                save a run's history
    rein limits set --model openai/gpt-4o --rps 10  a provider's rate limit, tenants' weights (docs/fleet.md)
    rein usage --since 24h                        spend per tenant and per agent
    rein eval --agent new:agent --since 7d --fail-under 0.95  replay recorded runs against a changed agent

`rein.cli.app` holds the typer app and the shared helpers; each command group is a module that
decorates `app`. A new group is one module plus one line in the import below.
Every error is one line on stderr and a non-zero exit code (see EXIT_CODES);
`--debug` (anywhere on the line, or REIN_DEBUG=1) adds the traceback.
"""

# The command groups: importing one registers its commands on `app` (one line per module).
from rein.cli import (
    codec,  # noqa: F401
    decisions,  # noqa: F401
    deploy,  # noqa: F401
    evals,  # noqa: F401
    fleet,  # noqa: F401
    fork,  # noqa: F401
    inspect_runs,  # noqa: F401
    replay,  # noqa: F401
    run,  # noqa: F401
    runs,  # noqa: F401
    scaffold,  # noqa: F401
    schedules,  # noqa: F401
    serve,  # noqa: F401
    server_command,  # noqa: F401
    threads,  # noqa: F401
    trace,  # noqa: F401
    worker_command,  # noqa: F401
)
from rein.cli.app import (
    EXIT_CANCELLED,
    EXIT_CODES,
    EXIT_ERROR,
    EXIT_INTERRUPTED,
    EXIT_NEEDS_PERSON,
    EXIT_NO_WORKER,
    EXIT_NOT_FOUND,
    EXIT_OK,
    EXIT_REJECTED,
    EXIT_RUN_FAILED,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    CliError,
    entry,
    main,
)

__all__ = [
    "EXIT_CANCELLED", "EXIT_CODES", "EXIT_ERROR", "EXIT_INTERRUPTED", "EXIT_NEEDS_PERSON", "EXIT_NO_WORKER", "EXIT_NOT_FOUND", "EXIT_OK",
    "EXIT_REJECTED", "EXIT_RUN_FAILED", "EXIT_UNREACHABLE", "EXIT_USAGE", "CliError", "entry", "main",
]
