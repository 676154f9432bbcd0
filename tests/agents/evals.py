"""A shop agent and its changed versions for the what-if tests (tests/test_evals.py), over LiteLLM.

    rein eval --agent tests.agents.evals:stocking --runs ID,ID

Built when first read, from the environment: REINTEST_VENDOR (tests/vendor_server.py's base URL),
REINTEST_SHOP (the agent's name) and REINTEST_EFFECTS (a file: one line per real tool execution, in
whichever process ran it). `original` sells; `switched` is the same on another model; `stocking` checks
the stock before a sale (a tool the recorded runs never called); `restocking` too, with that tool safe
to run again (`replay="run"`).
"""

from __future__ import annotations

import os
from typing import Any

from rein import Agent, LiteLLMProvider, LoopConfig, tool


def _effect(line: str) -> None:
    with open(os.environ["REINTEST_EFFECTS"], "a") as f:
        f.write(line + "\n")


@tool
def lookup(sku: str) -> str:
    """Look up an item's price."""
    _effect(f"lookup {sku}")
    return f"${len(sku)}.00"


@tool(requires_approval=True)
def charge(sku: str) -> str:
    """Charge the customer for an item."""
    _effect(f"charge {sku}")
    return f"charged {sku}"


def _check_stock(sku: str) -> str:
    """Check that an item is in stock."""
    _effect(f"check_stock {sku}")
    return f"{sku} in stock"


check_stock = tool(name="check_stock")(_check_stock)
check_stock_again = tool(name="check_stock", replay="run")(_check_stock)

MODELS = {"original": "openai/shop-a", "switched": "openai/shop-b", "stocking": "openai/shop-a",
          "restocking": "openai/shop-a"}
EXTRA_TOOLS = {"stocking": [check_stock], "restocking": [check_stock_again]}


def build(variant: str) -> Agent:
    provider = LiteLLMProvider(MODELS[variant], api_base=os.environ["REINTEST_VENDOR"] + "/v1", api_key="sk-test")
    return Agent(provider=provider, tools=[lookup, charge, *EXTRA_TOOLS.get(variant, [])],
                 name=os.environ.get("REINTEST_SHOP", "shop"), system="You sell things.",
                 config=LoopConfig(detect_loops=False))


def __getattr__(name: str) -> Any:
    if name in MODELS:
        return build(name)
    raise AttributeError(name)
