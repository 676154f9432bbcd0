"""rein's search attributes, name -> kind: plain data that rein.core.contract re-exports, here so the embedded
server's supervisor (rein.durable.embedded_server) registers them without importing temporalio or pydantic (~1 s at start).
"""

SEARCH_ATTRIBUTES = {
    "ReinAgent": "Keyword",
    "ReinStatus": "Keyword",
    "ReinIterations": "Int",
    "ReinTokens": "Int",
    "ReinAgentVersion": "Keyword",
    "ReinForkOf": "Keyword",
    "ReinCostUsd": "Double",
    "ReinTenant": "Keyword",
    "ReinEvalOf": "Keyword",
}
"""ReinForkOf: set at start on a fork (rein.durable.fork): the workflow id of the run it was forked from.
ReinCostUsd: the run's cost with its child agents'; ReinTenant: its fairness key (rein.durable.fleet).
ReinEvalOf: set at start on a what-if run (`rein eval`, rein.durable.evals): the recorded run's workflow id."""
