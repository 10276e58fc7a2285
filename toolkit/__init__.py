"""toolcall-kit: see, token by token, how an LLM calls a tool. One job per module, imports only downward; the README's
"What is where" and "Architecture" sections map them. Import what you need; nothing is imported here."""

__version__ = "0.1.0"
