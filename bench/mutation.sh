#!/usr/bin/env bash
# Mutation testing of rein's pure core (rein/core/machine.py, circuit.py, tools.py, contract.py) with
# mutmut; configuration in pyproject.toml [tool.mutmut], results in docs/mutation.md.
#
#   pip install -e ".[test,mutation]"
#   bench/mutation.sh                 # every module, 2 workers
#   bench/mutation.sh "rein.core.circuit*" # one module (mutmut's name patterns)
#   MUTATION_JOBS=1 FRESH=1 bench/mutation.sh   # one worker; forget cached verdicts first
#
# mutmut keeps its verdicts in mutants/ and re-tests only what changed; FRESH=1 starts over
# (needed after changing the scope in pyproject.toml: mutmut does not mutate a file it copied before).
# Not part of CI's default run: it takes a few minutes on two cores.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ "${FRESH:-0}" == 1 ]]; then rm -rf mutants; fi
mkdir -p mutants
mutmut run --max-children "${MUTATION_JOBS:-2}" "$@" > mutants/run.log 2>&1 || { tail -40 mutants/run.log; exit 1; }
python bench/mutation_score.py
