"""The specialist registry: specialists registered from YAML into their own Chroma collection.

Registration validates the whole file, then stores per specialist

* three vectors: the canonical phrase, the mean of its predicates' vectors and the mean of its
  objects' vectors (see :class:`~brain.features.specialists.scoring.SpecialistVectors`),
* one vector per ``not`` example,

and one vector per labelled request of ``<stem>_examples.jsonl`` beside the YAML file, when there is
one (:mod:`brain.features.specialists.classifier`: a model learnt from them gives each match its confidence),
in the ``specialists`` collection (the ``conversations`` collection keeps only the documents of the
data model). A content hash per specialist makes re-registering unchanged YAML embed nothing. The
vectors are kept in process, so finding a specialist is exact scoring of every specialist
(:mod:`brain.features.specialists.scoring`), with no vector-index query; rankings are cached per normalised
request for a while.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence, Set
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pydantic

from brain.features.specialists.classifier import (
    MIN_EXAMPLES,
    SpecialistClassifier,
    SpecialistExample,
    examples_path,
    load_examples,
    request_features,
)
from brain.features.specialists.markers import SpecialistRequest, parse_specialist_requests
from brain.features.specialists.model import DEFAULT_PATH, Specialist, load_specialists, validate_specialists
from brain.features.specialists.scoring import (
    DEFAULT_LEXICAL_WEIGHT,
    DEFAULT_NOT_MARGIN,
    DEFAULT_NOT_PENALTY,
    ScoringParams,
    ScoringTable,
    SimilarityUnits,
    SpecialistBands,
    SpecialistConfidence,
    SpecialistMatch,
    SpecialistVectors,
    SpecialistWeights,
    embedder_params,
    request_words,
)
from brain.model.errors import ConfigError, EmbeddingModelMismatch, Problem, ValidationError
from brain.model.schemas import check_k
from brain.providers.cache import CacheInfo, LRUCache
from brain.rules.relevance import Calibration, calibrate

if TYPE_CHECKING:
    from brain.store.chroma import ChromaAccess

log = logging.getLogger(__name__)

DEFAULT_COLLECTION = "specialists"

#: Settings fields :meth:`SpecialistRegistry.from_settings` reads: field -> (parameter, env variable).
SETTINGS_FIELDS: dict[str, tuple[str, str]] = {
    "specialists_path": ("path", "BRAIN_SPECIALISTS_PATH"),
    "specialists_collection": ("collection", "BRAIN_SPECIALISTS_COLLECTION"),
    "specialist_weight_canonical": ("weight_canonical", "BRAIN_SPECIALIST_WEIGHT_CANONICAL"),
    "specialist_weight_predicates": ("weight_predicates", "BRAIN_SPECIALIST_WEIGHT_PREDICATES"),
    "specialist_weight_objects": ("weight_objects", "BRAIN_SPECIALIST_WEIGHT_OBJECTS"),
    "specialist_not_penalty": ("not_penalty", "BRAIN_SPECIALIST_NOT_PENALTY"),
    "specialist_not_margin": ("not_margin", "BRAIN_SPECIALIST_NOT_MARGIN"),
    "specialist_weight_lexical": ("lexical_weight", "BRAIN_SPECIALIST_WEIGHT_LEXICAL"),
    "specialist_confidence_intercept": ("confidence_intercept", "BRAIN_SPECIALIST_CONFIDENCE_INTERCEPT"),
    "specialist_confidence_score": ("confidence_score", "BRAIN_SPECIALIST_CONFIDENCE_SCORE"),
    "specialist_confidence_length": ("confidence_length", "BRAIN_SPECIALIST_CONFIDENCE_LENGTH"),
    "specialist_band_strong": ("band_strong", "BRAIN_SPECIALIST_BAND_STRONG"),
    "specialist_band_good": ("band_good", "BRAIN_SPECIALIST_BAND_GOOD"),
    "specialist_band_possible": ("band_possible", "BRAIN_SPECIALIST_BAND_POSSIBLE"),
    "specialist_cache_ttl_seconds": ("cache_ttl", "BRAIN_SPECIALIST_CACHE_TTL_SECONDS"),
    "specialist_cache_size": ("cache_size", "BRAIN_SPECIALIST_CACHE_SIZE"),
}


@dataclass
class RegistrationReport:
    """What a registration did. ``embedded`` counts the texts sent to the embedder."""

    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    embedded: int = 0

    @property
    def changed(self) -> bool:
        return bool(self.added or self.updated or self.removed)

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def normalise_request(text: str) -> str:
    """The cache key of a request: lower case, runs of whitespace collapsed."""
    return " ".join(text.split()).lower()


class SpecialistRegistry:
    """Registered specialists, their vectors in Chroma's ``specialists`` collection and in process.

    Opening a registry loads what an earlier registration stored (nothing is embedded); call
    :meth:`register` to bring it in line with the YAML file.

    Parameters (defaults in brackets; :meth:`from_settings` takes them from ``Settings``):

    * ``store`` -- the :class:`~brain.store.RagStore` whose Chroma client (``store.chroma``) and embedder are used.
    * ``path`` [``config/specialists.yaml``] -- the YAML file :meth:`register` reads by default.
    * ``collection`` [``specialists``] -- the Chroma collection of the specialists' vectors.
    * ``weights`` [0.5 / 0.3 / 0.2] -- :class:`SpecialistWeights`.
    * ``not_penalty`` [1.0], ``not_margin`` [0.50] -- the ``not`` penalty
      (see :mod:`brain.features.specialists.scoring`).
    * ``lexical_weight`` [0.2] -- the weight of the lexical share.
    * ``confidence`` -- :class:`SpecialistConfidence`, how likely a match is right, or a mapping of some of
      its coefficients [the embedder's, see :func:`~brain.features.specialists.scoring.embedder_params`;
      all-MiniLM-L6-v2: -6.30 + 13.75 * score + 1.36 * ln(words)].
    * ``bands`` -- :class:`SpecialistBands` on that confidence, or a mapping of some of its thresholds [the
      embedder's; all-MiniLM-L6-v2: strong 0.90 / good 0.65 / possible 0.62].
    * ``units`` -- :class:`SimilarityUnits`, how the embedder's similarities are put into the reference
      embedder's [the embedder's; all-MiniLM-L6-v2: as they are].
    * ``cache_ttl`` [300 s], ``cache_size`` [1024] -- the request cache (0 disables it).
    * ``embedder`` -- defaults to the store's; must have the same name (tests wrap it to count calls).
    * ``clock`` [``time.monotonic``] -- the cache's clock.
    * ``use_examples`` [True] -- learn the confidence from the labelled requests beside the YAML file
      (:mod:`brain.features.specialists.classifier`); False keeps the score-and-length confidence.
    * ``follow_pointer`` [True] -- ``collection`` is a logical name, served by the collection its live
      pointer names (a re-index flips it); False: ``collection`` is that physical collection itself (a
      re-index registers the specialists of the collection it builds or rolls back to, whichever is live).
    """

    def __init__(
        self,
        store: Any,
        *,
        path: str | Path = DEFAULT_PATH,
        collection: str = DEFAULT_COLLECTION,
        weights: SpecialistWeights | None = None,
        not_penalty: float = DEFAULT_NOT_PENALTY,
        not_margin: float = DEFAULT_NOT_MARGIN,
        lexical_weight: float = DEFAULT_LEXICAL_WEIGHT,
        bands: SpecialistBands | Mapping[str, float] | None = None,
        confidence: SpecialistConfidence | Mapping[str, float] | None = None,
        units: SimilarityUnits | None = None,
        cache_ttl: float = 300.0,
        cache_size: int = 1024,
        embedder: Any | None = None,
        clock: Callable[[], float] = time.monotonic,
        use_examples: bool = True,
        follow_pointer: bool = True,
    ):
        self._given_bands, self._given_confidence, self._given_units = bands, confidence, units
        self._fixed = ScoringParams(
            weights=weights or SpecialistWeights(),
            not_penalty=float(not_penalty),
            not_margin=float(not_margin),
            lexical_weight=float(lexical_weight),
        )
        if not math.isfinite(cache_ttl) or cache_ttl < 0:
            raise ConfigError(f"cache_ttl must be >= 0 seconds, got {cache_ttl}")
        if cache_size < 0:
            raise ConfigError(f"cache_size must be >= 0, got {cache_size}")
        self.store = store
        self.path = Path(path)
        self.collection_name = collection
        self.embedder = embedder or store.embedder
        if self.embedder.name != store.embedder.name:
            raise EmbeddingModelMismatch(
                f"the registry's embedder {self.embedder.name} is not the store's {store.embedder.name}"
            )
        self.scoring = self._scoring_for(self.embedder)
        self._lock = threading.RLock()
        # request -> full ranking, for the TTL; least recently used beyond the size go
        self._cache: LRUCache[str, tuple[SpecialistMatch, ...]] = LRUCache(
            int(cache_size), ttl=float(cache_ttl), clock=clock
        )
        self._entries: dict[str, SpecialistVectors] = {}
        self._table = ScoringTable([], int(self.embedder.dimension))
        # labelled requests (normalised text, label, vector) and the model learnt from them
        self._examples: list[tuple[str, str | None, np.ndarray]] = []
        self._classifier: SpecialistClassifier | None = None
        self.use_examples = use_examples
        self.follow_pointer = follow_pointer
        self.chroma = self._open_collection()
        self.col = self.chroma.collection
        self._load()

    @classmethod
    def from_settings(cls, store: Any, settings: Any | None = None, **overrides: Any) -> SpecialistRegistry:
        """A registry configured from ``Settings`` fields named as in :data:`SETTINGS_FIELDS`
        (fields the settings object does not have keep the defaults)."""
        settings = settings if settings is not None else store.settings
        kwargs: dict[str, Any] = {}
        for field_name, (param, _env) in SETTINGS_FIELDS.items():
            if hasattr(settings, field_name):
                kwargs[param] = getattr(settings, field_name)
        weights = {
            k: kwargs.pop(f"weight_{k}") for k in ("canonical", "predicates", "objects") if f"weight_{k}" in kwargs
        }
        if weights:
            kwargs["weights"] = SpecialistWeights(**weights)
        # the band and confidence settings that are set override the embedder's defaults one by one
        bands = {k: kwargs.pop(f"band_{k}", None) for k in ("strong", "good", "possible")}
        kwargs["bands"] = {k: v for k, v in bands.items() if v is not None}
        confidence = {k: kwargs.pop(f"confidence_{k}", None) for k in ("intercept", "score", "length")}
        kwargs["confidence"] = {k: v for k, v in confidence.items() if v is not None}
        kwargs.update(overrides)
        return cls(store, **kwargs)

    # the scoring parameters, as given
    @property
    def weights(self) -> SpecialistWeights:
        return self.scoring.weights

    @property
    def not_penalty(self) -> float:
        return self.scoring.not_penalty

    @property
    def not_margin(self) -> float:
        return self.scoring.not_margin

    @property
    def lexical_weight(self) -> float:
        return self.scoring.lexical_weight

    @property
    def bands(self) -> SpecialistBands:
        return self.scoring.bands

    @property
    def confidence(self) -> SpecialistConfidence:
        return self.scoring.confidence

    @property
    def units(self) -> SimilarityUnits:
        return self.scoring.units

    def _scoring_for(self, embedder: Any) -> ScoringParams:
        """The scoring parameters for ``embedder``: what was given, the rest the embedder's defaults."""
        units, confidence, bands = embedder_params(
            embedder.name,
            lambda: _calibration(embedder),
            confidence=self._given_confidence,
            bands=self._given_bands,
            units=self._given_units,
        )
        return replace(self._fixed, units=units, confidence=confidence, bands=bands)

    # ---- the collection ----------------------------------------------------------------------------
    def _open_collection(self) -> ChromaAccess:
        from brain.store.live import live_collection

        # a re-index registers the specialists for its model in a collection of their own and flips
        # this name's pointer to it with the store's (brain.app.reindex)
        name = (
            live_collection(self.store.chroma.client, self.collection_name)
            if self.follow_pointer
            else self.collection_name
        )
        access: ChromaAccess = self.store.chroma.sibling(
            name,
            self.embedder,
            kind="specialists",
            switch=(
                "Set BRAIN_SPECIALISTS_COLLECTION to a new name (registration re-embeds the YAML there) "
                "or delete that collection"
            ),
            rename="set BRAIN_SPECIALISTS_COLLECTION to another name",
        )
        return access

    def _follow_store(self) -> None:
        """Move to the store's model when a re-index swapped it (here or in another process, followed
        through the change feed): the re-index registered the specialists for that model in their own
        collection and flipped this name's pointer before the store's."""
        if self.store.embedder.name == self.embedder.name:
            return
        with self._lock:
            if self.store.embedder.name == self.embedder.name:
                return
            self.embedder = self.store.embedder
            self.scoring = self._scoring_for(self.embedder)
            self.chroma = self._open_collection()
            self.col = self.chroma.collection
            self._load()

    def _all_records(self, include: list[str]) -> dict[str, list[Any]]:
        return self.chroma.get_all(None, include)

    def _load(self) -> None:
        """Rebuild the in-process state from the collection; incomplete specialists (an interrupted
        registration) are left out until the next :meth:`register` completes them."""
        records = self._all_records(["metadatas", "embeddings"])
        grouped: dict[str, dict[str, tuple[dict[str, Any], np.ndarray]]] = {}
        examples = []
        for rid, meta, emb in zip(records["ids"], records["metadatas"], records["embeddings"]):
            meta = meta or {}
            if meta.get("kind") == "example":
                examples.append(
                    (str(meta.get("text", "")), meta.get("label") or None, np.asarray(emb, dtype=np.float32))
                )
                continue
            sid = meta.get("specialist")
            if isinstance(sid, str):
                grouped.setdefault(sid, {})[rid] = (meta, np.asarray(emb, dtype=np.float32))
        entries: dict[str, SpecialistVectors] = {}
        for sid, recs in grouped.items():
            entry = _vectors_from_records(sid, recs)
            if entry is None:
                log.warning("specialist %r is stored incompletely; the next registration will re-embed it", sid)
                continue
            entries[sid] = entry
        with self._lock:
            self._entries = entries
            self._examples = sorted(examples, key=lambda e: (e[0], e[1] or ""))
            self._rebuild()

    def _rebuild(self) -> None:
        self._table = ScoringTable(list(self._entries.values()), int(self.embedder.dimension))
        self._classifier = self._train()
        self._cache.clear()

    def _train(self) -> SpecialistClassifier | None:
        """The classifier learnt from the stored labelled requests, or None (the confidence then comes
        from the score and the length) when there are none, or too few for a specialist or for none."""
        ids = self._table.ids
        rows = [e for e in self._examples if e[1] is None or e[1] in self._entries]
        if not rows or not ids or not self.use_examples:
            return None
        counts = Counter(label for _, label, _ in rows)
        lacking = [i for i in ids if counts[i] < MIN_EXAMPLES] + (["none"] if counts[None] < MIN_EXAMPLES else [])
        if lacking:
            log.warning(
                "specialists: fewer than %d labelled requests for %s; confidences come from the scores "
                "alone until the examples file has them",
                MIN_EXAMPLES,
                ", ".join(lacking),
            )
            return None
        features = [
            request_features(vec, self._table.rank(vec, text, self.scoring), ids, request_words(text))
            for text, _, vec in rows
        ]
        return SpecialistClassifier.fit(np.stack(features), [label for _, label, _ in rows], ids)

    # ---- registration -------------------------------------------------------------------------------
    def register(
        self, source: str | Path | Sequence[Specialist] | None = None, *, prune: bool = True
    ) -> RegistrationReport:
        """Bring the registry in line with a YAML file (default :attr:`path`) or a list of specialists.

        The input is validated whole before anything is embedded or stored. Unchanged specialists
        embed nothing; a specialist whose embedded phrases changed is re-embedded; one whose
        description or params alone changed is rewritten without embedding. With ``prune`` (the
        default: the file is the registry) specialists that are no longer listed are deleted;
        ``prune=False`` only adds and updates. The labelled requests beside a YAML file
        (:func:`~brain.features.specialists.classifier.examples_path`) replace the stored ones, and no file beside
        it removes them; a list of specialists leaves them as they are. The request cache is cleared.
        """
        examples: list[SpecialistExample] | None = None  # None: a list of specialists keeps the stored ones
        if source is None or isinstance(source, (str, Path)):
            yaml_path = self.path if source is None else Path(source)
            specs = load_specialists(yaml_path)
            found = examples_path(yaml_path)
            examples = load_examples(found) if found.is_file() else []
        else:
            specs = validate_specialists([s.to_dict() if isinstance(s, Specialist) else s for s in source])
        self._follow_store()
        report = RegistrationReport()
        with self._lock:
            to_embed: list[Specialist] = []
            rewrite: list[Specialist] = []
            for spec in specs:
                old = self._entries.get(spec.id)
                if old is None:
                    report.added.append(spec.id)
                    to_embed.append(spec)
                elif old.spec.vectors_hash != spec.vectors_hash:
                    report.updated.append(spec.id)
                    to_embed.append(spec)
                elif old.spec.spec_hash != spec.spec_hash:
                    report.updated.append(spec.id)
                    rewrite.append(spec)
                else:
                    report.unchanged.append(spec.id)
            listed = {s.id for s in specs}
            if prune:
                report.removed = sorted(set(self._entries) - listed)

            texts = [t for s in to_embed for t in s.embedded_texts]
            vectors = self.embedder.embed_documents(texts) if texts else np.zeros((0, 0), dtype=np.float32)
            report.embedded = len(texts)

            new_entries = dict(self._entries)
            for sid in report.removed:
                new_entries.pop(sid, None)
            row = 0
            for spec in to_embed:
                n = len(spec.embedded_texts)
                new_entries[spec.id] = SpecialistVectors.from_embeddings(spec, vectors[row : row + n])
                row += n
            for spec in rewrite:  # same phrases, so the same vectors
                new_entries[spec.id] = replace(self._entries[spec.id], spec=spec)
            example_ids, example_records = self._examples_for(examples, new_entries, report)

            ids, embeddings, documents, metadatas = [], [], [], []
            for spec in [*to_embed, *rewrite]:
                for rid, vec, doc, meta in _records(new_entries[spec.id]):
                    ids.append(rid)
                    embeddings.append(vec)
                    documents.append(doc)
                    metadatas.append(meta)
            for rid, vec, doc, meta in example_records:
                ids.append(rid)
                embeddings.append(vec)
                documents.append(doc)
                metadatas.append(meta)
            if self._write(ids, embeddings, documents, metadatas, new_entries, example_ids):
                # read back what was stored, so that this process scores and learns from exactly the vectors
                # every other process loads (Chroma's copy differs from the embedder's in the last bits)
                self._load()
            else:  # the store already held all of it, as loaded: nothing to read or learn again
                self._cache.clear()
        log.info(
            "specialists: %d added, %d updated, %d unchanged, %d removed, %d texts embedded",
            len(report.added),
            len(report.updated),
            len(report.unchanged),
            len(report.removed),
            report.embedded,
        )
        return report

    def _examples_for(
        self,
        examples: Sequence[SpecialistExample] | None,
        entries: Mapping[str, SpecialistVectors],
        report: RegistrationReport,
    ) -> tuple[set[str], list[tuple[str, Any, str, dict[str, str]]]]:
        """The labelled requests of registered specialists (or of none): stored ones kept, the others
        embedded now. Returns the record ids to keep and the records to write."""
        stored = {_example_id(text, label) for text, label, _ in self._examples}
        if examples is None:
            return stored, []
        wanted: dict[str, tuple[str, str | None]] = {}
        skipped = 0
        for example in examples:
            if example.expected is not None and example.expected not in entries:
                skipped += 1
                continue
            text = normalise_request(example.request)
            wanted.setdefault(_example_id(text, example.expected), (text, example.expected))
        if skipped:
            log.info("specialists: %d labelled requests name no registered specialist and are left out", skipped)
        missing = [rid for rid in wanted if rid not in stored]
        vectors = self.embedder.embed_queries([wanted[rid][0] for rid in missing]) if missing else []
        report.embedded += len(missing)
        records = [
            (rid, vec, wanted[rid][0], {"kind": "example", "text": wanted[rid][0], "label": wanted[rid][1] or ""})
            for rid, vec in zip(missing, vectors)
        ]
        return set(wanted), records

    def _write(
        self,
        ids: list[str],
        embeddings: list[Any],
        documents: list[str],
        metadatas: list[dict[str, Any]],
        entries: Mapping[str, SpecialistVectors],
        examples: Set[str] = frozenset(),
    ) -> bool:
        """Upsert the new records first, then delete every record that is not one of ``entries``' or
        ``examples`` (removed specialists, surplus ``not`` records, leftovers of an interrupted run):
        a crash in between leaves only records that :meth:`_load` ignores and the next registration
        deletes. Returns whether anything was written or deleted. Below the store's disk margin nothing is
        written (:class:`~brain.model.errors.DiskSpaceLow`): the registry's collection is on the same disk."""
        wanted = {rid for entry in entries.values() for rid, *_ in _records(entry)} | set(examples)
        surplus = [rid for rid in self.chroma.ids() if rid not in wanted]
        if not ids and not surplus:
            return False
        disk = getattr(self.store, "disk", None)
        if disk is not None:
            disk.check()
        self.chroma.upsert(ids, documents, metadatas, [np.asarray(e, dtype=np.float32) for e in embeddings])
        self.chroma.delete(surplus)
        return True

    # ---- reading --------------------------------------------------------------------------------------
    def list_specialists(self) -> list[Specialist]:
        """Every registered specialist, by id."""
        with self._lock:
            return [self._entries[s].spec for s in self._table.ids]

    def get(self, specialist_id: str) -> Specialist | None:
        with self._lock:
            entry = self._entries.get(specialist_id)
            return entry.spec if entry else None

    def __len__(self) -> int:
        return len(self._entries)

    def cache_info(self) -> CacheInfo:
        return self._cache.info()

    def clear_cache(self) -> None:
        """Forget every cached ranking (the hit and miss counts stay)."""
        with self._lock:
            self._cache.clear()

    def find_specialists(self, request: str, k: int = 3) -> list[SpecialistMatch]:
        """The ``k`` best specialists for a request, best first by ``confidence`` (the classifier's
        probability when one is learned, else a function of the score, so then by score too), each with
        its score, parts, confidence and band."""
        if not isinstance(request, str) or not request.strip():
            raise ValidationError("request must be a non-empty string", [Problem("request", "empty")])
        check_k(k)
        self._follow_store()
        key = normalise_request(request)
        with self._lock:
            ranking = self._cache.get(key)
        if ranking is None:
            # embedded outside the lock, so concurrent requests do not wait for each other's model call;
            # the normalised text is embedded so that every spelling sharing a cache key shares a ranking
            q = np.asarray(self.embedder.embed_query(key), dtype=np.float32)
            with self._lock:  # ranked against the specialists registered now
                ranking = self._table.rank(q, key, self.scoring)
                if self._classifier is not None:
                    ranking = self._classifier.rerank(ranking, q, request_words(key), self.scoring.bands)
                self._cache.put(key, ranking)
        return list(ranking[:k])

    def parse_specialist_request(self, text: str) -> list[SpecialistRequest]:
        """Every ``SPECIALIST_REQUEST[name:{json}]`` marker in ``text``, checked against the registered
        specialists; see :func:`~brain.features.specialists.markers.parse_specialist_requests`."""
        with self._lock:
            known = {s: e.spec for s, e in self._entries.items()}
        return parse_specialist_requests(text, known)


