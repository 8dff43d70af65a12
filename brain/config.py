"""Settings: one typed model read from the environment and the project's env files.

Nothing else in brain reads ``os.environ``. Every setting is named by its environment
variable; Python callers may also pass the field name (``Settings(memory_top_k=5)``), but the
environment and the env files are read by variable name only.

**Names.** ``RAG_*`` names a setting that decides what a chat request's context holds or how
memories are ranked (the sections, their sizes, the budget, the score's weights and recency);
``BRAIN_*`` names every other setting; ``OLLAMA_HOST`` is Ollama's own variable, so one value serves
brain and the Ollama tools (:data:`FOREIGN_VARIABLES`). The fields are declared in sections
(:data:`SETTING_GROUPS`), each with its prefix, which the section's field factory enforces. A setting
renamed to follow the rule keeps its older name working (``also=``; ``RAG_SUMMARY_EVERY_N``).

**Each field** has a ``description`` (what it does, its unit) and its range as constraints;
:mod:`brain.config_docs` renders ``config/defaults.env`` and the README's table from them. Closed
sets are ``Literal`` types, lists are tuples (comma-separated in the environment), and facts about a
provider (its model's name, default model, naming rule, input limit) stay in the provider's module.
This module and :class:`Settings` are longer than brain's others because they are the one
declaration of every setting (about 70, each with its description); the logic is in the functions.

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
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from pathlib import Path
from typing import Annotated, Any, Callable, Literal, Mapping
from urllib.parse import urlparse

import annotated_types
import pydantic
from pydantic import AliasChoices, BeforeValidator, Field, PrivateAttr, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from brain.errors import ConfigError
from brain.schemas import DOC_TYPES

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
        for choice in (*alias.choices, name):
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

    def setting(env: str, default: Any, description: str, *, also: tuple[str, ...] = (),
                example: str | None = None, **constraints: Any) -> Any:
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
        return Field(validation_alias=AliasChoices(env, *also), description=description, json_schema_extra=extra,
                     **constraints)

    return setting


_context = _group("context", "RAG_", "Context",
                 "what a chat request's context block holds: which sections, how many items, the budget")
_ranking = _group("ranking", "RAG_", "Ranking memories",
                 "score = w_sim * similarity + w_imp * importance/5 + w_rec * 0.5 ** (age / half-life)")
_storage = _group("storage", "BRAIN_", "Storage", "where the data lives and how retrieval is served")
_knowledge = _group("knowledge", "BRAIN_", "Knowledge base and persona", "chunking of ingested files; the persona file")
_embedding = _group("embedding", "BRAIN_", "Embedders", "the embedding model and its server")
_mirror = _group("mirror", "BRAIN_", "The Engram mirror", "the SQLite mirror of memories and conversations")
_chat = _group("chat", "BRAIN_", "Summaries and consolidation",
              "conversation summaries (a model, with an extractive fallback) and memory consolidation")
_specialists = _group("specialists", "BRAIN_", "Specialists",
                     "score = w_c*canonical + w_p*predicates + w_o*objects + w_l*lexical - penalty * "
                     "max(0, similarity to the closest `not` example - margin); bands calibrated for MiniLM")
_api = _group("api", "BRAIN_", "The HTTP API", "`brain serve`; a token is required to bind a non-loopback address")

#: the closed set of summarisers; each is the ``kind`` of a class in brain.summarizers
SummarizerKind = Literal["ollama", "extractive"]


def _document_types(value: Any) -> Any:
    """A comma-separated value (environment, env files) as a tuple; other values as given."""
    if isinstance(value, str):
        return tuple(v.strip() for v in value.split(",") if v.strip())
    return value


#: document types as a tuple; the environment gives them comma-separated (not JSON)
DocTypeList = Annotated[tuple[str, ...], NoDecode, BeforeValidator(_document_types)]


def _default_embedder() -> str:
    from brain.embeddings.local import LocalMiniLMEmbedder  # the provider owns its name

    return LocalMiniLMEmbedder.name


def _default_summary_model() -> str:
    from brain.summarizers.ollama import DEFAULT_MODEL  # the provider owns its default model

    return DEFAULT_MODEL


class Settings(BaseSettings):
    """brain's configuration. Out-of-range values raise :class:`ConfigError` naming the variable."""

    model_config = SettingsConfigDict(
        env_file=None,  # chosen per load by ProjectLayout.discover
        env_file_encoding="utf-8",
        extra="ignore",
        case_sensitive=False,
        # field names are for Python callers (translated in __init__); in the environment and env files
        # only the documented variables count, so a stray DATA_DIR or API_TOKEN cannot set brain's
        populate_by_name=False,
        validate_default=True,
    )

    # --- what a chat request's context holds (RAG_*) --------------------------------------------
    rag_enabled: bool = _context("RAG_ENABLED", True, "master switch: false gives every chat request an empty context")
    enable_persona: bool = _context("RAG_ENABLE_PERSONA", True, "include the persona section")
    enable_faq: bool = _context("RAG_ENABLE_FAQ", True, "include knowledge-base (FAQ) passages matching the message")
    enable_memory: bool = _context("RAG_ENABLE_MEMORY", True, "include the best-ranked memories")
    enable_turn: bool = _context("RAG_ENABLE_TURN", True, "include the conversation's latest turns")
    enable_summary: bool = _context("RAG_ENABLE_SUMMARY", True, "include the conversation's summaries")
    enable_related_turns: bool = _context(
        "RAG_ENABLE_RELATED_TURNS", True,
        "include older turns of the conversation that match the message (hybrid dense + BM25 search)")
    turn_top_k: int = _context("RAG_TURN_TOP_K", 4, "latest turns shown (count)", ge=1, le=20)
    related_turn_top_k: int = _context("RAG_RELATED_TURN_TOP_K", 3, "older matching turns shown (count)", ge=1, le=20)
    faq_top_k: int = _context("RAG_FAQ_TOP_K", 2, "knowledge-base passages shown (count)", ge=1, le=10)
    memory_top_k: int = _context("RAG_MEMORY_TOP_K", 3, "memories shown (count)", ge=1, le=20)
    summary_top_k: int = _context("RAG_SUMMARY_TOP_K", 2, "summaries shown, most relevant first (count)", ge=1, le=10)
    context_max_chars: int = _context(
        "RAG_CONTEXT_MAX_CHARS", 8000,
        "budget of the rendered context block in characters; whole items are dropped, lowest priority first",
        ge=200, le=1_000_000)
    context_max_tokens: int = _context(
        "RAG_CONTEXT_MAX_TOKENS", 0,
        "budget of the rendered context block in tokens (the local WordPiece tokenizer); 0: characters only",
        ge=0, le=1_000_000)

    # --- how memories are ranked (RAG_*) --------------------------------------------------------
    weight_similarity: float = _ranking("RAG_WEIGHT_SIMILARITY", 0.5, "w_sim: weight of cosine similarity to the message",
                                       ge=0.0, le=1.0)
    weight_importance: float = _ranking("RAG_WEIGHT_IMPORTANCE", 0.5, "w_imp: weight of importance / 5", ge=0.0, le=1.0)
    weight_recency: float = _ranking("RAG_WEIGHT_RECENCY", 0.1, "w_rec: weight of the recency decay", ge=0.0, le=1.0)
    recency_half_life_days: float = _ranking(
        "RAG_RECENCY_HALF_LIFE_DAYS", 30.0, "age at which the recency part halves (days)", gt=0.0, le=36500.0)
    recency_from: Literal["created", "last_used"] = _ranking(
        "RAG_RECENCY_FROM", "created",
        "what a memory's age counts from: created (when it was written) or last_used (when it was last "
        "retrieved; needs RAG_TRACK_ACCESS)")
    track_access: bool = _ranking(
        "RAG_TRACK_ACCESS", False, "record when each memory is retrieved (its last_used), for RAG_RECENCY_FROM=last_used")

    # --- where the data lives and how it is served --------------------------------------------------
    # path settings: unset, they default to the project's (or the user-level) places; see the module docstring
    data_dir: Path = _storage(
        "BRAIN_DATA_DIR", Path("data"),
        "the data directory: the embedded store lives in `<dir>/chroma`, the mirror in `<dir>/mirror.db`")
    chroma_url: str | None = _storage(
        "BRAIN_CHROMA_URL", None,
        "an http(s) URL of a Chroma server (`chroma run --path ./data/chroma --port 8000`); unset: the embedded "
        "store in BRAIN_DATA_DIR", example="http://127.0.0.1:8000")
    collection: str = _storage("BRAIN_COLLECTION", "conversations",
                              "the Chroma collection of all five document types (3..512 characters)")
    index_types: DocTypeList = _storage(
        "BRAIN_INDEX_TYPES", ("memory", "persona", "faq", "summary"),
        "document types ranked from the in-process exact index instead of Chroma's (comma-separated; "
        "memory is required)")
    index_refresh_seconds: float = _storage(
        "BRAIN_INDEX_REFRESH_SECONDS", 5.0,
        "how often the store checks for writes by another process and rebuilds its in-process state "
        "(seconds; 0: never)", ge=0.0, le=86400.0)

    # --- knowledge base and persona ---------------------------------------------------------------
    chunk_window: int = _knowledge(
        "BRAIN_CHUNK_WINDOW", 200,
        "knowledge-base chunk size in tokens of the embedder's tokenizer; must fit the embedder's input",
        ge=16, le=8192)
    chunk_overlap: int = _knowledge(
        "BRAIN_CHUNK_OVERLAP", 40, "tokens shared by consecutive chunks; smaller than BRAIN_CHUNK_WINDOW",
        ge=0, le=4096)
    persona_path: Path = _knowledge("BRAIN_PERSONA_PATH", Path("persona.md"),
                                   "the persona file `brain init` and start-up load")

    # --- embedders ------------------------------------------------------------------------------------
    embedder: str = _embedding(
        "BRAIN_EMBEDDER", _default_embedder,
        "the embedding model as `provider/model`: `local/minilm-l6-v2` (in-process) or `ollama/<model>`, "
        "e.g. `ollama/nomic-embed-text`")
    embed_batch_size: int = _embedding("BRAIN_EMBED_BATCH_SIZE", 64, "texts per embedding call (count)",
                                      ge=1, le=4096)
    query_cache_size: int = _embedding(
        "BRAIN_QUERY_CACHE_SIZE", 1024, "query embeddings kept in memory for repeated queries (entries; 0: off)",
        ge=0, le=1_000_000)
    ollama_host: str = _embedding(
        "OLLAMA_HOST", "http://127.0.0.1:11434", "the Ollama server for ollama/ embedders and the summariser (URL)")
    ollama_timeout: float = _embedding("BRAIN_OLLAMA_TIMEOUT", 30.0, "time limit of one embedding request to Ollama "
                                      "(seconds)", gt=0.0, le=3600.0)

    # --- the Engram-compatible SQLite mirror ---------------------------------------------------------
    mirror_enabled: bool = _mirror("BRAIN_MIRROR_ENABLED", True,
                                  "keep the SQLite mirror in step with every write to the store")
    mirror_path: Path | None = _mirror(
        "BRAIN_MIRROR_PATH", None, "the mirror's file; unset: `<BRAIN_DATA_DIR>/mirror.db`", example="data/mirror.db")
    # memories and the conversations (turns, summaries) exist nowhere else; persona and FAQ come from files
    mirror_types: DocTypeList = _mirror(
        "BRAIN_MIRROR_TYPES", ("memory", "turn", "summary"),
        "document types the mirror keeps (comma-separated; memory is required)")
    mirror_batch_size: int = _mirror(
        "BRAIN_MIRROR_BATCH_SIZE", 500, "rows per mirror transaction in sync and backfill (rows)", ge=100, le=1000)
    owner_id: str | None = _mirror(
        "BRAIN_OWNER_ID", None, "owner.id of PAM exports; unset: a UUID derived from the store's location",
        min_length=1)

    # --- summaries and consolidation -----------------------------------------------------------------
    summary_every_n: int = _chat(
        "BRAIN_SUMMARY_EVERY_N", 5, "exchanges (user + assistant turns) per conversation summary (count)",
        also=("RAG_SUMMARY_EVERY_N",), ge=1, le=1000)
    summarizer: SummarizerKind = _chat(
        "BRAIN_SUMMARIZER", "ollama",
        "who writes summaries: ollama (the chat model BRAIN_SUMMARY_MODEL on OLLAMA_HOST) or extractive (no "
        "model); the extractive summariser is always the fallback")
    summary_model: str = _chat("BRAIN_SUMMARY_MODEL", _default_summary_model,
                              "the Ollama chat model that writes summaries (an Ollama model name)")
    summary_retries: int = _chat("BRAIN_SUMMARY_RETRIES", 3, "retries of a failed model summary (count)", ge=0, le=20)
    summary_backoff_seconds: float = _chat(
        "BRAIN_SUMMARY_BACKOFF_SECONDS", 1.0, "first back-off between retries, doubled each retry (seconds)",
        ge=0.0, le=600.0)
    summary_timeout: float = _chat("BRAIN_SUMMARY_TIMEOUT", 120.0, "time limit of one request to the summary model "
                                  "(seconds)", gt=0.0, le=3600.0)
    summary_deadline_seconds: float = _chat(
        "BRAIN_SUMMARY_DEADLINE_SECONDS", 60.0,
        "time limit of one model summary, every attempt, retry and back-off included; then the extractive "
        "fallback (seconds)", gt=0.0, le=3600.0)
    summary_cooldown_seconds: float = _chat(
        "BRAIN_SUMMARY_COOLDOWN_SECONDS", 30.0,
        "after a fallback summary, use the fallback at once for this long, so no retries queue up while "
        "Ollama is down (seconds)", ge=0.0, le=86400.0)
    consolidate_threshold: float = _chat(
        "BRAIN_CONSOLIDATE_THRESHOLD", 0.92,
        "consolidation merges same-scope memories whose cosine similarity is above this", gt=0.0, le=1.0)

    # --- the specialist registry (semantic discovery of tools) ------------------------------------
    # score = w_c*canonical + w_p*predicates + w_o*objects + w_l*lexical
    #         - penalty * max(0, similarity to the closest `not` example - margin)
    specialists_path: Path = _specialists("BRAIN_SPECIALISTS_PATH", Path("config/specialists.yaml"),
                                         "the YAML file of specialists that registration reads")
    specialists_collection: str = _specialists(
        "BRAIN_SPECIALISTS_COLLECTION", "specialists", "the Chroma collection of the specialists' vectors",
        min_length=3, max_length=512)
    specialist_weight_canonical: float = _specialists(
        "BRAIN_SPECIALIST_WEIGHT_CANONICAL", 0.5, "w_c: weight of similarity to the canonical description",
        ge=0.0, le=1.0)
    specialist_weight_predicates: float = _specialists(
        "BRAIN_SPECIALIST_WEIGHT_PREDICATES", 0.3, "w_p: weight of similarity to the predicates (what it does)",
        ge=0.0, le=1.0)
    specialist_weight_objects: float = _specialists(
        "BRAIN_SPECIALIST_WEIGHT_OBJECTS", 0.2, "w_o: weight of similarity to the objects (what it acts on)",
        ge=0.0, le=1.0)
    specialist_weight_lexical: float = _specialists(
        "BRAIN_SPECIALIST_WEIGHT_LEXICAL", 0.2,
        "w_l: weight of the specialist's share of the request's BM25 evidence (0: the dense formula only)",
        ge=0.0, le=1.0)
    specialist_not_penalty: float = _specialists(
        "BRAIN_SPECIALIST_NOT_PENALTY", 1.0, "penalty factor for similarity to a `not` example", ge=0.0, le=10.0)
    specialist_not_margin: float = _specialists(
        "BRAIN_SPECIALIST_NOT_MARGIN", 0.5, "similarity to a `not` example below which no penalty applies",
        ge=-1.0, le=1.0)
    # bands calibrated for local/minilm-l6-v2 (see bench/SPECIALISTS_RESULTS.md)
    specialist_band_strong: float = _specialists(
        "BRAIN_SPECIALIST_BAND_STRONG", SPECIALIST_BAND_DEFAULTS["strong"],
        "lowest score of a strong match (at least BRAIN_SPECIALIST_BAND_GOOD)",
        ge=-1.0, le=1.0)
    specialist_band_good: float = _specialists(
        "BRAIN_SPECIALIST_BAND_GOOD", SPECIALIST_BAND_DEFAULTS["good"],
        "lowest score of a good match (at least BRAIN_SPECIALIST_BAND_POSSIBLE)",
        ge=-1.0, le=1.0)
    specialist_band_possible: float = _specialists(
        "BRAIN_SPECIALIST_BAND_POSSIBLE", SPECIALIST_BAND_DEFAULTS["possible"],
        "lowest score of a possible match; below it, no match",
        ge=-1.0, le=1.0)
    specialist_cache_ttl_seconds: float = _specialists(
        "BRAIN_SPECIALIST_CACHE_TTL_SECONDS", 300.0, "how long a request's matches are cached (seconds; 0: off)",
        ge=0.0, le=86400.0)
    specialist_cache_size: int = _specialists(
        "BRAIN_SPECIALIST_CACHE_SIZE", 1024, "requests whose matches are cached (entries; 0: off)",
        ge=0, le=1_000_000)

    # --- the HTTP API (brain serve) -------------------------------------------------------------------
    api_host: str = _api("BRAIN_API_HOST", "127.0.0.1",
                        "the address `brain serve` binds; a non-loopback address needs a token")
    api_port: int = _api("BRAIN_API_PORT", 5000, "the port `brain serve` listens on", ge=1, le=65535)
    api_token: pydantic.SecretStr | None = _api(
        "BRAIN_API_TOKEN", None,
        "the admin token, at least 16 printable characters, e.g. from `python -c 'import secrets; "
        "print(secrets.token_urlsafe(32))'`; empty or unset: no admin token", example="")
    api_tokens_file: Path | None = _api(
        "BRAIN_API_TOKENS_FILE", None,
        "a file of entity-bound (and further admin) tokens, one `<entity name or admin> <token>` per line",
        example="config/api-tokens")
    api_max_body_bytes: int = _api("BRAIN_API_MAX_BODY_BYTES", 1_000_000, "the largest request body accepted (bytes)",
                                  ge=1024, le=1_000_000_000)

    _layout: ProjectLayout | None = PrivateAttr(None)
    _origins: dict[str, str] = PrivateAttr(default_factory=dict)

    def __init__(self, **values: Any):
        layout = ProjectLayout.discover(values.pop("_project_dir", None))
        values = {env_name(key) if key in type(self).model_fields else key: value for key, value in values.items()}
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

    @field_validator("api_tokens_file", "owner_id", mode="before")
    @classmethod
    def _empty_means_unset(cls, value: Any) -> Any:
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
    def _index_types(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return _checked_types(value, "memory ranking is served from the in-process index")

    @property
    def indexed_types(self) -> tuple[str, ...]:
        """BRAIN_INDEX_TYPES (also when a caller's ``model_copy`` left it a comma-separated string)."""
        return tuple(_document_types(self.index_types))

    @field_validator("mirror_types")
    @classmethod
    def _mirror_types(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return _checked_types(value, "the mirror exists to keep every memory")

    @property
    def mirrored_types(self) -> tuple[str, ...]:
        """BRAIN_MIRROR_TYPES (also when a caller's ``model_copy`` left it a comma-separated string)."""
        return tuple(_document_types(self.mirror_types))

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

    @field_validator("summary_model")
    @classmethod
    def _summary_model(cls, value: str) -> str:
        from brain.summarizers.ollama import model_name_problem  # the provider owns its naming rule

        problem = model_name_problem(value)
        if problem:
            raise ValueError(problem)
        return value

    @field_validator("collection")
    @classmethod
    def _collection_name(cls, value: str) -> str:
        if not (3 <= len(value) <= 512):
            raise ValueError("must be 3 to 512 characters long")
        return value


def _checked_types(value: tuple[str, ...], why_memory: str) -> tuple[str, ...]:
    unknown = [v for v in value if v not in DOC_TYPES]
    if unknown:
        raise ValueError(f"unknown document types {unknown}; choose from {', '.join(DOC_TYPES)}")
    if "memory" not in value:
        raise ValueError(f"must include memory ({why_memory})")
    return tuple(dict.fromkeys(value))


def env_name(field_name: str) -> str:
    """The environment variable that sets ``field_name``."""
    return env_names(field_name)[0]


def bounds(field_name: str) -> tuple[Any, bool, Any, bool] | None:
    """``(low, low_excluded, high, high_excluded)`` of a numeric setting, or None when it has none."""
    lo = hi = None
    lo_open = hi_open = False
    for meta in Settings.model_fields[field_name].metadata:
        if isinstance(meta, annotated_types.Ge):
            lo, lo_open = meta.ge, False
        elif isinstance(meta, annotated_types.Gt):
            lo, lo_open = meta.gt, True
        elif isinstance(meta, annotated_types.Le):
            hi, hi_open = meta.le, False
        elif isinstance(meta, annotated_types.Lt):
            hi, hi_open = meta.lt, True
    return None if lo is None and hi is None else (lo, lo_open, hi, hi_open)


def allowed_range(field_name: str) -> str | None:
    """The range of ``field_name`` as error messages show it (``1..20``), or None."""
    found = bounds(field_name)
    if found is None:
        return None
    lo, lo_open, hi, hi_open = found
    if lo_open or hi_open:
        return f"{'more than ' if lo_open else ''}{lo} and {'less than ' if hi_open else ''}{hi}"
    return f"{lo}..{hi}"


def env_names(field_name: str) -> tuple[str, ...]:
    """Every environment variable that sets ``field_name``: its name, then older names kept working."""
    return tuple(str(c) for c in Settings.model_fields[field_name].validation_alias.choices)


def _field_for(loc_name: str) -> str | None:
    for name in Settings.model_fields:
        if loc_name.lower() in {c.lower() for c in env_names(name)} | {name}:
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
        var = " or ".join(env_names(field)) if field else loc
        value = "<hidden>" if field in _SECRET_FIELDS else err.get("input")
        allowed = allowed_range(field) if field else None
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
