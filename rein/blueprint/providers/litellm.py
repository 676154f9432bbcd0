"""LiteLLMProvider: real models through LiteLLM, the translation boundary to 100+ vendors.

litellm is imported lazily, inside `complete`/`stream` only: importing it is slow
(and without LITELLM_LOCAL_MODEL_COST_MAP=True it fetches a price list from the
network), and `import rein` must stay cheap and offline.

Retries belong to Temporal (activity retry policy) and FallbackProvider, so
litellm's own are off by default (`num_retries=0`, unless the caller passes
`num_retries` or `max_retries`).

Keys: litellm reads them from the environment. Parameters are never logged, the
repr lists parameter names only, and known secrets are scrubbed from exception
messages, because activity failures are persisted in the workflow history.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from typing import Any

from rein.blueprint.providers.errors import MissingApiKey
from rein.blueprint.secrets import scrub_exception
from rein.core.ir import Completion, FinishReason, Message, StreamChunk, ToolCall, ToolSpec, Usage, parse_tool_arguments
from rein.core.prices import call_cost, load_litellm, load_litellm_off_loop

_FINISH: tuple[FinishReason, ...] = ("stop", "tool_calls", "length", "error")




def _vendor(model: str) -> str:
    """The `vendor/` prefix of a LiteLLM model id ("" when it has none)."""
    return model.split("/", 1)[0] if "/" in model else ""


def _extract_cost(resp: Any) -> float | None:
    """The cost litellm computed for this response, or None; never raises."""
    try:
        cost = resp._hidden_params["response_cost"]
    except Exception:
        return None
    if isinstance(cost, (int, float)) and not isinstance(cost, bool):
        return float(cost)
    return None


def _token_cost(litellm: Any, model: str, usage: Usage) -> float | None:
    """What litellm's price map says these tokens cost, or None (unknown model); never raises."""
    try:
        prompt, completion = litellm.cost_per_token(
            model=model, prompt_tokens=usage.input_tokens, completion_tokens=usage.output_tokens
        )
    except Exception:
        return None
    return float(prompt + completion)


