"""Every command group of `rein`: importing this registers them all on `rein.cli.app.app`.

A new group is one module plus one line here.
"""

from rein.cli import (  # noqa: F401  (each import registers its commands on `app`)
    codec,
    config_command,
    decisions,
    deploy,
    evals,
    fleet,
    fork,
    inbox,
    inspect_runs,
    policy,
    replay,
    run,
    runs,
    scaffold,
    schedules,
    serve,
    server_command,
    threads,
    trace,
    worker_command,
)
