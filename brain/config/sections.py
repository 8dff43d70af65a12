"""The sections of the settings and the field types they declare: each section's field factory
enforces its environment prefix (the naming rule), so the rule cannot drift."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AliasChoices, BeforeValidator, Field
from pydantic_settings import NoDecode

from brain.config.values import DEFAULT_EMBEDDER, DEFAULT_SUMMARY_MODEL
from brain.model.provider_names import E5_EMBEDDER, MINILM_EMBEDDER
from brain.model.schemas import DOC_TYPES

#: the settings that name files or directories
PATH_FIELDS = ("data_dir", "persona_path", "specialists_path", "mirror_path", "index_snapshot_path", "snapshot_key_dir")
#: the specialists' defaults per embedder, one entry per embedder they were measured with:
#:
#: * ``units`` -- the embedder's cosine similarities put into the reference embedder's (MiniLM's) units,
#:   ``(similarity - shift) / spread``, so that the weights, the ``not`` margin and the lexical share keep
#:   one meaning; from the relevance calibration (brain.rules.relevance) by the rule of
#:   brain.features.specialists.scoring.SimilarityUnits.from_calibration;
#: * ``confidence`` -- the coefficients of the score-and-length confidence
#:   (brain.features.specialists.scoring.SpecialistConfidence), a logistic fit on the development sets;
#: * ``bands`` -- the thresholds of the bands on a match's confidence.
#:
#: Fitted on the development sets only (bench/SPECIALISTS_RESULTS.md, bench/SPECIALISTS_E5_RESULTS.md).
#: An embedder without an entry gets its units from its own relevance calibration and the reference's
#: confidence and bands. The BRAIN_SPECIALIST_CONFIDENCE_* and BRAIN_SPECIALIST_BAND_* settings override
#: whichever applies, one value at a time.
SPECIALIST_EMBEDDER_DEFAULTS: dict[str, dict[str, dict[str, float]]] = {
    MINILM_EMBEDDER: {
        "units": {"shift": 0.0, "spread": 1.0},
        "confidence": {"intercept": -6.30, "score": 13.75, "length": 1.36},
        "bands": {"strong": 0.90, "good": 0.65, "possible": 0.62},
    },
    # units by that rule from its calibration (unrelated pairs 0.733 +- 0.019); confidence refitted and bands
    # chosen by the reference's rules on the reference's six development sets (bench/SPECIALISTS_E5_RESULTS.md)
    E5_EMBEDDER: {
        "units": {"shift": 0.725, "spread": 0.24},
        "confidence": {"intercept": -6.74, "score": 9.50, "length": 1.35},
        "bands": {"strong": 0.92, "good": 0.73, "possible": 0.70},
    },
}
#: the embedder whose units the others are mapped into, and whose confidence and bands an embedder
#: without an entry falls back to
SPECIALIST_REFERENCE_EMBEDDER = MINILM_EMBEDDER
#: the reference embedder's band thresholds and confidence coefficients (brain.features.specialists'
#: SpecialistBands and SpecialistConfidence default to them)
SPECIALIST_BAND_DEFAULTS = SPECIALIST_EMBEDDER_DEFAULTS[SPECIALIST_REFERENCE_EMBEDDER]["bands"]
SPECIALIST_CONFIDENCE_DEFAULTS = SPECIALIST_EMBEDDER_DEFAULTS[SPECIALIST_REFERENCE_EMBEDDER]["confidence"]


def key_dir_problem(key_dir: Path, data_dir: Path) -> str | None:
    """Why ``key_dir`` cannot hold the embedded store's index snapshot keys, or None: inside the data
    directory, whoever can write that directory could read the key and re-sign an edited snapshot."""
    key, data = key_dir.resolve(), data_dir.resolve()
    if key != data and data not in key.parents:
        return None
    return (
        f"BRAIN_SNAPSHOT_KEY_DIR ({key_dir}) is inside BRAIN_DATA_DIR ({data_dir}): the key that signs the index "
        f"snapshot must be out of reach of whoever can write the data directory, or they could re-sign an edited "
        f"snapshot. Set BRAIN_SNAPSHOT_KEY_DIR to a directory outside it (the default is "
        f"$XDG_STATE_HOME/brain/snapshot-keys, ~/.local/state/brain/snapshot-keys), or BRAIN_INDEX_SNAPSHOT=false"
    )


def specialist_bands_in_order(strong: float, good: float, possible: float) -> bool:
    """The one rule for the specialist bands: finite, and ``possible <= good <= strong``. Equal
    thresholds are allowed: they leave the band between them empty."""
    return all(math.isfinite(v) for v in (strong, good, possible)) and possible <= good <= strong


@dataclass(frozen=True)
class SettingGroup:
    """One section of the settings: its environment prefix, title and what its settings decide."""

    key: str
    prefix: str
    title: str
    about: str


#: the sections, in the order the documentation lists them
SETTING_GROUPS: dict[str, SettingGroup] = {}

#: variables named by another program's convention, so one value serves both
FOREIGN_VARIABLES = {"OLLAMA_HOST": "the variable Ollama's own tools and client read"}


def _group(key: str, prefix: str, title: str, about: str) -> Callable[..., Any]:
    """A field factory for one section: ``setting("ENV_NAME", default, "what it does (unit)", **constraints)``.

    ``default`` may be a function (called at load time) when the fact belongs to a provider; ``also``
    lists older variable names that keep working (the first name wins when several are set);
    ``example`` is what the generated ``config/defaults.env`` shows for a setting that is unset by
    default. The section's prefix is enforced here, so the naming rule cannot drift."""
    SETTING_GROUPS[key] = SettingGroup(key, prefix, title, about)

    def setting(
        env: str,
        default: object,
        description: str,
        *,
        also: tuple[str, ...] = (),
        example: str | None = None,
        **constraints: Any,
    ) -> Any:
        if not env.startswith(prefix) and env not in FOREIGN_VARIABLES:
            raise TypeError(f"{env}: settings in the {key!r} section are named {prefix}*")
        extra: dict[str, Any] = {"group": key}
        if example is not None:
            extra["example"] = example
        if also:
            extra["also"] = list(also)
        if callable(default) and not isinstance(default, type):
            constraints["default_factory"] = default
        else:
            constraints["default"] = default
        return Field(
            validation_alias=AliasChoices(env, *also), description=description, json_schema_extra=extra, **constraints
        )

    return setting


