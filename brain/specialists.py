"""Specialists (the assistant's tools) registered from YAML and found by meaning.

A specialist is described in ``config/specialists.yaml`` (see that file for the format): an id, a
description, its ``semantics`` (a canonical phrase, predicates, objects, contexts and ``not``
examples) and its ``params``. Registration validates the whole file, then stores per specialist

* three vectors: the canonical phrase, the mean of its predicates' vectors and the mean of its
  objects' vectors (each mean renormalised to unit length, so all three compare by cosine alike),
* one vector per ``not`` example,

in their own Chroma collection (``specialists``; the ``conversations`` collection keeps only the
documents of the data model). A content hash per specialist makes re-registering unchanged YAML
embed nothing; the vectors are kept in process, so finding a specialist is exact numpy scoring of
every specialist, with no vector-index query.

Scoring, for a request vector ``q`` (all vectors unit length, ``sim`` = cosine similarity)::

    base    = w_c * sim(q, canonical) + w_p * sim(q, mean predicates) + w_o * sim(q, mean objects)
    penalty = not_penalty * max(0, max_i sim(q, not_i) - not_margin)
    lexical = bm25(request, specialist) / max(4, sum of bm25(request, s) over every specialist s)
    score   = base - penalty + w_lex * lexical

with weights 0.5 / 0.3 / 0.2 by default (normalised to sum 1), ``not_penalty`` 1.0 and
``not_margin`` 0.50. The penalty only bites when the request is closer than ``not_margin`` to one of
the specialist's ``not`` examples; below that, resemblance to a negative example is the ordinary
overlap of sentences about the same things (with MiniLM, a margin of 0.40 already cost right
matches on the calibration set: "check my rental agreement" is 0.59 from docs' "email the contract
to my landlord").

The lexical share (``w_lex`` 0.2, ``BRAIN_SPECIALIST_WEIGHT_LEXICAL``; 0 turns it off) is Okapi BM25
(:mod:`brain.turn_search`, stemmed words) of the request against each specialist's canonical phrase,
predicates and objects, as a share of the total: words like "fahrenheit", "python" or "forecast" are
decisive where the small embedder blurs a long, data-laden request. On a blind set of requests it
lifted top-1 from 0.76 to the figures in ``bench/SPECIALISTS_RESULTS.md``.

The band says how far a caller may trust the top match. The bands of the issue (strong > 0.90,
good 0.80-0.90, possible 0.70-0.80, weak < 0.70) were written for an embedder whose paraphrase
similarities sit near 1; all-MiniLM-L6-v2 scores a right match around 0.2-0.6, so the defaults
here are calibrated for it (see :class:`SpecialistBands` and ``bench/SPECIALISTS_RESULTS.md``).

Model output asks for a specialist with ``SPECIALIST_REQUEST[name:{json}]``;
:func:`parse_specialist_requests` finds every such marker and checks it against the registered
params.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal, NamedTuple

import numpy as np
import pydantic
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StringConstraints, field_validator

from brain.errors import ConfigError, EmbeddingModelMismatch, ValidationError
from brain.turn_search import LexicalIndex, tokenize

log = logging.getLogger(__name__)

DEFAULT_PATH = Path("config") / "specialists.yaml"
DEFAULT_COLLECTION = "specialists"
#: weight of the lexical share (BM25 over each specialist's canonical, predicates and objects) added to
#: the dense score; 0 gives the plain 0.5/0.3/0.2 formula. Chosen on the development sets
#: (bench/SPECIALISTS_RESULTS.md): MiniLM misses keyword-heavy requests ("in fahrenheit", "python script")
DEFAULT_LEXICAL_WEIGHT = 0.2
#: the BM25 total below which the lexical shares are scaled down (see _rank)
LEXICAL_FLOOR = 4.0
PARAM_TYPES = ("string", "integer", "number", "boolean", "array", "object")
BANDS = ("strong", "good", "possible", "weak")

_Text = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=2000)]


# ---- the YAML model --------------------------------------------------------------------------------
class SpecialistParam(BaseModel):
    """One parameter a specialist accepts in ``SPECIALIST_REQUEST[id:{...}]``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$", max_length=64)]
    type: Literal["string", "integer", "number", "boolean", "array", "object"] = "string"
    required: StrictBool = False
    description: str = ""


