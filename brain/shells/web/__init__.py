"""HTTP plumbing the API and the MCP endpoint share: authentication and body-size middleware, JSON errors."""
