"""Configuration of the Xaibo modules, and the stores and embedders they share within a process.

Xaibo builds a module instance per agent request; each instance finds the process's store (and
embedder) for its storage settings here instead of opening its own.
"""

import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from brain.app.core import Brain
from brain.app.core import open as open_brain
from brain.config import Settings
from brain.model.errors import ConfigError, ValidationError
from brain.model.schemas import GLOBAL_SCOPE, entity_scope
from brain.providers.embeddings import Embedder
from brain.rules.memories import visible_scopes
from brain.store import Store
from brain.wiring import get_embedder


def settings_from_config(config: Any, own_keys: Sequence[str], module: str) -> tuple[Settings, dict[str, Any]]:
    """Split a Xaibo module ``config`` into brain :class:`Settings` and the module's own keys."""
    if config is None:
        config = {}
    if not isinstance(config, Mapping):
        raise ConfigError(f"{module}: config must be a mapping of keys to values, got {type(config).__name__}")
    fields = set(Settings.model_fields)
    unknown = sorted(str(k) for k in config if k not in fields and k not in own_keys)
    if unknown:
        own = ", ".join(own_keys) if own_keys else "none"
        raise ConfigError(
            f"{module}: unknown config key(s) {', '.join(unknown)}; this module's keys: {own}; "
            f"brain settings by field name: data_dir, collection, embedder, chroma_url, ... (see brain.config.Settings)"
        )
    settings = Settings(**{k: v for k, v in config.items() if k in fields})
    return settings, {k: v for k, v in config.items() if k in own_keys}


def _store_key(settings: Settings) -> tuple[str, str, str]:
    data_dir = str(Path(settings.data_dir).resolve())
    return (settings.chroma_url or data_dir, settings.collection, settings.embedder)


_brains: dict[tuple[str, str, str], Brain] = {}
_embedders: dict[tuple[str, ...], Embedder] = {}
_opened: set[int] = set()  # ids of the Brains shared_brain opened (and so closes)
_stores_lock = threading.Lock()


def shared_brain(settings: Settings) -> Brain:
    """The process's :class:`~brain.app.core.Brain` for these storage settings, opened on first use
    (without a summary worker: the modules write memories, not conversations).

    Xaibo builds a module instance per agent request; opening a store each time would reload the
    embedder and rebuild the indexes, and several stores of one collection would not see each
    other's writes until their periodic refresh.
    """
    key = _store_key(settings)
    with _stores_lock:
        brain = _brains.get(key)
        if brain is None:
            brain = _brains[key] = open_brain(settings, start_worker=False)
            _opened.add(id(brain))
        return brain


def shared_store(settings: Settings) -> Store:
    """The store of :func:`shared_brain` for these storage settings."""
    return shared_brain(settings).store


def register_shared_store(store: Brain | Store) -> None:
    """Make Xaibo modules configured with the settings of ``store`` (a Brain or a RagStore, e.g. the
    chat backend's) use it."""
    if isinstance(store, Store):
        store = Brain(store)  # wiring only: the store stays its owner's to close
    if not isinstance(store, Brain):
        raise ConfigError(f"register_shared_store needs a brain Brain or RagStore, got {type(store).__name__}")
    with _stores_lock:
        _brains[_store_key(store.settings)] = store


def close_shared_stores() -> None:
    """Forget the shared Brains and close those :func:`shared_brain` opened (one handed in with
    :func:`register_shared_store` stays open: its owner closes it)."""
    with _stores_lock:
        brains = list(_brains.values())
        _brains.clear()
        _embedders.clear()
        opened = set(_opened)
        _opened.clear()
    for brain in brains:
        if id(brain) in opened:
            brain.close()


def own_config(config: Any, own_keys: Sequence[str], module: str) -> dict[str, Any]:
    """The module's own keys, when a store was handed in (storage settings would be ignored: refused)."""
    if config is None:
        return {}
    if not isinstance(config, Mapping):
        raise ConfigError(f"{module}: config must be a mapping of keys to values, got {type(config).__name__}")
    other = sorted(str(k) for k in config if k not in own_keys)
    if other:
        raise ConfigError(
            f"{module}: config key(s) {', '.join(other)} cannot be used with store=: the store's own settings "
            f"apply; this module's keys: {', '.join(own_keys)}"
        )
    return dict(config)


def resolve_store(
    store: Any, settings: Any, config: Any, own_keys: Sequence[str], module: str
) -> tuple[Store, dict[str, Any]]:
    if isinstance(store, Brain):
        store = store.store
    if store is not None:
        if not isinstance(store, Store):
            raise ConfigError(f"{module}: store must be a brain Brain or RagStore, got {type(store).__name__}")
        return store, own_config(config, own_keys, module)
    if settings is not None:
        if not isinstance(settings, Settings):
            raise ConfigError(f"{module}: settings must be brain Settings, got {type(settings).__name__}")
        return shared_store(settings), own_config(config, own_keys, module)
    parsed, own = settings_from_config(config, own_keys, module)
    return shared_store(parsed), own


def scopes_for(entity: Any, module: str) -> tuple[str, frozenset[str]]:
    """(write scope, readable scopes) for a module's ``entity`` config."""
    if entity is None:
        return GLOBAL_SCOPE, visible_scopes(None)
    name = entity if isinstance(entity, str) else str(entity)
    try:
        scope = entity_scope(name)
    except ValueError as exc:
        raise ConfigError(f"{module}: entity: {exc}") from None
    return scope, visible_scopes(name)


def check_text(text: object, field: str = "text") -> str:
    if not isinstance(text, str) or not text.strip():
        raise ValidationError(f"{field} must be a non-empty string, got {text!r}")
    return text


def unit_score(similarity: float) -> float:
    """Cosine similarity floored at 0 and capped at 1 (float rounding), Xaibo's 0..1 score."""
    return min(1.0, max(0.0, float(similarity)))


def shared_embedder(settings: Settings) -> Embedder:
    key = (settings.embedder, settings.ollama_host)
    with _stores_lock:
        for store_key, brain in _brains.items():  # an open store's embedder has its model loaded already
            if store_key[2] == settings.embedder and brain.settings.ollama_host == settings.ollama_host:
                return brain.store.embedder
        if key not in _embedders:
            _embedders[key] = get_embedder(settings)
        return _embedders[key]
