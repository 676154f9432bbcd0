"""A rein worker: `rein worker`, kept as a script for deployments that run `python worker.py`.

    python worker.py --agent rein.examples.calculator:agent [--agent pkg.mod:other] [--task-queue rein]

It is `rein worker` (the same code, flags and behaviour; see `rein worker --help`). It polls each
agent's own queue (`rein.<name>`) and the shared queue (`rein`, or --task-queue / REIN_TASK_QUEUE),
as one version of the application's Worker Versioning deployment (`rein`): runs follow the current
build at their next task, and a new build becomes current once it starts, after replaying the runs
that move to it (docs/deploys.md). Given a deployment name of its own (--deployment / REIN_DEPLOYMENT) it polls only its agents' own
queues unless given --task-queue; `--deployment none` turns versioning off. Connection settings come from --address/--namespace or temporalio's
envconfig, else the shared embedded server of REIN_HOME. API keys are read here, from this
process's environment, and nowhere else.
"""

import sys

from rein.cli import entry

if __name__ == "__main__":
    entry(["worker", *sys.argv[1:]])