class SpecialistSemantics(BaseModel):
    """What a specialist is for, in phrases that are embedded at registration."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    canonical: _Text
    predicates: list[_Text] = Field(min_length=1)
    objects: list[_Text] = Field(min_length=1)
    contexts: list[_Text] = Field(default_factory=list)
    not_: list[_Text] = Field(default_factory=list, alias="not")


class Specialist(BaseModel):
    """A specialist as registered: ``id``, ``description``, ``semantics``, ``params``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]*$", max_length=64)]
    description: _Text
    semantics: SpecialistSemantics
    params: list[SpecialistParam] = Field(default_factory=list)

    @field_validator("params")
    @classmethod
    def _unique_param_names(cls, params: list[SpecialistParam]) -> list[SpecialistParam]:
        seen: set[str] = set()
        for param in params:
            if param.name in seen:
                raise ValueError(f"parameter {param.name!r} is declared twice")
            seen.add(param.name)
        return params

    def to_dict(self) -> dict[str, Any]:
        """The specialist as written in YAML (``semantics.not``, not ``not_``)."""
        return self.model_dump(mode="json", by_alias=True)

    @property
    def embedded_texts(self) -> list[str]:
        """What registration embeds, in order: canonical, predicates, objects, not examples."""
        s = self.semantics
        return [s.canonical, *s.predicates, *s.objects, *s.not_]

    @property
    def vectors_hash(self) -> str:
        """Changes exactly when the embedded texts change (so when the vectors must be recomputed)."""
        s = self.semantics
        return _digest({"canonical": s.canonical, "predicates": s.predicates, "objects": s.objects, "not": s.not_})

    @property
    def spec_hash(self) -> str:
        """Changes whenever anything in the specialist changes."""
        return _digest(self.to_dict())


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()[:32]


