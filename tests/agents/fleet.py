"""An agent whose model is a vendor's (LiteLLM over HTTP to tests/vendor_server.py at VENDOR_URL): docs/fleet.md's
recipe with real `rein worker` processes (tests/test_fleet_recipe.py)."""

import os

from rein import Agent, LiteLLMProvider

vendor_agent = Agent(provider=LiteLLMProvider("openai/gpt-4o-mini", api_base=os.environ.get("VENDOR_URL", "") + "/v1",
                                              api_key="sk-test"), name="fleet-vendor")