context_setting = _group(
    "context",
    "RAG_",
    "Context",
    "what a chat request's context block holds: which sections, how many items, the budget",
)
ranking_setting = _group(
    "ranking",
    "RAG_",
    "Ranking memories",
    "relevance first: a memory is shown only when its relevance (similarity + w_lex * lexical "
    "match) reaches the floor and is within the margin of the best one's; "
    "score = w_sim * relevance + w_imp * importance/5 + w_rec * 0.5 ** (age / half-life) "
    "orders those (RAG_MEMORY_RANKING=reference: no gate, no lexical part, the RAG_WEIGHT_* "
    "weights)",
)
storage_setting = _group("storage", "BRAIN_", "Storage", "where the data lives and how retrieval is served")
knowledge_setting = _group(
    "knowledge", "BRAIN_", "Knowledge base and persona", "chunking of ingested files; the persona file"
)
embedding_setting = _group(
    "embedding",
    "BRAIN_",
    "Embedders and model servers",
    "the embedding model, and the servers the models are asked on: Ollama, or any OpenAI-compatible API",
)
mirror_setting = _group("mirror", "BRAIN_", "The Engram mirror", "the SQLite mirror of memories and conversations")
chat_setting = _group(
    "chat",
    "BRAIN_",
    "Summaries, formation and consolidation",
    "conversation summaries (a model, with an extractive fallback), memories formed from the "
    "conversation by a model, and memory consolidation",
)
specialists_setting = _group(
    "specialists",
    "BRAIN_",
    "Specialists",
    "score = w_c*canonical + w_p*predicates + w_o*objects + w_l*lexical - penalty * "
    "max(0, similarity to the closest `not` example - margin); confidence = logistic(intercept + "
    "c_s*score + c_l*ln(words, at most 40)); bands on the confidence; similarities in MiniLM's units, "
    "the confidence and the bands per embedder (unset: the embedder's defaults)",
)
api_setting = _group(
    "api", "BRAIN_", "The HTTP API", "`brain serve`; a token is required to bind a non-loopback address"
)

#: the closed set of summarisers; each is the ``kind`` of a class in brain.providers.summarizers
SummarizerKind = Literal["ollama", "openai", "extractive"]


def document_types(value: Any) -> Any:
    """A comma-separated value (environment, env files) as a tuple; other values as given."""
    if isinstance(value, str):
        return tuple(v.strip() for v in value.split(",") if v.strip())
    return value


#: document types as a tuple; the environment gives them comma-separated (not JSON)
DocTypeList = Annotated[tuple[str, ...], NoDecode, BeforeValidator(document_types)]


def default_embedder() -> str:
    return DEFAULT_EMBEDDER


def default_summary_model() -> str:
    return DEFAULT_SUMMARY_MODEL


def checked_types(value: tuple[str, ...], why_memory: str) -> tuple[str, ...]:
    unknown = [v for v in value if v not in DOC_TYPES]
    if unknown:
        raise ValueError(f"unknown document types {unknown}; choose from {', '.join(DOC_TYPES)}")
    if "memory" not in value:
        raise ValueError(f"must include memory ({why_memory})")
    return tuple(dict.fromkeys(value))
