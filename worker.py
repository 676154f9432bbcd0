"""A rein worker: `rein worker`, kept as a script for deployments that run `python worker.py`.

    python worker.py --agent examples.calculator:agent [--agent pkg.mod:other] [--task-queue rein]

Same flags and behaviour as `rein worker` (see `rein worker --help`): it polls the shared queue
(`rein`, or --task-queue) and each agent's own queue (`rein.<name>`); connection settings come
from --address/--namespace or temporalio's envconfig, else the shared embedded server of
REIN_HOME. API keys are read here, from this process's environment, and nowhere else.
"""

import sys

from rein.cli import entry

if __name__ == "__main__":
    entry(["worker", *sys.argv[1:]])
