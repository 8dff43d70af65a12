"""Settings: one typed model read from the environment, ``.env`` and ``config/defaults.env``.

Nothing else in brain reads ``os.environ``. Every setting is named by its environment
variable; Python callers may also pass the field name (``Settings(memory_top_k=5)``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import annotated_types
import pydantic
from pydantic import AliasChoices, Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from brain.errors import ConfigError

DEFAULTS_FILE = Path("config") / "defaults.env"
LOCAL_ENV_FILE = Path(".env")


def _env(name: str, field_name: str) -> AliasChoices:
    return AliasChoices(name, field_name)


class Settings(BaseSettings):
    """brain's configuration. Out-of-range values raise :class:`ConfigError` naming the variable."""

    model_config = SettingsConfigDict(
        env_file=(DEFAULTS_FILE, LOCAL_ENV_FILE),
        env_file_encoding="utf-8",
        extra="ignore",
        case_sensitive=False,
        populate_by_name=True,
        validate_default=True,
    )

    # --- retrieval switches and sizes -------------------------------------------------------
    rag_enabled: bool = Field(True, validation_alias=_env("RAG_ENABLED", "rag_enabled"))
    enable_persona: bool = Field(True, validation_alias=_env("RAG_ENABLE_PERSONA", "enable_persona"))
    enable_faq: bool = Field(True, validation_alias=_env("RAG_ENABLE_FAQ", "enable_faq"))
    enable_memory: bool = Field(True, validation_alias=_env("RAG_ENABLE_MEMORY", "enable_memory"))
    enable_turn: bool = Field(True, validation_alias=_env("RAG_ENABLE_TURN", "enable_turn"))
    enable_summary: bool = Field(True, validation_alias=_env("RAG_ENABLE_SUMMARY", "enable_summary"))
    turn_top_k: int = Field(4, ge=1, le=20, validation_alias=_env("RAG_TURN_TOP_K", "turn_top_k"))
    enable_related_turns: bool = Field(
        True, validation_alias=_env("RAG_ENABLE_RELATED_TURNS", "enable_related_turns")
    )
    related_turn_top_k: int = Field(
        3, ge=1, le=20, validation_alias=_env("RAG_RELATED_TURN_TOP_K", "related_turn_top_k")
    )
    faq_top_k: int = Field(2, ge=1, le=10, validation_alias=_env("RAG_FAQ_TOP_K", "faq_top_k"))
    memory_top_k: int = Field(3, ge=1, le=20, validation_alias=_env("RAG_MEMORY_TOP_K", "memory_top_k"))
    summary_top_k: int = Field(2, ge=1, le=10, validation_alias=_env("RAG_SUMMARY_TOP_K", "summary_top_k"))

    # --- memory scoring: w_sim * similarity + w_imp * importance/5 + w_rec * 0.5**(age/half_life)
    weight_similarity: float = Field(
        0.5, ge=0.0, le=1.0, validation_alias=_env("RAG_WEIGHT_SIMILARITY", "weight_similarity")
    )
    weight_importance: float = Field(
        0.5, ge=0.0, le=1.0, validation_alias=_env("RAG_WEIGHT_IMPORTANCE", "weight_importance")
    )
    weight_recency: float = Field(
        0.1, ge=0.0, le=1.0, validation_alias=_env("RAG_WEIGHT_RECENCY", "weight_recency")
    )
    recency_half_life_days: float = Field(
        30.0, gt=0.0, le=36500.0, validation_alias=_env("RAG_RECENCY_HALF_LIFE_DAYS", "recency_half_life_days")
    )

    # --- storage ----------------------------------------------------------------------------
    data_dir: Path = Field(Path("data"), validation_alias=_env("BRAIN_DATA_DIR", "data_dir"))
    chroma_url: str | None = Field(None, validation_alias=_env("BRAIN_CHROMA_URL", "chroma_url"))
    collection: str = Field("conversations", validation_alias=_env("BRAIN_COLLECTION", "collection"))
    index_types: str = Field(
        "memory,persona,faq,summary", validation_alias=_env("BRAIN_INDEX_TYPES", "index_types")
    )
    index_refresh_seconds: float = Field(
        5.0, ge=0.0, le=86400.0, validation_alias=_env("BRAIN_INDEX_REFRESH_SECONDS", "index_refresh_seconds")
    )

    # --- knowledge-base ingestion: token-window chunking --------------------------------------
    chunk_window: int = Field(200, ge=16, le=8192, validation_alias=_env("BRAIN_CHUNK_WINDOW", "chunk_window"))
    chunk_overlap: int = Field(40, ge=0, le=4096, validation_alias=_env("BRAIN_CHUNK_OVERLAP", "chunk_overlap"))
    persona_path: Path = Field(Path("persona.md"), validation_alias=_env("BRAIN_PERSONA_PATH", "persona_path"))

    # --- embedders --------------------------------------------------------------------------
    embedder: str = Field("local/minilm-l6-v2", validation_alias=_env("BRAIN_EMBEDDER", "embedder"))
    embed_batch_size: int = Field(
        64, ge=1, le=4096, validation_alias=_env("BRAIN_EMBED_BATCH_SIZE", "embed_batch_size")
    )
    query_cache_size: int = Field(
        1024, ge=0, le=1_000_000, validation_alias=_env("BRAIN_QUERY_CACHE_SIZE", "query_cache_size")
    )
    ollama_host: str = Field("http://127.0.0.1:11434", validation_alias=_env("OLLAMA_HOST", "ollama_host"))
    ollama_timeout: float = Field(
        30.0, gt=0.0, le=3600.0, validation_alias=_env("BRAIN_OLLAMA_TIMEOUT", "ollama_timeout")
    )

    # --- the Engram-compatible SQLite mirror (issue 4) -----------------------------------------
    mirror_enabled: bool = Field(True, validation_alias=_env("BRAIN_MIRROR_ENABLED", "mirror_enabled"))
    mirror_path: Path | None = Field(None, validation_alias=_env("BRAIN_MIRROR_PATH", "mirror_path"))
    mirror_types: str = Field("memory", validation_alias=_env("BRAIN_MIRROR_TYPES", "mirror_types"))
    owner_id: str | None = Field(None, min_length=1, validation_alias=_env("BRAIN_OWNER_ID", "owner_id"))
    mirror_batch_size: int = Field(
        500, ge=100, le=1000, validation_alias=_env("BRAIN_MIRROR_BATCH_SIZE", "mirror_batch_size")
    )

    # --- the chat backend: context assembly, summaries, consolidation (issue 5) -----------------
    context_max_chars: int = Field(
        8000, ge=200, le=1_000_000, validation_alias=_env("RAG_CONTEXT_MAX_CHARS", "context_max_chars")
    )
    context_max_tokens: int = Field(
        0, ge=0, le=1_000_000, validation_alias=_env("RAG_CONTEXT_MAX_TOKENS", "context_max_tokens")
    )
    summary_every_n: int = Field(5, ge=1, le=1000, validation_alias=_env("RAG_SUMMARY_EVERY_N", "summary_every_n"))
    summarizer: str = Field("ollama", validation_alias=_env("BRAIN_SUMMARIZER", "summarizer"))
    summary_model: str = Field("llama3.2:3b", validation_alias=_env("BRAIN_SUMMARY_MODEL", "summary_model"))
    summary_cooldown_seconds: float = Field(
        30.0, ge=0.0, le=86400.0, validation_alias=_env("BRAIN_SUMMARY_COOLDOWN_SECONDS", "summary_cooldown_seconds")
    )
    summary_retries: int = Field(3, ge=0, le=20, validation_alias=_env("BRAIN_SUMMARY_RETRIES", "summary_retries"))
    summary_backoff_seconds: float = Field(
        1.0, ge=0.0, le=600.0, validation_alias=_env("BRAIN_SUMMARY_BACKOFF_SECONDS", "summary_backoff_seconds")
    )
    summary_timeout: float = Field(
        120.0, gt=0.0, le=3600.0, validation_alias=_env("BRAIN_SUMMARY_TIMEOUT", "summary_timeout")
    )
    # one bound on a whole model summary: every attempt, retry and back-off; then the extractive fallback
    summary_deadline_seconds: float = Field(
        60.0, gt=0.0, le=3600.0, validation_alias=_env("BRAIN_SUMMARY_DEADLINE_SECONDS", "summary_deadline_seconds")
    )
    consolidate_threshold: float = Field(
        0.92, gt=0.0, le=1.0, validation_alias=_env("BRAIN_CONSOLIDATE_THRESHOLD", "consolidate_threshold")
    )
    track_access: bool = Field(False, validation_alias=_env("RAG_TRACK_ACCESS", "track_access"))
    recency_from: str = Field("created", validation_alias=_env("RAG_RECENCY_FROM", "recency_from"))

    # --- the specialist registry (semantic discovery of tools) ------------------------------------
    specialists_path: Path = Field(
        Path("config/specialists.yaml"), validation_alias=_env("BRAIN_SPECIALISTS_PATH", "specialists_path")
    )
    specialists_collection: str = Field(
        "specialists", min_length=3, max_length=512,
        validation_alias=_env("BRAIN_SPECIALISTS_COLLECTION", "specialists_collection"),
    )
    specialist_weight_canonical: float = Field(
        0.5, ge=0.0, le=1.0, validation_alias=_env("BRAIN_SPECIALIST_WEIGHT_CANONICAL", "specialist_weight_canonical")
    )
    specialist_weight_predicates: float = Field(
        0.3, ge=0.0, le=1.0, validation_alias=_env("BRAIN_SPECIALIST_WEIGHT_PREDICATES", "specialist_weight_predicates")
    )
    specialist_weight_objects: float = Field(
        0.2, ge=0.0, le=1.0, validation_alias=_env("BRAIN_SPECIALIST_WEIGHT_OBJECTS", "specialist_weight_objects")
    )
    specialist_weight_lexical: float = Field(
        0.2, ge=0.0, le=1.0, validation_alias=_env("BRAIN_SPECIALIST_WEIGHT_LEXICAL", "specialist_weight_lexical")
    )
    specialist_not_penalty: float = Field(
        1.0, ge=0.0, le=10.0, validation_alias=_env("BRAIN_SPECIALIST_NOT_PENALTY", "specialist_not_penalty")
    )
    specialist_not_margin: float = Field(
        0.5, ge=-1.0, le=1.0, validation_alias=_env("BRAIN_SPECIALIST_NOT_MARGIN", "specialist_not_margin")
    )
    # bands calibrated for local/minilm-l6-v2 (see bench/SPECIALISTS_RESULTS.md)
    specialist_band_strong: float = Field(
        0.67, ge=-1.0, le=1.0, validation_alias=_env("BRAIN_SPECIALIST_BAND_STRONG", "specialist_band_strong")
    )
    specialist_band_good: float = Field(
        0.48, ge=-1.0, le=1.0, validation_alias=_env("BRAIN_SPECIALIST_BAND_GOOD", "specialist_band_good")
    )
    specialist_band_possible: float = Field(
        0.30, ge=-1.0, le=1.0, validation_alias=_env("BRAIN_SPECIALIST_BAND_POSSIBLE", "specialist_band_possible")
    )
    specialist_cache_ttl_seconds: float = Field(
        300.0, ge=0.0, le=86400.0,
        validation_alias=_env("BRAIN_SPECIALIST_CACHE_TTL_SECONDS", "specialist_cache_ttl_seconds"),
    )
    specialist_cache_size: int = Field(
        1024, ge=0, le=1_000_000, validation_alias=_env("BRAIN_SPECIALIST_CACHE_SIZE", "specialist_cache_size")
    )

    # --- the HTTP API (issue 5) -------------------------------------------------------------------
    api_host: str = Field("127.0.0.1", validation_alias=_env("BRAIN_API_HOST", "api_host"))
    api_port: int = Field(5000, ge=1, le=65535, validation_alias=_env("BRAIN_API_PORT", "api_port"))
    api_token: pydantic.SecretStr | None = Field(None, validation_alias=_env("BRAIN_API_TOKEN", "api_token"))
    api_max_body_bytes: int = Field(
        1_000_000, ge=1024, le=1_000_000_000, validation_alias=_env("BRAIN_API_MAX_BODY_BYTES", "api_max_body_bytes")
    )

    def __init__(self, **values: Any):
        try:
            super().__init__(**values)
        except pydantic.ValidationError as exc:
            raise ConfigError(describe_settings_error(exc)) from None

    @field_validator("embedder")
    @classmethod
    def _provider_slash_model(cls, value: str) -> str:
        provider, sep, model = value.partition("/")
        if not sep or not provider or not model or "/" in model or any(c.isspace() for c in value):
            raise ValueError("must look like provider/model, e.g. local/minilm-l6-v2 or ollama/nomic-embed-text")
        return value

    @field_validator("chroma_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value in (None, ""):
            return None
        parsed = urlparse(value)
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise ValueError("must be an http(s) URL such as http://127.0.0.1:8000")
        return value

    @model_validator(mode="after")
    def _overlap_below_window(self) -> "Settings":
        if self.chunk_overlap >= self.chunk_window:
            raise ValueError(
                f"BRAIN_CHUNK_OVERLAP={self.chunk_overlap} must be smaller than BRAIN_CHUNK_WINDOW={self.chunk_window}"
            )
        return self

    @model_validator(mode="after")
    def _bands_ordered(self) -> "Settings":
        if not self.specialist_band_strong > self.specialist_band_good > self.specialist_band_possible:
            raise ValueError(
                "BRAIN_SPECIALIST_BAND_STRONG > BRAIN_SPECIALIST_BAND_GOOD > BRAIN_SPECIALIST_BAND_POSSIBLE must hold, "
                f"got {self.specialist_band_strong} / {self.specialist_band_good} / {self.specialist_band_possible}"
            )
        if self.specialist_weight_canonical + self.specialist_weight_predicates + self.specialist_weight_objects <= 0:
            raise ValueError("the BRAIN_SPECIALIST_WEIGHT_* settings must not all be 0")
        return self

    @field_validator("index_types")
    @classmethod
    def _index_types(cls, value: str) -> str:
        allowed = ("memory", "persona", "faq", "summary", "turn")
        names = [v.strip() for v in value.split(",") if v.strip()]
        unknown = [v for v in names if v not in allowed]
        if unknown:
            raise ValueError(f"unknown document types {unknown}; choose from {', '.join(allowed)}")
        if "memory" not in names:
            raise ValueError("must include memory (memory ranking is served from the in-process index)")
        return ",".join(dict.fromkeys(names))

    @property
    def indexed_types(self) -> tuple[str, ...]:
        return tuple(self.index_types.split(","))

    @field_validator("mirror_types")
    @classmethod
    def _mirror_types(cls, value: str) -> str:
        allowed = ("memory", "persona", "faq", "summary", "turn")
        names = [v.strip() for v in value.split(",") if v.strip()]
        unknown = [v for v in names if v not in allowed]
        if unknown:
            raise ValueError(f"unknown document types {unknown}; choose from {', '.join(allowed)}")
        if "memory" not in names:
            raise ValueError("must include memory (the mirror exists to keep every memory)")
        return ",".join(dict.fromkeys(names))

    @property
    def mirrored_types(self) -> tuple[str, ...]:
        return tuple(self.mirror_types.split(","))

    @property
    def mirror_file(self) -> Path:
        """Where the mirror lives: BRAIN_MIRROR_PATH, else <BRAIN_DATA_DIR>/mirror.db."""
        return self.mirror_path if self.mirror_path is not None else self.data_dir / "mirror.db"

    @field_validator("recency_from")
    @classmethod
    def _recency_from(cls, value: str) -> str:
        if value not in ("created", "last_used"):
            raise ValueError("must be 'created' (age since the memory was written) or 'last_used'")
        return value

    @field_validator("summarizer")
    @classmethod
    def _summarizer(cls, value: str) -> str:
        if value not in ("ollama", "extractive"):
            raise ValueError("must be 'ollama' (BRAIN_SUMMARY_MODEL on OLLAMA_HOST) or 'extractive' (no model)")
        return value

    @field_validator("summary_model")
    @classmethod
    def _summary_model(cls, value: str) -> str:
        if not value.strip() or any(c.isspace() for c in value):
            raise ValueError("must be an Ollama model name such as llama3.2:3b")
        return value

    @field_validator("collection")
    @classmethod
    def _collection_name(cls, value: str) -> str:
        if not (3 <= len(value) <= 512):
            raise ValueError("must be 3 to 512 characters long")
        return value


def env_name(field_name: str) -> str:
    """The environment variable that sets ``field_name``."""
    alias = Settings.model_fields[field_name].validation_alias
    if isinstance(alias, AliasChoices):
        return str(alias.choices[0])
    return field_name.upper()


def _allowed_range(field_name: str) -> str | None:
    lo = hi = None
    lo_sym = hi_sym = ""
    for meta in Settings.model_fields[field_name].metadata:
        if isinstance(meta, annotated_types.Ge):
            lo, lo_sym = meta.ge, ""
        elif isinstance(meta, annotated_types.Gt):
            lo, lo_sym = meta.gt, "more than "
        elif isinstance(meta, annotated_types.Le):
            hi, hi_sym = meta.le, ""
        elif isinstance(meta, annotated_types.Lt):
            hi, hi_sym = meta.lt, "less than "
    if lo is None and hi is None:
        return None
    if lo_sym or hi_sym:
        return f"{lo_sym}{lo} and {hi_sym}{hi}"
    return f"{lo}..{hi}"


def _field_for(loc_name: str) -> str | None:
    for name, field in Settings.model_fields.items():
        alias = field.validation_alias
        choices = alias.choices if isinstance(alias, AliasChoices) else [name]
        if loc_name.lower() in {str(c).lower() for c in choices} | {name}:
            return name
    return None


def describe_settings_error(exc: pydantic.ValidationError) -> str:
    lines = []
    for err in exc.errors():
        if not err["loc"]:  # a rule across several settings: its message names them
            lines.append(err["msg"].removeprefix("Value error, "))
            continue
        loc = str(err["loc"][0])
        field = _field_for(loc)
        var = env_name(field) if field else loc
        value = err.get("input")
        allowed = _allowed_range(field) if field else None
        msg = err["msg"].removeprefix("Value error, ")
        if allowed is not None:
            lines.append(f"{var}={value!r} is not allowed: must be in {allowed} ({msg})")
        else:
            lines.append(f"{var}={value!r} is not allowed: {msg}")
    return "invalid settings: " + "; ".join(lines)


def load_settings(**overrides: Any) -> Settings:
    """Read settings; raise :class:`ConfigError` with a readable message when a value is wrong."""
    return Settings(**overrides)
