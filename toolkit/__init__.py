"""toolcall-kit: see, token by token, how an LLM calls a tool. Modules: models, render, constrain, host, tools,
cost, mcp, figures, widgets, train, engine. Import what you need; nothing heavy is imported here."""
__version__ = "0.1.0"
