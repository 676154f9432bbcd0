"""Scorers for `rein eval`: how a what-if run's answer compares with its recorded run's.

A scorer is any callable `(recorded: RecordedRun, replayed: RunResult) -> float | bool` (or awaitable);
it passes at 1.0 unless it has a `threshold`. These three cover the usual cases.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rein.core.result import RunResult
    from rein.durable.evals import RecordedRun


class exact_match:  # noqa: N801 - used like a function: scorers=[exact_match()]
    """The final outputs are the same text (ignoring whitespace at either end)."""

    name = "exact_match"

    def __call__(self, recorded: RecordedRun, replayed: RunResult) -> bool:
        return (recorded.result.output or "").strip() == (replayed.output or "").strip()


class json_field:  # noqa: N801
    """One field of the answer is the same: `path` is dotted (`order.total`, `items.0.sku`), read from the
    structured result (an agent with an output type) or the output parsed as JSON."""

    def __init__(self, path: str) -> None:
        if not path:
            raise ValueError("json_field needs a path like 'order.total'")
        self.path = path
        self.name = f"json:{path}"

    def __call__(self, recorded: RecordedRun, replayed: RunResult) -> bool:
        missing = object()
        mine, theirs = _field(replayed, self.path, missing), _field(recorded.result, self.path, missing)
        return mine is not missing and mine == theirs


def _field(result: RunResult, path: str, missing: object) -> Any:
    value: Any = result.data
    if value is None:
        try:
            value = json.loads(result.output or "")
        except ValueError:
            return missing
    for part in path.split("."):
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return missing
    return value


JUDGE_PROMPT = """You compare two answers an AI agent gave to the same request: the RECORDED one (accepted \
before) and a NEW one (from a changed agent). {criteria}
Reply with one line: PASS or FAIL, then a short reason.

REQUEST:
{request}

RECORDED ANSWER:
{recorded}

NEW ANSWER:
{new}"""


class llm_judge:  # noqa: N801
    """An LLM (any LiteLLM model id, its key from the environment) says whether the new answer is as good:
    1.0 for PASS, 0.0 for FAIL. `criteria`: what matters; `completion_kwargs`: passed to LiteLLM."""

    def __init__(self, model: str, criteria: str = "PASS when the NEW answer says the same in substance.",
                 **completion_kwargs: Any) -> None:
        self.model = model
        self.criteria = criteria
        self.completion_kwargs = completion_kwargs
        self.name = "llm_judge"
        self.reasons: dict[str, str] = {}
        """The judge's line for each recorded run id (shown by the JSON report's scores only as numbers)."""

    async def __call__(self, recorded: RecordedRun, replayed: RunResult) -> float:
        import litellm

        request = recorded.request.prompt or next(
            (m.content or "" for m in reversed(recorded.result.session.messages) if m.role == "user"), "")
        prompt = JUDGE_PROMPT.format(criteria=self.criteria, request=request,
                                     recorded=recorded.result.output or "", new=replayed.output or "")
        reply = await litellm.acompletion(model=self.model, messages=[{"role": "user", "content": prompt}],
                                          **self.completion_kwargs)
        text = (reply.choices[0].message.content or "").strip()
        self.reasons[recorded.run_id] = text
        verdict = re.match(r"\W*(PASS|FAIL)\b", text, re.IGNORECASE)
        if verdict is None:
            raise ValueError(f"the judge answered neither PASS nor FAIL: {text[:200]!r}")
        return 1.0 if verdict.group(1).upper() == "PASS" else 0.0