# an embedder without defaults is calibrated once per process (brain.rules.relevance: some 80 texts)
_calibrations: dict[str, Calibration] = {}
_calibrations_lock = threading.Lock()


def _calibration(embedder: Any) -> Calibration:
    with _calibrations_lock:
        if embedder.name not in _calibrations:
            _calibrations[embedder.name] = calibrate(embedder)
        return _calibrations[embedder.name]


# ---- the records of one specialist in the collection ----------------------------------------------
def _example_id(text: str, label: str | None) -> str:
    digest = hashlib.sha1(f"{label or ''}\n{text}".encode()).hexdigest()[:20]
    return f"example#{digest}"


def _record_id(sid: str, kind: str, position: int | None = None) -> str:
    return f"{sid}#{kind}" if position is None else f"{sid}#{kind}-{position}"


def _records(entry: SpecialistVectors) -> list[tuple[str, np.ndarray, str, dict[str, Any]]]:
    spec, s = entry.spec, entry.spec.semantics
    base: dict[str, object] = {"specialist": spec.id, "vectors_hash": spec.vectors_hash}
    spec_json = json.dumps(spec.to_dict(), ensure_ascii=False)
    head = {**base, "kind": "canonical", "spec": spec_json, "spec_hash": spec.spec_hash}
    out = [
        (_record_id(spec.id, "canonical"), entry.canonical, s.canonical, head),
        (_record_id(spec.id, "predicates"), entry.predicates, "; ".join(s.predicates), {**base, "kind": "predicates"}),
        (_record_id(spec.id, "objects"), entry.objects, "; ".join(s.objects), {**base, "kind": "objects"}),
    ]
    for i, (text, vec) in enumerate(zip(s.not_, entry.nots)):
        out.append((_record_id(spec.id, "not", i), vec, text, {**base, "kind": "not", "position": i}))
    return out


