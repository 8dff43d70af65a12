"""The shells over the library: the CLI, the demo, the HTTP API and its browser page, the MCP server, the Xaibo
adapters. They are thin: each calls the library. Among them only launching is layered: the CLI starts the API and
MCP servers, the API hosts the MCP endpoint; MCP and Xaibo never import another shell, and the CLI and the demo
never import each other (pyproject.toml's import contract)."""