# ---- reading and validating YAML --------------------------------------------------------------------
def load_specialists(path: str | Path) -> list[Specialist]:
    """Read and validate a specialists YAML file, whole: one bad specialist and none are returned."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(
            f"specialists file {path} does not exist; create it (see config/specialists.yaml) or set BRAIN_SPECIALISTS_PATH"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read specialists file {path}: {exc}") from None
    return specialists_from_yaml(text, source=str(path))


def specialists_from_yaml(text: str, *, source: str = "<string>") -> list[Specialist]:
    """Parse and validate specialists YAML text (``source`` names it in errors)."""
    import yaml

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        message = f"{source}: not valid YAML{where}: {problem}"
        raise ValidationError(message, [{"item": None, "field": "yaml", "message": message}]) from None
    return validate_specialists(data, source=source)


def validate_specialists(data: Any, *, source: str = "<data>") -> list[Specialist]:
    """Validate ``{"specialists": [...]}`` (or the list itself); raise one ValidationError listing
    every problem, each naming the specialist and the field."""
    if isinstance(data, Mapping):
        extra = sorted(set(data) - {"specialists"})
        if extra:
            message = f"{source}: unknown top-level keys {extra}; the file holds one key, `specialists:`"
            raise ValidationError(message, [{"item": None, "field": str(extra[0]), "message": message}])
        data = data.get("specialists")
    if not isinstance(data, list) or not data:
        message = f"{source}: expected `specialists:` followed by a non-empty list of specialists"
        raise ValidationError(message, [{"item": None, "field": "specialists", "message": message}])

    problems: list[dict[str, Any]] = []
    specialists: list[Specialist] = []
    seen: dict[str, int] = {}
    for i, raw in enumerate(data):
        name = f"specialist {i + 1}"
        if isinstance(raw, Mapping) and isinstance(raw.get("id"), str):
            name += f" ({raw['id']})"
        if not isinstance(raw, Mapping):
            problems.append({"item": i, "specialist": name, "field": "", "message": f"must be a mapping, got {type(raw).__name__}"})
            continue
        try:
            spec = Specialist.model_validate(dict(raw))
        except pydantic.ValidationError as exc:
            for err in exc.errors():
                loc = ".".join(str(p) for p in err["loc"])
                problems.append({"item": i, "specialist": name, "field": loc, "message": _pydantic_message(err)})
            continue
        if spec.id in seen:
            problems.append(
                {"item": i, "specialist": name, "field": "id",
                 "message": f"duplicate id; specialist {seen[spec.id] + 1} already uses {spec.id!r}"}
            )
            continue
        seen[spec.id] = i
        specialists.append(spec)
    if problems:
        lines = [f"{p['specialist']}: {p['field'] + ': ' if p['field'] else ''}{p['message']}" for p in problems]
        raise ValidationError(f"{source}: {'; '.join(lines)} (nothing was registered)", problems)
    return specialists


def _pydantic_message(err: Mapping[str, Any]) -> str:
    message = str(err.get("msg", "invalid"))
    if err.get("type") == "extra_forbidden":
        return "unknown field (check its spelling)"
    if err.get("type") == "string_pattern_mismatch":
        pattern = (err.get("ctx") or {}).get("pattern", "")
        if pattern.startswith("^[a-z]"):
            return f"{err.get('input')!r} must be lower_snake_case (letters, digits, _), starting with a letter"
        return f"{err.get('input')!r} must be an identifier (letters, digits, _)"
    if "input" in err and err.get("type") not in ("missing",):
        return f"{message} (got {err['input']!r})"
    return message


# ---- scoring settings ------------------------------------------------------------------------------
@dataclass(frozen=True)
class SpecialistWeights:
    """Weights of the three similarities; normalised to sum 1 so scores stay on one scale."""

    canonical: float = 0.5
    predicates: float = 0.3
    objects: float = 0.2

    def __post_init__(self) -> None:
        values = (self.canonical, self.predicates, self.objects)
        if any(not math.isfinite(v) or v < 0 for v in values) or sum(values) <= 0:
            raise ConfigError(
                f"specialist weights must be >= 0 with a positive sum, got canonical={self.canonical}, "
                f"predicates={self.predicates}, objects={self.objects}"
            )

    def normalised(self) -> tuple[float, float, float]:
        total = self.canonical + self.predicates + self.objects
        return self.canonical / total, self.predicates / total, self.objects / total


@dataclass(frozen=True)
class SpecialistBands:
    """Score thresholds of the bands: ``score > strong`` is strong, ``>= good`` good, ``>= possible``
    possible, anything lower weak.

    The defaults are calibrated for all-MiniLM-L6-v2 with the lexical share on the development sets
    (calibration, eval, holdout and holdout2 of ``bench/``): ``possible`` is the cut that best
    separates the top scores of requests that match a specialist from those that match none;
    ``good`` lies above every wrong top-1 of those sets; ``strong`` is the median score of the
    specialists' own predicate phrases sent as requests (a request that says it the way the YAML does). The
    issue's 0.90 / 0.80 / 0.70 fit embedders whose paraphrases score near 1; with another embedder,
    re-run the bench and set ``BRAIN_SPECIALIST_BAND_*``.
    """

    strong: float = 0.67
    good: float = 0.48
    possible: float = 0.30

    def __post_init__(self) -> None:
        values = (self.possible, self.good, self.strong)
        if any(not math.isfinite(v) for v in values) or not (self.possible <= self.good <= self.strong):
            raise ConfigError(
                f"specialist bands must satisfy possible <= good <= strong, got possible={self.possible}, "
                f"good={self.good}, strong={self.strong}"
            )

    def band(self, score: float) -> str:
        if score > self.strong:
            return "strong"
        if score >= self.good:
            return "good"
        if score >= self.possible:
            return "possible"
        return "weak"


# ---- results ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SpecialistMatch:
    """One ranked specialist: ``score = weighted similarities - penalty``, with every part."""

    id: str
    description: str
    score: float
    band: str
    canonical: float  # cosine similarity of the request to the canonical phrase
    predicates: float  # ... to the mean of the predicates
    objects: float  # ... to the mean of the objects
    not_similarity: float | None  # highest similarity to a not example (None: it has none)
    closest_not: str | None  # that not example
    penalty: float
    lexical: float = 0.0  # this specialist's share of the request's BM25 evidence (0..1)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


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

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class SpecialistRequest(NamedTuple):
    """A ``SPECIALIST_REQUEST[name:{json}]`` marker: unpacks as ``(name, params)``."""

    name: str
    params: dict[str, Any]
    start: int  # where the marker starts in the text
    end: int  # one past its closing ``]``


# ---- the registry ----------------------------------------------------------------------------------
@dataclass
class _Entry:
    spec: Specialist
    vectors_hash: str
    spec_hash: str
    canonical: np.ndarray
    predicates: np.ndarray
    objects: np.ndarray
    nots: np.ndarray  # (n_not, d)


class _TTLCache:
    """Request -> full ranking, for ``ttl`` seconds of ``clock``; least recently used beyond ``maxsize`` go."""

    def __init__(self, ttl: float, maxsize: int, clock: Callable[[], float]):
        self.ttl = ttl
        self.maxsize = maxsize
        self.clock = clock
        self._data: OrderedDict[str, tuple[float, tuple[SpecialistMatch, ...]]] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def get(self, key: str) -> tuple[SpecialistMatch, ...] | None:
        item = self._data.get(key)
        if item is None or item[0] <= self.clock():
            if item is not None:
                del self._data[key]
            self.misses += 1
            return None
        self._data.move_to_end(key)
        self.hits += 1
        return item[1]

    def put(self, key: str, value: tuple[SpecialistMatch, ...]) -> None:
        if self.ttl <= 0 or self.maxsize <= 0:
            return
        self._data[key] = (self.clock() + self.ttl, value)
        self._data.move_to_end(key)
        while len(self._data) > self.maxsize:
            self._data.popitem(last=False)

    def clear(self) -> None:
        self._data.clear()

    def info(self) -> dict[str, Any]:
        return {"hits": self.hits, "misses": self.misses, "size": len(self._data), "maxsize": self.maxsize, "ttl": self.ttl}


def normalise_request(text: str) -> str:
    """The cache key of a request: lower case, runs of whitespace collapsed."""
    return " ".join(text.split()).lower()


class SpecialistRegistry:
    """Registered specialists, their vectors in Chroma's ``specialists`` collection and in process.

    Opening a registry loads what an earlier registration stored (nothing is embedded); call
    :meth:`register` to bring it in line with the YAML file.

    Parameters (the settings the lead may expose; defaults in brackets):

    * ``store`` -- the :class:`~brain.rag_store.RagStore` whose Chroma client and embedder are used.
    * ``path`` [``config/specialists.yaml``] -- the YAML file :meth:`register` reads by default.
    * ``collection`` [``specialists``] -- the Chroma collection of the specialists' vectors.
    * ``weights`` [0.5 / 0.3 / 0.2] -- :class:`SpecialistWeights`.
    * ``not_penalty`` [1.0], ``not_margin`` [0.50] -- the ``not`` penalty (see the module docstring).
    * ``bands`` -- :class:`SpecialistBands` [strong 0.67 / good 0.48 / possible 0.30, for all-MiniLM-L6-v2 with the lexical share].
    * ``cache_ttl`` [300 s], ``cache_size`` [1024] -- the request cache (0 disables it).
    * ``embedder`` -- defaults to the store's; must have the same name (tests wrap it to count calls).
    * ``clock`` [``time.monotonic``] -- the cache's clock.
    """

    def __init__(
        self,
        store: Any,
        *,
        path: str | Path = DEFAULT_PATH,
        collection: str = DEFAULT_COLLECTION,
        weights: SpecialistWeights | None = None,
        not_penalty: float = 1.0,
        not_margin: float = 0.50,
        lexical_weight: float = DEFAULT_LEXICAL_WEIGHT,
        bands: SpecialistBands | None = None,
        cache_ttl: float = 300.0,
        cache_size: int = 1024,
        embedder: Any | None = None,
        clock: Callable[[], float] = time.monotonic,
    ):
        if not math.isfinite(not_penalty) or not_penalty < 0:
            raise ConfigError(f"not_penalty must be >= 0, got {not_penalty}")
        if not math.isfinite(not_margin) or not -1.0 <= not_margin <= 1.0:
            raise ConfigError(f"not_margin must be between -1 and 1, got {not_margin}")
        if not math.isfinite(lexical_weight) or not 0.0 <= lexical_weight <= 1.0:
            raise ConfigError(f"lexical_weight must be between 0 and 1, got {lexical_weight}")
        if not math.isfinite(cache_ttl) or cache_ttl < 0:
            raise ConfigError(f"cache_ttl must be >= 0 seconds, got {cache_ttl}")
        if cache_size < 0:
            raise ConfigError(f"cache_size must be >= 0, got {cache_size}")
        self.store = store
        self.path = Path(path)
        self.collection_name = collection
        self.weights = weights or SpecialistWeights()
        self.not_penalty = float(not_penalty)
        self.not_margin = float(not_margin)
        self.lexical_weight = float(lexical_weight)
        self.bands = bands or SpecialistBands()
        self.embedder = embedder or store.embedder
        if self.embedder.name != store.embedder.name:
            raise EmbeddingModelMismatch(
                f"the registry's embedder {self.embedder.name} is not the store's {store.embedder.name}"
            )
        self._lock = threading.RLock()
        self._cache = _TTLCache(float(cache_ttl), int(cache_size), clock)
        self._entries: dict[str, _Entry] = {}
        self._matrix: dict[str, np.ndarray] = {}
        self._lexical = LexicalIndex([])
        self._order: list[str] = []
        self.col = self._open_collection()
        self._load()

    @classmethod
    def from_settings(cls, store: Any, settings: Any | None = None, **overrides: Any) -> SpecialistRegistry:
        """A registry configured from ``Settings`` fields named as in :data:`SETTINGS_FIELDS`
        (fields the Settings model does not have yet keep the defaults)."""
        settings = settings if settings is not None else store.settings
        kwargs: dict[str, Any] = {}
        for field_name, (param, _env) in SETTINGS_FIELDS.items():
            if hasattr(settings, field_name):
                kwargs[param] = getattr(settings, field_name)
        weights = {k: kwargs.pop(f"weight_{k}") for k in ("canonical", "predicates", "objects") if f"weight_{k}" in kwargs}
        if weights:
            kwargs["weights"] = SpecialistWeights(**weights)
        bands = {k: kwargs.pop(f"band_{k}") for k in ("strong", "good", "possible") if f"band_{k}" in kwargs}
        if bands:
            kwargs["bands"] = SpecialistBands(**bands)
        kwargs.update(overrides)
        return cls(store, **kwargs)

    # ---- the collection ----------------------------------------------------------------------------
    def _open_collection(self):
        from brain.rag_store import GuardedCollection, open_cosine_collection

        col = open_cosine_collection(
            self.store.client, self.collection_name, self.embedder, kind="specialists",
            switch=("Set BRAIN_SPECIALISTS_COLLECTION to a new name (registration re-embeds the YAML there) "
                    "or delete that collection"),
            rename="set BRAIN_SPECIALISTS_COLLECTION to another name",
        )
        return GuardedCollection(col, self.store.settings.chroma_url or "the data directory")

    def _all_records(self, include: list[str]) -> dict[str, list]:
        page = int(self.store.client.get_max_batch_size())
        out: dict[str, list] = {"ids": [], "metadatas": [], "embeddings": [], "documents": []}
        offset = 0
        while True:
            got = self.col.get(include=include, limit=page, offset=offset)
            ids = got.get("ids") or []
            out["ids"].extend(ids)
            for key in ("metadatas", "embeddings", "documents"):
                value = got.get(key)
                if value is not None:
                    out[key].extend(value)
            if len(ids) < page:
                return out
            offset += page

    def _load(self) -> None:
        """Rebuild the in-process state from the collection; incomplete specialists (an interrupted
        registration) are left out until the next :meth:`register` completes them."""
        records = self._all_records(["metadatas", "embeddings"])
        grouped: dict[str, dict[str, tuple[dict, np.ndarray]]] = {}
        for rid, meta, emb in zip(records["ids"], records["metadatas"], records["embeddings"]):
            meta = meta or {}
            sid = meta.get("specialist")
            if isinstance(sid, str):
                grouped.setdefault(sid, {})[rid] = (meta, np.asarray(emb, dtype=np.float32))
        entries: dict[str, _Entry] = {}
        for sid, recs in grouped.items():
            entry = self._entry_from_records(sid, recs)
            if entry is None:
                log.warning("specialist %r is stored incompletely; the next registration will re-embed it", sid)
                continue
            entries[sid] = entry
        with self._lock:
            self._entries = entries
            self._rebuild()

    def _entry_from_records(self, sid: str, recs: dict[str, tuple[dict, np.ndarray]]) -> _Entry | None:
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
        return _Entry(
            spec=spec, vectors_hash=vh, spec_hash=spec.spec_hash, canonical=canonical,
            predicates=parts["predicates"], objects=parts["objects"],
            nots=np.stack(nots) if nots else np.zeros((0, dim), dtype=np.float32),
        )

    def _rebuild(self) -> None:
        self._order = sorted(self._entries)
        dim = int(self.embedder.dimension)
        entries = [self._entries[s] for s in self._order]

        def stack(rows: list[np.ndarray]) -> np.ndarray:
            return np.stack(rows).astype(np.float32) if rows else np.zeros((0, dim), dtype=np.float32)

        self._matrix = {
            "canonical": stack([e.canonical for e in entries]),
            "predicates": stack([e.predicates for e in entries]),
            "objects": stack([e.objects for e in entries]),
            "nots": stack([v for e in entries for v in e.nots]),
        }
        self._not_owner = np.array([i for i, e in enumerate(entries) for _ in range(len(e.nots))], dtype=np.int64)
        self._not_text = [t for e in entries for t in e.spec.semantics.not_]
        # BM25 over the words each specialist is described by (its canonical phrase, predicates, objects)
        self._lexical = LexicalIndex([
            tokenize(" ".join([e.spec.semantics.canonical, *e.spec.semantics.predicates, *e.spec.semantics.objects]))
            for e in entries
        ])
        self._cache.clear()

    # ---- registration -------------------------------------------------------------------------------
    def register(
        self, source: str | Path | Sequence[Specialist] | None = None, *, prune: bool = True
    ) -> RegistrationReport:
        """Bring the registry in line with a YAML file (default :attr:`path`) or a list of specialists.

        The input is validated whole before anything is embedded or stored. Unchanged specialists
        embed nothing; a specialist whose embedded phrases changed is re-embedded; one whose
        description or params alone changed is rewritten without embedding. With ``prune`` (the
        default: the file is the registry) specialists that are no longer listed are deleted;
        ``prune=False`` only adds and updates. The request cache is cleared.
        """
        if source is None:
            specs = load_specialists(self.path)
        elif isinstance(source, (str, Path)):
            specs = load_specialists(source)
        else:
            specs = validate_specialists([s.to_dict() if isinstance(s, Specialist) else s for s in source])
        report = RegistrationReport()
        with self._lock:
            to_embed: list[Specialist] = []
            rewrite: list[Specialist] = []
            for spec in specs:
                old = self._entries.get(spec.id)
                if old is None:
                    report.added.append(spec.id)
                    to_embed.append(spec)
                elif old.vectors_hash != spec.vectors_hash:
                    report.updated.append(spec.id)
                    to_embed.append(spec)
                elif old.spec_hash != spec.spec_hash:
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
                new_entries[spec.id] = _entry_from_vectors(spec, vectors[row : row + n])
                row += n
            for spec in rewrite:
                old = self._entries[spec.id]
                new_entries[spec.id] = _Entry(spec, old.vectors_hash, spec.spec_hash, old.canonical, old.predicates, old.objects, old.nots)

            ids, embeddings, documents, metadatas = [], [], [], []
            for spec in [*to_embed, *rewrite]:
                for rid, vec, doc, meta in _records(new_entries[spec.id]):
                    ids.append(rid)
                    embeddings.append(vec)
                    documents.append(doc)
                    metadatas.append(meta)
            self._write(ids, embeddings, documents, metadatas, new_entries)
            self._entries = new_entries
            self._rebuild()
        log.info(
            "specialists: %d added, %d updated, %d unchanged, %d removed, %d texts embedded",
            len(report.added), len(report.updated), len(report.unchanged), len(report.removed), report.embedded,
        )
        return report

    def _write(self, ids, embeddings, documents, metadatas, entries: Mapping[str, _Entry]) -> None:
        """Upsert the new records first, then delete every record that is not one of ``entries``'
        (removed specialists, surplus ``not`` records, leftovers of an interrupted run): a crash in
        between leaves only records that :meth:`_load` ignores and the next registration deletes."""
        batch = int(self.store.client.get_max_batch_size())
        for start in range(0, len(ids), batch):
            end = start + batch
            self.col.upsert(
                ids=ids[start:end], embeddings=[np.asarray(e, dtype=np.float32) for e in embeddings[start:end]],
                documents=documents[start:end], metadatas=metadatas[start:end],
            )
        wanted = {rid for entry in entries.values() for rid, *_ in _records(entry)}
        stale = [rid for rid in self._all_records([])["ids"] if rid not in wanted]
        for start in range(0, len(stale), batch):
            self.col.delete(ids=stale[start : start + batch])

    # ---- reading --------------------------------------------------------------------------------------
    def list_specialists(self) -> list[Specialist]:
        """Every registered specialist, by id."""
        with self._lock:
            return [self._entries[s].spec for s in self._order]

    def get(self, specialist_id: str) -> Specialist | None:
        with self._lock:
            entry = self._entries.get(specialist_id)
            return entry.spec if entry else None

    def __len__(self) -> int:
        return len(self._entries)

    def cache_info(self) -> dict[str, Any]:
        return self._cache.info()

    def find_specialists(self, request: str, k: int = 3) -> list[SpecialistMatch]:
        """The ``k`` best specialists for a request, best first, each with its score, parts and band."""
        if not isinstance(request, str) or not request.strip():
            raise ValidationError("request must be a non-empty string", [{"item": None, "field": "request", "message": "empty"}])
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= 1000:
            raise ValidationError(f"k must be an integer between 1 and 1000, got {k!r}", [{"item": None, "field": "k", "message": "out of range"}])
        key = normalise_request(request)
        with self._lock:
            ranking = self._cache.get(key)
        if ranking is None:
            # embedded outside the lock, so concurrent requests do not wait for each other's model call;
            # the normalised text is embedded so that every spelling sharing a cache key shares a ranking
            q = np.asarray(self.embedder.embed_query(key), dtype=np.float32)
            with self._lock:  # ranked against the specialists registered now
                ranking = self._rank(q, key)
                self._cache.put(key, ranking)
        return list(ranking[:k])

    def _rank(self, q: np.ndarray, request: str = "") -> tuple[SpecialistMatch, ...]:
        if not self._order:
            return ()
        m = self._matrix
        wc, wp, wo = self.weights.normalised()
        sc, sp, so = m["canonical"] @ q, m["predicates"] @ q, m["objects"] @ q
        base = wc * sc + wp * sp + wo * so
        n = len(self._order)
        not_max = np.full(n, -np.inf)
        not_arg = np.full(n, -1)
        if len(self._not_owner):
            sims = m["nots"] @ q
            for j, (owner, sim) in enumerate(zip(self._not_owner, sims)):
                if sim > not_max[owner]:
                    not_max[owner], not_arg[owner] = sim, j
        penalty = np.where(np.isfinite(not_max), self.not_penalty * np.maximum(0.0, not_max - self.not_margin), 0.0)
        lexical = np.zeros(n)
        if self.lexical_weight > 0 and request:
            bm25 = self._lexical.scores(tokenize(request))
            # each specialist's share of the evidence, of at least LEXICAL_FLOOR points: one common word
            # shared with one specialist is a small share, not all of it; no overlap, no bonus
            lexical = bm25 / max(float(bm25.sum()), LEXICAL_FLOOR)
        scores = base - penalty + self.lexical_weight * lexical
        order = sorted(range(n), key=lambda i: (-scores[i], self._order[i]))
        out = []
        for i in order:
            entry = self._entries[self._order[i]]
            has_not = not_arg[i] >= 0
            out.append(SpecialistMatch(
                id=entry.spec.id, description=entry.spec.description, score=float(scores[i]),
                band=self.bands.band(float(scores[i])), canonical=float(sc[i]), predicates=float(sp[i]),
                objects=float(so[i]), not_similarity=float(not_max[i]) if has_not else None,
                closest_not=self._not_text[not_arg[i]] if has_not else None, penalty=float(penalty[i]),
                lexical=float(lexical[i]),
            ))
        return tuple(out)

    def parse_specialist_request(self, text: str) -> list[SpecialistRequest]:
        """Every ``SPECIALIST_REQUEST[name:{json}]`` marker in ``text``, checked against the registered
        specialists; see :func:`parse_specialist_requests`."""
        with self._lock:
            known = {s: e.spec for s, e in self._entries.items()}
        return parse_specialist_requests(text, known)


def _record_id(sid: str, kind: str, position: int | None = None) -> str:
    return f"{sid}#{kind}" if position is None else f"{sid}#{kind}-{position}"


def _unit_mean(rows: np.ndarray) -> np.ndarray:
    mean = rows.mean(axis=0)
    norm = float(np.linalg.norm(mean))
    # the inputs are unit vectors of phrases about one thing; a mean near zero would mean they cancel
    return (mean / norm if norm > 1e-6 else rows[0]).astype(np.float32)


def _entry_from_vectors(spec: Specialist, vectors: np.ndarray) -> _Entry:
    s = spec.semantics
    p, o = len(s.predicates), len(s.objects)
    return _Entry(
        spec=spec, vectors_hash=spec.vectors_hash, spec_hash=spec.spec_hash,
        canonical=vectors[0].astype(np.float32),
        predicates=_unit_mean(vectors[1 : 1 + p]),
        objects=_unit_mean(vectors[1 + p : 1 + p + o]),
        nots=np.ascontiguousarray(vectors[1 + p + o :], dtype=np.float32),
    )


def _records(entry: _Entry) -> list[tuple[str, np.ndarray, str, dict[str, Any]]]:
    spec, s = entry.spec, entry.spec.semantics
    base = {"specialist": spec.id, "vectors_hash": entry.vectors_hash}
    head = {**base, "kind": "canonical", "spec": json.dumps(spec.to_dict(), ensure_ascii=False), "spec_hash": entry.spec_hash}
    out = [
        (_record_id(spec.id, "canonical"), entry.canonical, s.canonical, head),
        (_record_id(spec.id, "predicates"), entry.predicates, "; ".join(s.predicates), {**base, "kind": "predicates"}),
        (_record_id(spec.id, "objects"), entry.objects, "; ".join(s.objects), {**base, "kind": "objects"}),
    ]
    for i, (text, vec) in enumerate(zip(s.not_, entry.nots)):
        out.append((_record_id(spec.id, "not", i), vec, text, {**base, "kind": "not", "position": i}))
    return out


# ---- SPECIALIST_REQUEST markers --------------------------------------------------------------------
MARKER = "SPECIALIST_REQUEST["
_NAME = re.compile(r"[^\s:\]\[{]+")
_decoder = json.JSONDecoder()


def parse_specialist_requests(text: str, specialists: Mapping[str, Specialist] | Iterable[Specialist]) -> list[SpecialistRequest]:
    """Find every ``SPECIALIST_REQUEST[name:{json}]`` in model output and check each against the
    specialists' declared params: the name must be registered, the JSON an object, every required
    param present, no undeclared param, and each value of its declared type. Raises one
    :class:`ValidationError` listing every problem (``item`` is the marker's number, from 0), with
    positions as line and column of ``text``; no markers gives ``[]``."""
    if not isinstance(text, str):
        raise ValidationError(f"text must be a string, got {type(text).__name__}", [{"item": None, "field": "text", "message": "not a string"}])
    known = dict(specialists) if isinstance(specialists, Mapping) else {s.id: s for s in specialists}
    requests: list[SpecialistRequest] = []
    problems: list[dict[str, Any]] = []
    pos = 0
    index = 0
    while True:
        start = text.find(MARKER, pos)
        if start < 0:
            break
        item = index
        index += 1
        cursor = start + len(MARKER)
        where = _where(text, start)

        def fail(field_name: str, message: str, item: int = item, where: str = where) -> None:
            problems.append({"item": item, "field": field_name, "message": f"marker {item + 1} at {where}: {message}"})

        name_match = _NAME.match(text, cursor)
        if not name_match:
            fail("name", "expected SPECIALIST_REQUEST[name:{...}] with a specialist name after the [")
            pos = cursor
            continue
        name = name_match.group(0)
        cursor = name_match.end()
        if cursor >= len(text) or text[cursor] != ":":
            fail("name", f"expected ':' and a JSON object after the name {name!r} at {_where(text, cursor)}")
            pos = cursor
            continue
        cursor = _skip_space(text, cursor + 1)
        try:
            params, cursor = _decoder.raw_decode(text, cursor)
        except json.JSONDecodeError as exc:
            fail("params", f"bad JSON for {name!r}: {exc.msg} at {_where(text, exc.pos)}")
            pos = cursor
            continue
        cursor = _skip_space(text, cursor)
        if cursor >= len(text) or text[cursor] != "]":
            fail("params", f"expected ']' to close the request for {name!r} at {_where(text, cursor)}")
            pos = cursor
            continue
        end = cursor + 1
        pos = end
        if not isinstance(params, dict):
            fail("params", f"the params of {name!r} must be a JSON object {{...}}, got {type(params).__name__}")
            continue
        spec = known.get(name)
        if spec is None:
            listed = ", ".join(sorted(known)) or "none are registered"
            fail("name", f"unknown specialist {name!r}; known specialists: {listed}")
            continue
        before = len(problems)
        for message, field_name in _check_params(spec, params):
            fail(field_name, message)
        if len(problems) == before:
            requests.append(SpecialistRequest(name, params, start, end))
    if problems:
        raise ValidationError("; ".join(p["message"] for p in problems), problems)
    return requests


def _check_params(spec: Specialist, params: dict[str, Any]) -> list[tuple[str, str]]:
    out = []
    declared = {p.name: p for p in spec.params}
    for p in spec.params:
        if p.required and p.name not in params:
            out.append((f"{spec.id} needs the parameter {p.name!r} ({p.type}: {p.description or 'no description'})", f"params.{p.name}"))
    for key, value in params.items():
        p = declared.get(key)
        if p is None:
            names = ", ".join(declared) or "none"
            out.append((f"{spec.id} has no parameter {key!r}; its parameters: {names}", f"params.{key}"))
        elif not _is_type(value, p.type):
            out.append((f"{spec.id}.{key} must be {_ARTICLE[p.type]}, got {json.dumps(value)[:60]}", f"params.{key}"))
    return out


_ARTICLE = {"string": "a string", "integer": "an integer", "number": "a number", "boolean": "a boolean (true/false)",
            "array": "an array [...]", "object": "an object {...}"}


def _is_type(value: Any, kind: str) -> bool:
    if kind == "string":
        return isinstance(value, str)
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "array":
        return isinstance(value, list)
    return isinstance(value, dict)


def _skip_space(text: str, pos: int) -> int:
    while pos < len(text) and text[pos].isspace():
        pos += 1
    return pos


def _where(text: str, pos: int) -> str:
    line = text.count("\n", 0, pos) + 1
    column = pos - (text.rfind("\n", 0, pos) + 1) + 1
    return f"line {line}, column {column}"


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
    "specialist_band_strong": ("band_strong", "BRAIN_SPECIALIST_BAND_STRONG"),
    "specialist_band_good": ("band_good", "BRAIN_SPECIALIST_BAND_GOOD"),
    "specialist_band_possible": ("band_possible", "BRAIN_SPECIALIST_BAND_POSSIBLE"),
    "specialist_cache_ttl_seconds": ("cache_ttl", "BRAIN_SPECIALIST_CACHE_TTL_SECONDS"),
    "specialist_cache_size": ("cache_size", "BRAIN_SPECIALIST_CACHE_SIZE"),
}

__all__ = [
    "DEFAULT_COLLECTION",
    "DEFAULT_PATH",
    "SETTINGS_FIELDS",
    "RegistrationReport",
    "Specialist",
    "SpecialistBands",
    "SpecialistMatch",
    "SpecialistParam",
    "SpecialistRegistry",
    "SpecialistRequest",
    "SpecialistSemantics",
    "SpecialistWeights",
    "load_specialists",
    "normalise_request",
    "parse_specialist_requests",
    "specialists_from_yaml",
    "validate_specialists",
]
