"""Who may do what: the caller rules behind entity-bound tokens (:mod:`brain.access.policy`) and the API tokens
(:mod:`brain.access.tokens`). Used by the HTTP and MCP shells; nothing in the library below imports it."""
