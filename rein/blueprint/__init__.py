"""The agent blueprint: Agent, tools, providers, middleware, MCP; runners are found in rein.blueprint.runners."""
