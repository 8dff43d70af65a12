"""The shells over the library: the HTTP API and its browser page, the CLI, the MCP server, the Xaibo adapters,
the demo. A shell imports the library, never another shell (the API hosts the MCP endpoint: the one exception)."""
