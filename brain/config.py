"""Settings: one typed model read from the environment and the project's env files.

Nothing else in brain reads ``os.environ``. Every setting is named by its environment
variable; Python callers may also pass the field name (``Settings(memory_top_k=5)``).

**Where a setting comes from**, highest first: keyword arguments (the CLI's options such as
``--data-dir``), the process environment, the project's ``.env``, the project's
``config/defaults.env``, the built-in defaults.

**The project** is ``BRAIN_PROJECT_DIR`` (or ``--project``) when set, else the nearest directory at
or above the working directory that holds ``config/defaults.env`` (a brain checkout is one). Its
``config/defaults.env`` and ``.env`` are read, and its files are the defaults: ``data/``,
``persona.md``, ``config/specialists.yaml``. Without a project brain uses user-level places:
``$XDG_CONFIG_HOME/brain`` (``~/.config/brain``) for ``.env``, ``persona.md`` and
``specialists.yaml``, and ``$XDG_DATA_HOME/brain`` (``~/.local/share/brain``) for the data.

**Relative paths** given as arguments or in the environment are relative to the working directory,
as any command-line path; relative paths written in an env file are relative to the project root
(or the user-level directory), so a file means the same thing from any directory. Once loaded,
every path setting is absolute.
"""

from __future__ import annotations

import math
import os
from contextvars import ContextVar
from dataclasses import dataclass, field as dataclass_field
from pathlib import Path
from typing import Any, Callable, Mapping
from urllib.parse import urlparse

import annotated_types
import pydantic
from pydantic import AliasChoices, Field, PrivateAttr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from brain.errors import ConfigError

#: a directory holding this file is a project root
PROJECT_MARKER = Path("config") / "defaults.env"
LOCAL_ENV_FILE = Path(".env")
#: the settings that name files or directories
PATH_FIELDS = ("data_dir", "persona_path", "specialists_path", "mirror_path")
#: the specialist bands' thresholds, calibrated for local/minilm-l6-v2 (bench/SPECIALISTS_RESULTS.md);
#: the Settings defaults and brain.specialists.SpecialistBands' defaults
SPECIALIST_BAND_DEFAULTS = {"strong": 0.67, "good": 0.48, "possible": 0.30}


def specialist_bands_in_order(strong: float, good: float, possible: float) -> bool:
    """The one rule for the specialist bands: finite, and ``possible <= good <= strong``. Equal
    thresholds are allowed: they leave the band between them empty."""
    return all(math.isfinite(v) for v in (strong, good, possible)) and possible <= good <= strong


def find_project_root(start: str | os.PathLike) -> Path | None:
    """The nearest directory at or above ``start`` that holds ``config/defaults.env``, or None."""
    here = Path(os.path.abspath(start))
    for directory in (here, *here.parents):
        if (directory / PROJECT_MARKER).is_file():
            return directory
    return None


@dataclass(frozen=True)
class ProjectLayout:
    """Where the settings files are and what relative paths in them mean.

    ``root`` is the project root (None without a project); ``base`` is the directory relative paths
    in the env files resolve against (the project root, or the user-level config directory);
    ``env_files`` are read in order, a later file winning (missing ones are skipped); ``defaults``
    are the path settings' defaults; ``searched_from`` is where the upward search started."""

    root: Path | None
    base: Path
    env_files: tuple[Path, ...]
    defaults: Mapping[str, Path]
    searched_from: Path
    how: str = ""  # how the root was found, for messages

    @classmethod
    def discover(cls, project_dir: str | os.PathLike | None = None, *, environ: Mapping[str, str] | None = None,
                 cwd: str | os.PathLike | None = None) -> "ProjectLayout":
        """The layout for ``project_dir``, else ``BRAIN_PROJECT_DIR``, else the project found upward
        from ``cwd`` (default: the working directory), else the user-level places."""
        environ = os.environ if environ is None else environ
        here = Path(os.path.abspath(cwd if cwd is not None else os.getcwd()))
        how = "--project"
        if project_dir is None and environ.get("BRAIN_PROJECT_DIR", "").strip():
            project_dir, how = environ["BRAIN_PROJECT_DIR"].strip(), "BRAIN_PROJECT_DIR"
        if project_dir is not None:
            root = (here / Path(project_dir).expanduser()).resolve()
            if not root.is_dir():
                raise ConfigError(f"{how}={str(project_dir)!r} is not a directory; point it at the folder that "
                                  f"holds config/defaults.env")
        else:
            root, how = find_project_root(here), f"found from {here}"
        if root is not None:
            return cls(root, root, (root / PROJECT_MARKER, root / LOCAL_ENV_FILE),
                       {"data_dir": root / "data", "persona_path": root / "persona.md",
                        "specialists_path": root / "config" / "specialists.yaml"}, here, how)
        config_home = _xdg_home(environ, "XDG_CONFIG_HOME", ".config") / "brain"
        data_home = _xdg_home(environ, "XDG_DATA_HOME", ".local/share") / "brain"
        return cls(None, config_home, (config_home / LOCAL_ENV_FILE,),
                   {"data_dir": data_home, "persona_path": config_home / "persona.md",
                    "specialists_path": config_home / "specialists.yaml"}, here, "user-level")

    def describe(self) -> str:
        if self.root is None:
            return f"the user-level places (no project at or above {self.searched_from})"
        return f"the project {self.root} ({self.how})"