def _vectors_from_records(sid: str, recs: dict[str, tuple[dict[str, Any], np.ndarray]]) -> SpecialistVectors | None:
    """A specialist from its stored records, or None unless every record is there and of its
    current phrases (each record carries the hash of the phrases it was embedded from)."""
    head = recs.get(_record_id(sid, "canonical"))
    if head is None:
        return None
    meta, canonical = head
    try:
        spec = Specialist.model_validate(json.loads(meta.get("spec", "")))
    except (ValueError, pydantic.ValidationError):
        return None
    vh = meta.get("vectors_hash")
    if vh != spec.vectors_hash:
        return None
    parts = {}
    for kind in ("predicates", "objects"):
        rec = recs.get(_record_id(sid, kind))
        if rec is None or rec[0].get("vectors_hash") != vh:
            return None
        parts[kind] = rec[1]
    nots = []
    for i in range(len(spec.semantics.not_)):
        rec = recs.get(_record_id(sid, "not", i))
        if rec is None or rec[0].get("vectors_hash") != vh:
            return None
        nots.append(rec[1])
    dim = canonical.shape[0]
    return SpecialistVectors(
        spec=spec,
        canonical=canonical,
        predicates=parts["predicates"],
        objects=parts["objects"],
        nots=np.stack(nots) if nots else np.zeros((0, dim), dtype=np.float32),
    )
