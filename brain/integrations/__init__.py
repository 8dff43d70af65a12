"""``brain.integrations.xaibo``: the path Xaibo agent configurations name the adapters by (``module:
brain.integrations.xaibo.BrainMemory``); the adapters live in :mod:`brain.shells.xaibo`."""