def _xdg_home(environ: Mapping[str, str], variable: str, fallback: str) -> Path:
    value = environ.get(variable, "").strip()
    if value and os.path.isabs(value):  # the XDG spec ignores relative values
        return Path(value)
    return Path.home() / fallback


@dataclass
class _Loading:
    """What one ``Settings(...)`` call is resolving against, and where each path setting came from."""

    layout: ProjectLayout
    cwd: Path
    origins: dict[str, str] = dataclass_field(default_factory=dict)


_LOADING: ContextVar[_Loading | None] = ContextVar("brain_settings_loading", default=None)


def _path_aliases() -> dict[str, str]:
    """lower-cased alias -> field name, for the path settings."""
    out = {}
    for name in PATH_FIELDS:
        alias = Settings.model_fields[name].validation_alias
        for choice in (alias.choices if isinstance(alias, AliasChoices) else [name]):
            out[str(choice).lower()] = name
    return out


def _anchored(source: Callable[[], dict[str, Any]], kind: str) -> Callable[[], dict[str, Any]]:
    """``source`` with its path settings made absolute: against the working directory for arguments
    and the environment, against the project root for env files; an empty value means unset."""

    def read() -> dict[str, Any]:
        values = source()
        loading = _LOADING.get()
        if loading is None:
            return values
        aliases = _path_aliases()
        for key in list(values):
            name = aliases.get(str(key).lower())
            if name is None:
                continue
            value = values[key]
            if value is None or (isinstance(value, str) and not value.strip()):
                del values[key]
                continue
            if not isinstance(value, (str, os.PathLike)):
                continue  # not a path: validation names the problem
            base = loading.layout.base if kind == "file" else loading.cwd
            values[key] = base / Path(value).expanduser()
            if name not in loading.origins:  # sources are read highest priority first
                loading.origins[name] = _origin(kind, str(key), loading.layout)
        return values

    return read


def _origin(kind: str, key: str, layout: ProjectLayout) -> str:
    if kind == "argument":
        return "an explicit argument or option (such as --data-dir)"
    if kind == "environment":
        return f"{key.upper()} in the environment"
    from dotenv import dotenv_values

    for path in reversed(layout.env_files):
        if path.is_file() and key.lower() in {k.lower() for k in dotenv_values(path)}:
            return f"{key.upper()} in {path}"
    return f"{key.upper()} in {', '.join(map(str, layout.env_files))}"


def _env(name: str, field_name: str) -> AliasChoices:
    return AliasChoices(name, field_name)


