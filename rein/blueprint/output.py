"""Structured output: a final answer validated against the type given as `Agent(output_type=...)`.

The model answers by calling the `final_result` tool, whose parameters are the type's JSON
schema: every provider that calls tools supports that (LiteLLM's vendors, MockProvider scripts),
so no JSON mode is needed. A plain-text answer that is valid JSON for the type is accepted too.

Validation needs the user's type, which only the worker (or the in-process runner) has, so it
runs right after the model answers (`OutputSpec.check`) and its verdict travels in
`Completion.output`. The pure state machine then ends the run with the value or sends the
error back to the model, so both engines decide retries alike and a durable run's history
records each verdict.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import TypeAdapter, ValidationError

from rein.core.errors import error_text
from rein.core.ir import Completion, OutputCheck, ToolSpec

FINAL_RESULT = "final_result"
_WRAP_KEY = "response"
_FENCE = re.compile(r"^```(?:json)?\s*\n?(.*?)\n?```$", re.DOTALL)


class OutputSpec:
    """What the model is asked for and how its answer is checked, built once per Agent.

    A type whose schema is not a JSON object (`list[int]`, a union of models, `int`) is
    offered as `{"response": <schema>}`, since tool parameters must be an object.
    """

    def __init__(self, output_type: Any, *, tool_name: str = FINAL_RESULT, description: str | None = None):
        try:
            self.adapter: TypeAdapter[Any] = TypeAdapter(output_type)
            schema = self.adapter.json_schema()
        except Exception as exc:
            raise TypeError(f"output_type {output_type!r} has no JSON schema pydantic can build: {exc}") from None
        self.type = output_type
        self.tool_name = tool_name
        self.wrapped = schema.get("type") != "object"
        if self.wrapped:
            defs = schema.pop("$defs", None)
            schema = {"type": "object", "properties": {_WRAP_KEY: schema}, "required": [_WRAP_KEY]}
            if defs:
                schema["$defs"] = defs
        self.parameters = schema
        self.description = description or (
            "Give your final answer by calling this tool; its arguments are the answer. "
            "Call it once, when you are done."
        )

    def tool_spec(self) -> ToolSpec:
        return ToolSpec(name=self.tool_name, description=self.description, parameters=self.parameters)

    def check(self, completion: Completion) -> Completion:
        """The completion with its verdict attached; an ordinary tool round gets none."""
        calls = completion.message.tool_calls or []
        call = next((c for c in calls if c.name == self.tool_name), None)
        if call is not None:
            value = call.arguments.get(_WRAP_KEY) if self.wrapped else call.arguments
            verdict = self._verdict(lambda: self.adapter.validate_python(value), call_id=call.id)
        elif calls:
            return completion
        else:
            verdict = self._text_verdict(completion.message.content)
        return completion.model_copy(update={"output": verdict})

    def rebuild(self, data_json: str) -> Any:
        """The typed value back from the JSON a run carries."""
        return self.adapter.validate_json(data_json)

    def _verdict(self, validate: Any, call_id: str | None) -> OutputCheck:
        try:
            value = validate()
        except ValidationError as err:
            problem = _describe(err)
            if call_id is not None:
                text = (
                    f"Invalid final result: {problem}. Call {self.tool_name} again with arguments "
                    "that fit its schema."
                )
            else:
                text = f"Your answer is not a valid final result: {problem}. {self._how()}"
            return OutputCheck(tool_call_id=call_id, error=text)
        return OutputCheck(tool_call_id=call_id, data_json=self.adapter.dump_json(value).decode())

    def _text_verdict(self, text: str) -> OutputCheck:
        body = text.strip()
        fenced = _FENCE.match(body)
        if fenced:
            body = fenced.group(1).strip()
        if self.type is str:  # the text is the answer itself
            return self._verdict(lambda: self.adapter.validate_python(text), call_id=None)
        try:
            json.loads(body)
        except ValueError:
            return OutputCheck(error=f"Your answer was plain text, but a structured final result is required. {self._how()}")
        return self._verdict(lambda: self.adapter.validate_json(body), call_id=None)

    def _how(self) -> str:
        return f"Give the final answer by calling the {self.tool_name} tool with arguments that fit its schema."


def _describe(err: ValidationError) -> str:
    problems = []
    for e in err.errors(include_url=False):
        loc = ".".join(str(p) for p in e.get("loc", ())) or "value"
        got = repr(e.get("input"))
        got = got if len(got) <= 60 else got[:59] + "…"
        problems.append(f"{loc}: {error_text(e)}" + ("" if e.get("type") == "missing" else f" (got {got})"))
    return "; ".join(problems)[:1000]
