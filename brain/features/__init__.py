"""What is built on the store: the chat layer, the knowledge base, the persona, specialists, consolidation, and
the interop formats (the Engram mirror, Portable AI Memory)."""