class Settings(BaseSettings):
    """brain's configuration. Out-of-range values raise :class:`ConfigError` naming the variable."""

    model_config = SettingsConfigDict(
        env_file=None,  # chosen per load by ProjectLayout.discover
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
    # path settings: unset, they default to the project's (or the user-level) places; see the module docstring
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
    # memories and the conversations (turns, summaries) exist nowhere else; persona and FAQ come from files
    mirror_types: str = Field("memory,turn,summary", validation_alias=_env("BRAIN_MIRROR_TYPES", "mirror_types"))
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
        SPECIALIST_BAND_DEFAULTS["strong"], ge=-1.0, le=1.0,
        validation_alias=_env("BRAIN_SPECIALIST_BAND_STRONG", "specialist_band_strong"),
    )
    specialist_band_good: float = Field(
        SPECIALIST_BAND_DEFAULTS["good"], ge=-1.0, le=1.0,
        validation_alias=_env("BRAIN_SPECIALIST_BAND_GOOD", "specialist_band_good"),
    )
    specialist_band_possible: float = Field(
        SPECIALIST_BAND_DEFAULTS["possible"], ge=-1.0, le=1.0,
        validation_alias=_env("BRAIN_SPECIALIST_BAND_POSSIBLE", "specialist_band_possible"),
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
    api_token: pydantic.SecretStr | None = Field(
        None, description="the admin token; empty or whitespace means unset",
        validation_alias=_env("BRAIN_API_TOKEN", "api_token"),
    )
    api_tokens_file: Path | None = Field(
        None, description="a file of entity-bound (and further admin) tokens, read by brain.auth",
        validation_alias=_env("BRAIN_API_TOKENS_FILE", "api_tokens_file"),
    )
    api_max_body_bytes: int = Field(
        1_000_000, ge=1024, le=1_000_000_000, validation_alias=_env("BRAIN_API_MAX_BODY_BYTES", "api_max_body_bytes")
    )

    _layout: ProjectLayout | None = PrivateAttr(None)
    _origins: dict[str, str] = PrivateAttr(default_factory=dict)

    def __init__(self, **values: Any):
        layout = ProjectLayout.discover(values.pop("_project_dir", None))
        values.setdefault("_env_file", layout.env_files)
        loading = _Loading(layout, Path(os.path.abspath(os.getcwd())))
        token = _LOADING.set(loading)
        try:
            super().__init__(**values)
        except pydantic.ValidationError as exc:
            raise ConfigError(describe_settings_error(exc)) from None
        finally:
            _LOADING.reset(token)
        for name in PATH_FIELDS:
            value = getattr(self, name)
            if name not in self.model_fields_set and name in layout.defaults:
                value = layout.defaults[name]
                loading.origins[name] = f"the default of {layout.describe()}"
            if value is not None and not value.is_absolute():  # e.g. a Path given after loading
                value = loading.cwd / value
            self.__dict__[name] = value
        self._layout = layout
        self._origins = loading.origins

    @classmethod
    def settings_customise_sources(cls, settings_cls, init_settings, env_settings, dotenv_settings,
                                   file_secret_settings):
        return (_anchored(init_settings, "argument"), _anchored(env_settings, "environment"),
                _anchored(dotenv_settings, "file"), file_secret_settings)

    @property
    def layout(self) -> ProjectLayout:
        """The project (or user-level places) these settings were read from."""
        return self._layout if self._layout is not None else ProjectLayout.discover()

    def origin(self, name: str) -> str:
        """Where the path setting ``name`` came from, for messages (e.g. ``BRAIN_DATA_DIR in /p/.env``)."""
        return self._origins.get(name) or "the built-in default"

    @field_validator("api_token", mode="before")
    @classmethod
    def _api_token(cls, value: Any) -> Any:
        if isinstance(value, pydantic.SecretStr):
            value = value.get_secret_value()
        if value is None or (isinstance(value, str) and not value.strip()):
            return None  # `BRAIN_API_TOKEN=` (as in config/defaults.env) means no token, not an empty one
        from brain.auth import token_problem  # the token rule lives with the tokens file's

        value = value.strip() if isinstance(value, str) else value
        problem = token_problem(value) if isinstance(value, str) else None
        if problem:
            raise ValueError(problem)
        return value

    @field_validator("api_tokens_file", mode="before")
    @classmethod
    def _api_tokens_file(cls, value: Any) -> Any:
        return None if isinstance(value, str) and not value.strip() else value

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
        if not specialist_bands_in_order(
            self.specialist_band_strong, self.specialist_band_good, self.specialist_band_possible
        ):
            raise ValueError(
                "BRAIN_SPECIALIST_BAND_STRONG >= BRAIN_SPECIALIST_BAND_GOOD >= BRAIN_SPECIALIST_BAND_POSSIBLE "
                "must hold, "
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

    def has_embedded_store(self) -> bool:
        """Whether an embedded Chroma store exists in the data directory."""
        return (self.data_dir / "chroma" / "chroma.sqlite3").is_file()

    def describe_paths(self) -> dict[str, Any]:
        """Where these settings point and why: the project, the env files, each path setting with
        its origin and whether it exists, and whether a store is there (for ``brain paths``)."""
        def entry(path: Path, origin: str) -> dict[str, Any]:
            return {"path": str(path), "exists": path.exists(), "from": origin}

        layout = self.layout
        mirror_origin = self.origin("mirror_path") if self.mirror_path is not None else "the data directory"
        return {
            "project": str(layout.root) if layout.root is not None else None,
            "found": layout.describe(),
            "env_files": [{"path": str(p), "exists": p.is_file()} for p in layout.env_files],
            **{name: entry(getattr(self, name), self.origin(name))
               for name in ("data_dir", "persona_path", "specialists_path")},
            "mirror_file": entry(self.mirror_file, mirror_origin),
            "chroma_url": self.chroma_url,
            "store": None if self.chroma_url else self.has_embedded_store(),
        }

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


#: settings whose values never appear in an error message (they end up in logs)
_SECRET_FIELDS = frozenset({"api_token"})


def describe_settings_error(exc: pydantic.ValidationError) -> str:
    lines = []
    for err in exc.errors():
        if not err["loc"]:  # a rule across several settings: its message names them
            lines.append(err["msg"].removeprefix("Value error, "))
            continue
        loc = str(err["loc"][0])
        field = _field_for(loc)
        var = env_name(field) if field else loc
        value = "<hidden>" if field in _SECRET_FIELDS else err.get("input")
        allowed = _allowed_range(field) if field else None
        msg = err["msg"].removeprefix("Value error, ")
        if allowed is not None:
            lines.append(f"{var}={value!r} is not allowed: must be in {allowed} ({msg})")
        else:
            lines.append(f"{var}={value!r} is not allowed: {msg}")
    return "invalid settings: " + "; ".join(lines)


def load_settings(project_dir: str | os.PathLike | None = None, **overrides: Any) -> Settings:
    """Read settings (for the project ``project_dir``, else the one found as the module docstring
    says); raise :class:`ConfigError` with a readable message when a value is wrong."""
    if project_dir is not None:
        overrides["_project_dir"] = project_dir
    return Settings(**overrides)
