"""The composition root: :func:`open` gives a :class:`Brain`, every part of brain wired once.

A chat backend, the HTTP API, the CLI, the demo and the Xaibo modules all start from here instead of
assembling a store, a chat layer, a summariser and a specialist registry each in their own way::

    import brain

    with brain.open() as b:                    # the store (and its mirror) open now
        ctx = b.chat.build_context(None, "Can I eat peanut butter?", entity="alice")
        b.specialists.find_specialists("read the text on this photo")

The store opens at once, so a locked, missing or unreachable store is an error of :func:`open`. The
rest is built on first use and then kept: the summariser, the chat layer (whose background summary
worker starts with it, unless ``start_worker=False``) and the specialist registry (brought in line
with ``BRAIN_SPECIALISTS_PATH`` once; that first registration's outcome, registry or error, is what
every later use gets, so reading specialists never writes). :meth:`Brain.close` closes what the
Brain opened, in order: the chat layer (queued summaries are written) and then the store.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from chromadb.api import ClientAPI

from brain.app.rag_store import RagStore
from brain.config import Settings, load_settings
from brain.model.errors import BrainError, ConfigError, DiskSpaceLow, StoreUnavailable, ValidationError
from brain.model.schemas import DocType
from brain.rules.memories import check_as_of_search, search_scopes
from brain.store import Store
from brain.store.mirror_link import catch_up_mirror

if TYPE_CHECKING:
    from brain.app.forget import ForgetReport
    from brain.features.chat import ChatMemory
    from brain.features.consolidate import ConsolidationReport
    from brain.features.mirror import BackfillReport, EngramMirror, MirrorHealth
    from brain.features.mirror.sync import SyncReport, VerifyReport
    from brain.features.specialists import SpecialistRegistry
    from brain.model.results import Hit, MemoryHit
    from brain.providers.embeddings.base import Embedder
    from brain.providers.extractors import Extractor
    from brain.providers.summarizers import Summarizer

log = logging.getLogger(__name__)


class Brain:
    """The store, its mirror, the summariser, the chat layer and the specialist registry of one
    process, wired once. Build it with :func:`open`, or around a store the caller already opened
    (``Brain(store)``: the caller keeps closing the store). Thread-safe."""

    def __init__(
        self,
        store: Store[EngramMirror, MirrorHealth],
        *,
        chat: ChatMemory | None = None,
        summarizer: Summarizer | None = None,
        start_worker: bool = True,
        owns_store: bool = False,
        extractor: Extractor | None = None,
    ):
        self.store: Store[EngramMirror, MirrorHealth] = store
        self.settings: Settings = store.settings
        self._chat = chat
        self._owns_chat = chat is None
        self._summarizer = summarizer if summarizer is not None else (chat.summarizer if chat is not None else None)
        self._extractor = extractor
        self._start_worker = start_worker
        self._owns_store = owns_store
        self._specialists: SpecialistRegistry | None = None
        self._specialists_error: BrainError | None = None
        self._lock = threading.RLock()
        self._closed = False

    # ---- the parts -------------------------------------------------------------------------------
    @property
    def mirror(self) -> EngramMirror | None:
        """The store's Engram mirror; None when it is off or damaged (``store.mirror_health`` says which)."""
        return self.store.mirror

    def require_mirror(self) -> EngramMirror:
        """The mirror, or the error that says why there is none and how to get it back."""
        mirror = self.store.mirror
        if mirror is None:
            health = self.store.mirror_health
            if health is not None and health.error is not None:  # damaged: the error names `brain mirror rebuild`
                raise health.error
            raise BrainError("the mirror is off (BRAIN_MIRROR_ENABLED=false); set BRAIN_MIRROR_ENABLED=true")
        return mirror

    @property
    def summarizer(self) -> Summarizer:
        """The model summariser ``BRAIN_SUMMARIZER`` names (the server is not contacted here)."""
        with self._lock:
            if self._summarizer is None:
                from brain.wiring import get_summarizer

                self._summarizer = get_summarizer(self.settings)
            return self._summarizer

    @property
    def extractor(self) -> Extractor | None:
        """The memory-formation model ``BRAIN_FORMATION_MODEL`` names; None when no model is configured (the
        server is not contacted here)."""
        with self._lock:
            if self._extractor is None:
                from brain.wiring import get_extractor

                self._extractor = get_extractor(self.settings)
            return self._extractor

    @property
    def chat(self) -> ChatMemory:
        """The chat layer over the store, built on first use (its summary worker starts with it)."""
        with self._lock:
            self._check_open()
            if self._chat is None:
                from brain.features.chat import ChatMemory  # the chat layer starts a thread: only when used

                self._chat = ChatMemory(
                    self.store,
                    self.settings,
                    summarizer=self.summarizer,
                    extractor=self.extractor,
                    start_worker=self._start_worker,
                )
            return self._chat

    @property
    def specialists(self) -> SpecialistRegistry:
        """The specialist registry, registered from ``BRAIN_SPECIALISTS_PATH`` on first use; the
        outcome of that registration (the registry, or its error) is kept."""
        with self._lock:
            if self._specialists is None and self._specialists_error is None:
                self._register_specialists()
            if self._specialists_error is not None:
                raise self._specialists_error
            assert self._specialists is not None
            return self._specialists

    def register_specialists(self, *, again: bool = False) -> SpecialistRegistry:
        """Register the specialists now, e.g. when a server starts, so that no later read writes.
        Once per Brain unless ``again`` (the file changed): the registry, or the error that stopped it."""
        with self._lock:
            if again or (self._specialists is None and self._specialists_error is None):
                self._register_specialists()
            return self.specialists

    def _register_specialists(self) -> None:
        from brain.features.specialists import SpecialistRegistry

        self._check_open()
        registry = None
        try:
            registry = SpecialistRegistry.from_settings(self.store, self.settings)
            registry.register()  # embeds only new or changed specialists
        except ValidationError as exc:  # the configured file is wrong, not the caller's request
            self._specialists, self._specialists_error = (
                None,
                ConfigError(f"the specialists file (BRAIN_SPECIALISTS_PATH) is invalid: {exc}. Fix it and restart"),
            )
            return
        except DiskSpaceLow as exc:  # nothing written: the specialists stored before are still served
            if registry is not None and len(registry):
                log.warning("specialists not brought in line with their file: %s", exc)
                self._specialists, self._specialists_error = registry, None
            else:
                self._specialists, self._specialists_error = None, exc
            return
        except BrainError as exc:
            self._specialists, self._specialists_error = None, exc
            return
        self._specialists, self._specialists_error = registry, None

    # ---- what the shells call --------------------------------------------------------------------
    def search(
        self,
        query: str,
        *,
        type: str | DocType | None = None,
        k: int | None = None,
        entity: str | None = None,
        as_of: Any = None,
    ) -> Sequence[Hit | MemoryHit]:
        """Search one document type the way it is ranked: memories as the context ranks them (relevance
        first, the same floor; :meth:`RagStore.retrieve_memories`), persona, FAQ and summaries by similarity
        from their in-process indexes, turns or no type through Chroma. ``k`` defaults to the type's setting.
        With ``entity``, ``entity``'s documents and global ones, never another entity's, whatever the type;
        without, global ones only (:func:`brain.rules.memories.scopes_for`; :meth:`Store.search` reads every
        scope). ``as_of`` (memories
        only): what was held true at that time (see :meth:`RagStore.retrieve_memories`)."""
        doc_type = _type_name(type)
        kwargs: dict[str, Any] = {"k": k} if k is not None else {}
        check_as_of_search(doc_type, as_of)
        if doc_type == DocType.MEMORY.value:
            return self.store.retrieve_memories(query, entity=entity, as_of=as_of, **kwargs)
        by_similarity = {
            DocType.FAQ.value: self.store.retrieve_faq,
            DocType.PERSONA.value: self.store.retrieve_persona,
            DocType.SUMMARY.value: self.store.retrieve_summaries,
        }.get(doc_type or "")
        if by_similarity is not None:
            return by_similarity(query, entity=entity, **kwargs)
        # a search for no entity ranks global documents only, of every type (brain.rules.memories.scopes_for)
        where = {"scope": sorted(search_scopes(None) or ())} if entity is None else None
        return self.store.search(query, type=doc_type, where=where, entity=entity, **kwargs)

    def consolidate(self, *, dry_run: bool = False, threshold: float | None = None) -> ConsolidationReport:
        """Merge near-duplicate memories of each scope (see :mod:`brain.features.consolidate`); ``threshold``
        defaults to ``BRAIN_CONSOLIDATE_THRESHOLD``. Needs no chat layer."""
        from brain.features.consolidate import consolidate_memories

        return consolidate_memories(self.store, threshold=threshold, dry_run=dry_run)

    def forget_entity(self, name: str) -> ForgetReport:
        """Remove every document in ``name``'s scope (memories, and the turns and summaries recorded for
        it) from the store, the mirror and the in-process indexes, and leave none of their text in the
        data directory's files (see :mod:`brain.app.forget`). Summaries being written finish first, so
        that none is written from the forgotten turns afterwards."""
        from brain.app.forget import forget_entity

        with self._lock:
            self._check_open()
            chat = self._chat
        if chat is not None:
            chat.wait_for_summaries(timeout=60)
        report = forget_entity(self.store, name)
        if chat is not None:  # a conversation id used again starts its summaries from the beginning
            for conversation in report.conversations:
                chat.summary_queue.schedule.forget(conversation)
        return report

    # ---- the mirror ------------------------------------------------------------------------------
    def sync_mirror(self, *, force: bool = False) -> SyncReport:
        """Make the mirror match the store (``brain mirror sync``): exactly the rows that differ are repaired.
        A store that looks lost or much smaller than the mirror raises :class:`~brain.model.errors.StoreLooksLost`
        unless ``force`` (see :mod:`brain.features.mirror.guard`)."""
        from brain.features.mirror.sync import sync_mirror

        return sync_mirror(self.store, self.require_mirror(), types=self.settings.mirrored_types, force=force)

    def verify_mirror(self) -> VerifyReport:
        """Every difference between the store and the mirror, without writing (``brain mirror verify``)."""
        from brain.features.mirror.sync import verify_mirror

        return verify_mirror(self.store, self.require_mirror(), types=self.settings.mirrored_types)

    def backfill_mirror(self, *, progress: bool = True) -> BackfillReport:
        """Embed the mirrored documents that have no vector of the store's model (resumable)."""
        from brain.features.mirror import BackfillReport

        mirror = self.require_mirror()
        embedded = mirror.backfill(self.store.embedder.embed_documents, progress=progress)
        return BackfillReport(embedded, mirror.coverage())

    def health(self, *, detail: bool = False, verify: bool = False) -> dict[str, object]:
        """Whether the store answers, the embedder, the summariser's status, the persona (the stored version
        and whether it is ``BRAIN_PERSONA_PATH``'s, see :func:`brain.features.persona.persona_report`) and the
        mirror's, with ``status`` ``ok``, ``degraded`` (a part brain is configured to use and needs has
        failed: a damaged or unwritable mirror, where reads and writes still work from Chroma; too little
        free disk, ``disk``, where writes are refused and reads work; or, with memory formation on, a model
        that cannot be reached) or ``unavailable`` (the store is down). An expected state is no fault: the
        summary model is optional (``summariser.optional``) while formation is off, because the extractive
        fallback writes every summary, so a fresh install without Ollama is ``ok``, and ``notes`` says the
        model is not reachable and what to set. ``formation``: memory formation, on or why off, and its
        batches pending, failed and done (shown; a failed batch waits to be run again and does not degrade
        the status). ``detail`` adds how much the store holds, and where: the documents per type (``counts``), and
        what the in-process indexes hold (``index``: see :meth:`brain.store.partitions.Partitions.stats`).
        ``verify`` (with ``detail``) adds whether the mirror matches the store (``mirror.verify``: ``ok``, the
        documents checked and the number of each kind of difference); it reads both whole, so a probe that
        polls health leaves it out."""
        report: dict[str, Any] = {}
        healthy = True
        try:
            count = self.store.count()
            report["store"] = {"ok": True}
            if detail:
                report["store"].update(documents=count, backend=self.settings.chroma_url or "embedded")
        except Exception as exc:  # any Chroma failure means the store is down: report it, not raise it
            healthy = False
            report["store"] = {"ok": False, "error": str(exc)}
        report["embedder"] = {
            "ok": True,
            "name": self.store.embedder.name,
            "dimension": int(self.store.embedder.dimension),
        }
        # asks the summariser when nothing said how it is for a while
        summariser = report["summariser"] = self.chat.health(probe=None)
        formation = report["formation"] = summariser.pop("formation")  # failed batches are shown, not degrading
        report["notes"] = _model_notes(summariser, formation)
        # summaries have the extractive fallback, so their model is optional; formation has none and needs it
        summariser["optional"] = not formation.get("enabled")
        summariser["ok"] = summariser["reachable"] is not False or summariser["optional"]
        if healthy:
            report["persona"] = self._persona_health(detail)
        health = self.store.mirror_health  # None for a store opened without open_store: no mirror
        if health is not None and health.status == "degraded":
            catch_up_mirror(self.store, wait=False)  # writable again: caught up now, not at the next write
        report["mirror"] = health.to_dict() if health is not None else {"status": "off", "ok": True, "path": None}
        report["disk"] = self.store.disk.status(detail=detail)  # below its margin, writes are refused; reads go on
        if detail and healthy:
            report["counts"] = {t.value: self.store.count(t) for t in DocType}
            # what the in-process indexes hold: resident parts, evictions, loads (built on first use)
            report["index"] = self.store.stats()["index"] or {"built": False}
            # a mirror that cannot be written now is not read either (see EngramMirror.unwritable)
            if verify and self.mirror is not None and report["mirror"]["status"] == "ok":
                report["mirror"]["verify"] = self._verify_summary()
        degraded = not (report["mirror"]["ok"] and report["disk"]["ok"] and summariser["ok"])
        report["status"] = "unavailable" if not healthy else "degraded" if degraded else "ok"
        return report

    def stats(self) -> dict[str, Any]:
        """The store's figures (:meth:`RagStore.stats`: documents per type, the embedder, the size on disk)
        and memory formation's totals (``formation``: its batches by state, the facts they applied, the
        model's tokens and seconds summed over them)."""
        mirror = self.store.mirror
        mirrored = None if mirror is None else {"path": str(mirror.path), "by_type": mirror.count_by_type()}
        return {**self.store.stats(), "formation": self.chat.formation.totals(), "mirror": mirrored}

    def _persona_health(self, detail: bool) -> dict[str, Any]:
        # reported, never loaded here: startup() (brain init, serve, mcp) loads persona.md
        from brain.features.persona import persona_report

        try:
            report = persona_report(self.store, self.settings.persona_path)
        except BrainError as exc:
            return {"error": str(exc)}
        if not detail:  # where the file is, is the operator's business
            report.pop("file")
        return report

    def _verify_summary(self) -> dict[str, Any]:
        try:
            found = self.verify_mirror()
        except BrainError as exc:  # a mirror that breaks while verified: health reports it, not raises it
            return {"ok": False, "error": str(exc)}
        return {
            "ok": found.ok,
            "checked": found.checked,
            **{
                kind: len(getattr(found, kind))
                for kind in ("missing", "extra", "text", "metadata", "vectors", "foreign")
            },
        }

    # ---- closing ---------------------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._closed:
            raise StoreUnavailable("this Brain is closed; open another with brain.open()")

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Close the chat layer (queued summaries are written, memory uses persisted) and the store,
        each only if this Brain opened it. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            chat, self._chat = self._chat, None
        try:
            if chat is not None and self._owns_chat:
                chat.close()
        finally:
            if self._owns_store:
                self.store.close()

    def __enter__(self) -> Brain:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _model_notes(summariser: Mapping[str, object], formation: Mapping[str, object]) -> list[str]:
    """What health says about the summary model beyond ok or not: an expected state, such as a fresh
    install's Ollama that is not running, is told as information, with what to do about it."""
    if summariser.get("reachable") is not False or summariser.get("summarizer") == "extractive":
        return []
    model = summariser.get("summarizer")
    if formation.get("enabled"):
        return [
            f"the model {model} cannot be reached: memory formation (BRAIN_FORMATION) needs it and waits; "
            "summaries come from the extractive fallback meanwhile"
        ]
    return [
        f"the optional summary model {model} is not reachable: summaries come from the extractive fallback "
        f"({_how_to_serve(str(model))} to use it, or set BRAIN_SUMMARIZER=extractive to not ask for it)"
    ]


