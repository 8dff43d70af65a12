"""What a chat backend calls once at start-up: open a :class:`~brain.app.core.Brain`, load the persona,
catch the mirror up, warm up."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from brain.app.core import Brain
from brain.app.core import open as open_brain
from brain.config import Settings
from brain.features.persona import PersonaLoad, load_persona, persona_report
from brain.model.errors import BrainError, ConfigError, DiskSpaceLow
from brain.store import Store
from brain.store.indexes import index_sizes, refresh_index

log = logging.getLogger(__name__)


@dataclass
class StartupReport:
    """What :func:`startup` did; ``brain`` is the Brain it prepared (the caller closes it)."""

    brain: Brain
    persona: PersonaLoad | None
    seconds: float
    indexed: dict[str, int] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    mirror_sync: Any = None  # the mirror's catch-up, a brain.features.mirror.sync.SyncReport (None: no mirror)

    @property
    def store(self) -> Store:
        return self.brain.store

    def to_dict(self) -> dict[str, object]:
        return {
            "persona": self.persona.to_dict() if self.persona else None,
            "seconds": round(self.seconds, 3),
            "indexed": self.indexed,
            "warnings": self.warnings,
            "mirror_sync": None if self.mirror_sync is None else self.mirror_sync.summary(),
            "store": self.store.stats(),
        }


def startup(
    settings: Settings | None = None,
    *,
    persona_path: str | Path | None = None,
    warm: bool = True,
    brain: Brain | None = None,
) -> StartupReport:
    """Open a Brain (or prepare ``brain``), bring the persona in line with ``persona.md``, catch the
    mirror up with the store and (with ``warm``) build the in-process indexes and load the embedding model now
    rather than on the first chat message. ``report.brain`` is the caller's to close.

    A missing persona file is a warning, not an error: the assistant still answers without one. So is a
    persona that cannot be written for lack of disk space (:class:`~brain.model.errors.DiskSpaceLow`,
    ``BRAIN_MIN_FREE_DISK_MB``): the store is read-only for writes until space frees, and reads go on.
    """
    started = time.perf_counter()
    owned = brain is None
    if brain is None:
        brain = open_brain(settings)
    elif settings is not None and settings is not brain.settings:
        raise ConfigError("startup: give settings or an opened brain, not both (the brain has its settings)")
    settings, store = brain.settings, brain.store
    path = Path(persona_path) if persona_path is not None else settings.persona_path
    warnings: list[str] = []
    persona = None
    if path.exists():
        try:
            persona = load_persona(store, path)
        except DiskSpaceLow as exc:  # below the margin the store still serves reads: start, and say why
            warnings.append(
                f"persona file {path} not loaded: {exc}. The persona stored before is used until a "
                "start with enough free space"
            )
    else:
        stored = persona_report(store, path)["sections"]
        warnings.append(
            f"persona file {path} not found; the assistant runs "
            + (f"with the persona stored before ({stored} sections)" if stored else "without a persona")
            + " (set BRAIN_PERSONA_PATH)"
        )
    try:
        mirror_sync = catch_up_mirror(store)
    except BaseException:  # e.g. a lost store refused: the Brain opened here is not left holding the data directory
        if owned:
            brain.close()
        raise
    indexed: dict[str, int] = {}
    if warm:
        refresh_index(store)
        indexed = index_sizes(store)
        warm_up = getattr(store.embedder, "warm_up", None)
        if callable(warm_up):
            warm_up()
    return StartupReport(brain, persona, time.perf_counter() - started, indexed, warnings, mirror_sync)


def catch_up_mirror(store: Store) -> Any:
    """Bring the store's mirror in line with Chroma (:func:`brain.features.mirror.sync.catch_up`: content, not
    counts), or None when the mirror is off or damaged. Run by every entry point that serves. A store
    that looks lost or half restored raises :class:`~brain.model.errors.StoreLooksLost` and the mirror keeps
    every row (:mod:`brain.features.mirror.guard`): the server does not start."""
    if store.mirror is None:
        return None
    from brain.features.mirror.sync import catch_up

    return catch_up(store, store.mirror, types=store.settings.mirrored_types)


def prepare_to_serve(brain: Brain, *, catch_up: bool = True) -> StartupReport | None:
    """What every server (``brain serve``, ``brain mcp``) does before its first request: :func:`startup`
    as ``brain init`` runs it (the persona brought in line with ``persona.md``, the writes the mirror
    missed repaired), logged, unless ``catch_up`` is False (a worker process whose parent did it); then
    register the specialists now, so that reading them never writes. A specialists file that fails is
    logged and kept by the Brain, whose ``find_specialists`` then answers with that error. A persona
    file that cannot be loaded is an error, as for ``brain init``."""
    report = None
    if catch_up:
        report = startup(brain=brain, warm=False)
        if report.persona is not None:
            log.info("%s", report.persona.summary())
        for warning in report.warnings:
            log.warning("%s", warning)
        if report.mirror_sync is not None:
            log.info("%s", report.mirror_sync.summary())
    try:
        brain.register_specialists()
    except BrainError as exc:
        log.warning("specialists unavailable: %s", exc)
    return report
