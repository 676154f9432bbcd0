"""What a model call cost, from LiteLLM's price table, with prices for models it does not know.

`register_prices({"openai/my-model": (0.5, 1.5)})` (USD per million input and output tokens) or
the worker's setting `REIN_MODEL_PRICES='{"openai/my-model": [0.5, 1.5]}'` (rein.settings) adds or overrides
entries of LiteLLM's table (`litellm.register_model`), so `max_cost_usd` budgets count them too.
A model with no price anywhere costs None: its runs are not stopped by a budget (docs/fleet.md).
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from collections.abc import Mapping, Sequence
from typing import Any

log = logging.getLogger("rein.prices")
_LOADED: list[Any] = []
"""litellm once its import has finished (a partly imported module is in sys.modules earlier)."""
_LOADING = threading.Lock()


def register_prices(prices: Mapping[str, Sequence[float]]) -> None:
    """Prices in USD per million (input, output) tokens, by model name as agents give it."""
    entries: dict[str, Any] = {}
    for model, pair in prices.items():
        per_input, per_output = (float(p) for p in pair)
        if per_input < 0 or per_output < 0:
            raise ValueError(f"a price is 0 or more, got {pair!r} for {model}")
        provider, _, name = model.rpartition("/")
        entry = {"input_cost_per_token": per_input / 1e6, "output_cost_per_token": per_output / 1e6, "mode": "chat"}
        if provider:
            entry["litellm_provider"] = provider
        entries[model] = entry
        if provider:
            entries[name] = entry  # the vendor answers with the bare name
    load_litellm().register_model(entries)


def prices_from_env() -> None:
    """Register the REIN_MODEL_PRICES setting (parsed and checked by rein.settings)."""
    from rein import settings  # here: this module is imported where pydantic is not (the CLI's start)

    prices = settings.current().model_prices
    if prices:
        register_prices(prices)


def call_cost(model: str, usage: Any) -> float | None:
    """The cost of one call's tokens for `model` (the one that answered); None for an unknown price."""
    try:
        prompt, completion = load_litellm().cost_per_token(
            model=model, prompt_tokens=usage.input_tokens, completion_tokens=usage.output_tokens
        )
    except Exception:  # noqa: BLE001  (litellm raises various errors for a model it has no price for)
        return None
    return float(prompt) + float(completion)

def load_litellm() -> Any:
    """litellm, imported once, quiet, with its shipped price map and the operator's prices (REIN_MODEL_PRICES)."""
    # Use the price map litellm ships instead of fetching one at import: nothing downloads at run time.
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    with _LOADING:  # `rein worker` may be importing it in the background (preload_litellm) meanwhile
        try:
            import litellm
        except ImportError as e:  # pragma: no cover - litellm is a core dependency
            raise ImportError("litellm is not installed (it is a rein dependency); run: pip install litellm") from e
        litellm.suppress_debug_info = True  # its help banner would land in worker logs on every error
        first = not _LOADED
        _LOADED[:] = [litellm]
        if first:
            prices_from_env()
    return litellm


def preload_litellm() -> None:
    """Start importing litellm in a background thread: it takes seconds of CPU, which a fresh
    worker's first model call would otherwise wait for (`rein worker` calls this as it starts)."""
    if not _LOADED:
        threading.Thread(target=load_litellm, name="rein-load-litellm", daemon=True).start()


async def load_litellm_off_loop() -> Any:
    """The first import takes seconds: done in a thread, so the event loop keeps running (an
    activity's heartbeats among other things) instead of stalling until a heartbeat timeout."""
    return _LOADED[0] if _LOADED else await asyncio.to_thread(load_litellm)