def _how_to_serve(model: str) -> str:
    if model.startswith("openai/"):
        return "start the OpenAI-compatible server BRAIN_OPENAI_BASE_URL names, serving the model,"
    return "start Ollama and pull the model"


def _type_name(value: str | DocType | None) -> str | None:
    if value is None:
        return None
    try:
        return DocType(value).value
    except ValueError:
        raise ValidationError.of(
            "type", f"type {value!r} is not a document type; one of {', '.join(t.value for t in DocType)}"
        ) from None


def open_store(
    settings: Settings | None = None,
    *,
    embedder: Embedder | None = None,
    client: ClientAPI | None = None,
    mirror: EngramMirror | bool | None = None,
    create: bool = True,
) -> RagStore:
    """``RagStore(settings, ...)``: the store with its change feed, mirror and persona rule
    (:mod:`brain.app.rag_store`). Kept as a function because the README and older callers use it."""
    return RagStore(settings, embedder=embedder, client=client, mirror=mirror, create=create)


def open(
    settings: Settings | None = None,
    *,
    create: bool = True,
    start_worker: bool = True,
    embedder: Embedder | None = None,
    summarizer: Summarizer | None = None,
    extractor: Extractor | None = None,
    brain_type: type[Brain] | None = None,
    **overrides: Any,
) -> Brain:
    """Open the store and wire a :class:`Brain` around it (close it, or use ``with``).

    ``settings`` default to :func:`~brain.config.load_settings` with ``overrides`` (Settings fields by
    name, e.g. ``data_dir=...``); give one or the other. ``create=False`` raises
    :class:`~brain.model.errors.StoreNotFound` instead of creating a store (for read-only tools).
    ``start_worker=False``: the chat layer starts no summary thread (see :class:`~brain.features.chat.ChatMemory`).
    ``embedder``, ``summarizer`` and ``extractor`` (memory formation's model) replace the ones the settings name.
    """
    if settings is None:
        settings = load_settings(**overrides)
    elif overrides:
        raise ConfigError(
            f"brain.open: give settings or Settings fields ({', '.join(sorted(overrides))}), not both; "
            "Settings(...) takes the fields"
        )
    store = open_store(settings, embedder=embedder, create=create)
    # a layer above (brain.ops) gives its own Brain, with the operations on it
    wired = brain_type or Brain
    try:
        return wired(store, summarizer=summarizer, extractor=extractor, start_worker=start_worker, owns_store=True)
    except BaseException:
        store.close()
        raise


__all__ = ["Brain", "open", "open_store"]