class LiteLLMProvider:
    def __init__(self, model: str, **default_params: Any):
        self.model = model
        self.default_params = default_params

    def __repr__(self) -> str:
        return f"LiteLLMProvider(model={self.model!r}, params={sorted(self.default_params)})"

    def with_model(self, model: str) -> LiteLLMProvider:
        """The same settings with another model id. Refused across vendors (the `vendor/` prefix) when
        the settings name an api_key or api_base: they belong to this model's vendor, not the other's."""
        pinned = [name for name in ("api_key", "api_base", "base_url") if self.default_params.get(name)]
        if pinned and _vendor(model) != _vendor(self.model):
            raise ValueError(
                f"cannot switch {self.model} to {model}: this provider's {' and '.join(pinned)} belong to "
                f"{_vendor(self.model) or 'its vendor'}; use a model id of the same vendor"
            )
        return LiteLLMProvider(model, **self.default_params)

    def _call_args(self, messages: list[Message], tools: list[ToolSpec] | None,
                   kwargs: dict[str, Any]) -> dict[str, Any]:
        params = {**self.default_params, **kwargs}
        self._check_key(params)
        if "num_retries" not in params and "max_retries" not in params:
            # litellm maps num_retries onto the vendor SDK's max_retries (openai's defaults to 2),
            # so a user's explicit max_retries must not be overridden by our default.
            params["num_retries"] = 0
        return {
            "model": self.model,
            "messages": [self._to_lite_message(m) for m in messages],
            "tools": [self._to_lite_tool(t) for t in tools] if tools else None,
            **params,
        }

    def _check_key(self, params: dict[str, Any]) -> None:
        """Fail at once, in one sentence, when the vendor's key is missing (no retry can fix that)."""
        if params.get("api_key"):
            return
        litellm = load_litellm()
        try:
            info = litellm.validate_environment(model=self.model, api_base=params.get("api_base"))
        except Exception:  # a model litellm cannot classify: let the call itself decide
            return
        missing = [name for name in info.get("missing_keys") or [] if re.search(r"KEY|TOKEN", name)]
        if missing:
            raise MissingApiKey(
                f"No API key for {self.model}: set {' or '.join(missing)} in the worker's environment."
            )

    async def complete(
        self, messages: list[Message], tools: list[ToolSpec] | None = None, **kwargs: Any
    ) -> Completion:
        litellm = await load_litellm_off_loop()
        args = self._call_args(messages, tools, kwargs)
        try:
            resp = await litellm.acompletion(**args)
        except Exception as e:
            scrub_exception(e, args)
            raise
        completion = self._from_lite_response(resp)
        if completion.usage.cost_usd is None:
            try:
                cost = litellm.completion_cost(completion_response=resp)
                if isinstance(cost, (int, float)):
                    completion.usage.cost_usd = float(cost)
            except Exception:
                pass  # unknown model price: cost stays None
        return completion

    async def stream(
        self, messages: list[Message], tools: list[ToolSpec] | None = None, **kwargs: Any
    ) -> AsyncIterator[StreamChunk]:
        litellm = await load_litellm_off_loop()
        args = self._call_args(messages, tools, kwargs)
        args.update(stream=True, stream_options={"include_usage": True})
        calls: dict[int, dict[str, Any]] = {}
        finish: str | None = None
        usage: Usage | None = None
        try:
            async for chunk in await litellm.acompletion(**args):
                if getattr(chunk, "choices", None):
                    choice = chunk.choices[0]
                    delta = choice.delta
                    reasoning = getattr(delta, "reasoning_content", None) if delta is not None else None
                    if reasoning:  # the model's reasoning (LiteLLM's reasoning_content), before its answer
                        yield StreamChunk(type="reasoning", text=reasoning)
                    if delta is not None and delta.content:
                        yield StreamChunk(type="text", text=delta.content)
                    for frag in (getattr(delta, "tool_calls", None) or []):
                        slot = calls.setdefault(frag.index or 0, {"id": None, "name": None, "args": ""})
                        if frag.id:
                            slot["id"] = frag.id
                        fn = frag.function
                        if fn is not None:
                            if fn.name:
                                slot["name"] = fn.name
                            if fn.arguments:
                                slot["args"] += fn.arguments
                    if choice.finish_reason:
                        finish = choice.finish_reason
                u = getattr(chunk, "usage", None)
                if u is not None:
                    usage = Usage(input_tokens=getattr(u, "prompt_tokens", 0) or 0,
                                  output_tokens=getattr(u, "completion_tokens", 0) or 0)
                    answered = getattr(chunk, "model", None)  # the model that answered (a fallback's)
                    usage.cost_usd = (call_cost(answered, usage) if answered else None) or call_cost(self.model, usage)
        except Exception as e:
            scrub_exception(e, args)
            raise
        if usage is not None:  # a streamed answer carries no cost: priced like `complete`'s, from litellm's map
            usage.cost_usd = _token_cost(litellm, self.model, usage)
        if calls:
            tool_calls = [_tool_call(s["id"] or f"call_{i}", s["name"] or "", s["args"])
                          for i, s in sorted(calls.items())]
            yield StreamChunk(type="tool_calls", tool_calls=tool_calls)
            yield StreamChunk(type="done", finish_reason="tool_calls", usage=usage or Usage())
        else:
            yield StreamChunk(type="done", finish_reason=finish or "stop", usage=usage or Usage())

    @staticmethod
    def _to_lite_message(m: Message) -> dict[str, Any]:
        """The vendor's form of a message: its reasoning stays out (rein keeps it for people, not for models)."""
        out: dict[str, Any] = {"role": m.role}
        if m.content:
            out["content"] = m.content
        if m.tool_calls:
            out["tool_calls"] = [
                {"id": tc.id, "type": "function",
                 "function": {"name": tc.name, "arguments": json.dumps(tc.arguments)}}
                for tc in m.tool_calls
            ]
        if m.tool_call_id:
            out["tool_call_id"] = m.tool_call_id
        return out

    @staticmethod
    def _to_lite_tool(t: ToolSpec) -> dict[str, Any]:
        return {"type": "function",
                "function": {"name": t.name, "description": t.description, "parameters": t.parameters}}

    @staticmethod
    def _from_lite_response(resp: Any) -> Completion:
        choice = resp.choices[0]
        msg = choice.message
        tool_calls = []
        for tc in getattr(msg, "tool_calls", None) or []:
            tool_calls.append(_tool_call(tc.id, tc.function.name, tc.function.arguments))
        u = getattr(resp, "usage", None)
        usage = Usage(input_tokens=getattr(u, "prompt_tokens", 0) or 0,
                      output_tokens=getattr(u, "completion_tokens", 0) or 0,
                      cost_usd=_extract_cost(resp))
        # a reason rein does not know is "stop"
        finish: FinishReason = "tool_calls" if tool_calls else next((f for f in _FINISH if f == choice.finish_reason), "stop")
        reasoning = getattr(msg, "reasoning_content", None)  # kept for people, never sent back (_to_lite_message)
        message = Message(role="assistant", content=msg.content or "", tool_calls=tool_calls or None,
                          reasoning=reasoning if isinstance(reasoning, str) and reasoning else None)
        return Completion(message=message, usage=usage, finish_reason=finish)


def _tool_call(call_id: str, name: str, raw: Any) -> ToolCall:
    """Unreadable argument JSON is kept as an error on the call, never silently replaced by {}."""
    arguments, error = parse_tool_arguments(raw)
    return ToolCall(id=call_id, name=name, arguments=arguments, arguments_error=error)
