"""The :class:`Settings` model: every setting, declared once in its section's class
(:mod:`brain.config.fields`), loaded from arguments, the environment and the project's env files, and
checked across sections here; the logic lives in the sibling modules (sections, sources, project, naming)."""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pydantic
from pydantic import PrivateAttr, field_validator, model_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from brain.config.fields import (
    ApiFields,
    ContextFields,
    EmbedderFields,
    KnowledgeFields,
    MirrorFields,
    RankingFields,
    SpecialistFields,
    StorageFields,
    SummaryFields,
)
from brain.config.naming import describe_settings_error, env_name
from brain.config.project import ProjectLayout
from brain.config.sections import (
    PATH_FIELDS,
    checked_types,
    key_dir_problem,
)
from brain.config.sources import LOADING, Loading, anchored
from brain.config.values import model_name_problem, token_problem
from brain.model.errors import ConfigError


class Settings(
    ApiFields,
    SpecialistFields,
    SummaryFields,
    MirrorFields,
    EmbedderFields,
    KnowledgeFields,
    StorageFields,
    RankingFields,
    ContextFields,
    BaseSettings,
):
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

    _layout: ProjectLayout | None = PrivateAttr(None)
    _origins: dict[str, str] = PrivateAttr(default_factory=dict)

    def __init__(self, **values: Any):
        layout = ProjectLayout.discover(values.pop("_project_dir", None))
        values = {env_name(key) if key in type(self).model_fields else key: value for key, value in values.items()}
        values.setdefault("_env_file", layout.env_files)
        loading = Loading(layout, Path(os.path.abspath(os.getcwd())))
        token = LOADING.set(loading)
        try:
            super().__init__(**values)
        except pydantic.ValidationError as exc:
            raise ConfigError(describe_settings_error(exc)) from None
        finally:
            LOADING.reset(token)
        for name in PATH_FIELDS:
            value = getattr(self, name)
            if name not in self.model_fields_set and name in layout.defaults:
                value = layout.defaults[name]
                loading.origins[name] = f"the default of {layout.describe()}"
            if value is not None and not value.is_absolute():  # e.g. a Path given after loading
                value = loading.cwd / value
            self.__dict__[name] = value
        key_dir = self.snapshot_key_dir  # set by the loop above: an absolute path
        problem = None if self.chroma_url or key_dir is None else key_dir_problem(key_dir, self.data_dir)
        if problem:  # only the embedded store's keys live there
            raise ConfigError(problem)
        self._layout = layout
        self._origins = loading.origins

    @classmethod
    def settings_customise_sources(  # type: ignore[override]
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource | Callable[[], dict[str, object]], ...]:
        # pydantic-settings calls each source for its values: a plain callable is one
        return (
            anchored(init_settings, "argument", cls),
            anchored(env_settings, "environment", cls),
            anchored(dotenv_settings, "file", cls),
            file_secret_settings,
        )

    @property
    def layout(self) -> ProjectLayout:
        """The project (or user-level places) these settings were read from."""
        return self._layout if self._layout is not None else ProjectLayout.discover()

    def origin(self, name: str) -> str:
        """Where the path setting ``name`` came from, for messages (e.g. ``BRAIN_DATA_DIR in /p/.env``)."""
        return self._origins.get(name) or "the built-in default"

    @field_validator("api_token", mode="before")
    @classmethod
    def _api_token(cls, value: object) -> object:
        if isinstance(value, pydantic.SecretStr):
            value = value.get_secret_value()
        if value is None or (isinstance(value, str) and not value.strip()):
            return None  # `BRAIN_API_TOKEN=` (as in config/defaults.env) means no token, not an empty one
        value = value.strip() if isinstance(value, str) else value
        problem = token_problem(value) if isinstance(value, str) else None
        if problem:
            raise ValueError(problem)
        return value

    @field_validator("chat_upstream_key", "openai_api_key", mode="before")
    @classmethod
    def _blank_key_is_none(cls, value: object) -> object:
        if isinstance(value, pydantic.SecretStr):
            value = value.get_secret_value()
        if not isinstance(value, str):
            return value  # None, or a type pydantic's validation names
        return value.strip() or None

    @field_validator("chat_upstream", "openai_base_url", mode="before")
    @classmethod
    def _upstream_url(cls, value: object, info: pydantic.ValidationInfo) -> object:
        if value is None or (isinstance(value, str) and not value.strip()):
            return None
        parsed = urlparse(str(value).strip())
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise ValueError("must be the http(s) base URL of an OpenAI-compatible API, e.g. http://127.0.0.1:11434/v1")
        if parsed.username or parsed.password:
            key = "BRAIN_CHAT_UPSTREAM_KEY" if info.field_name == "chat_upstream" else "BRAIN_OPENAI_API_KEY"
            raise ValueError(f"must not carry credentials in the URL: put the key in {key}")
        return str(value).strip().rstrip("/")

    @model_validator(mode="after")
    def _upstream_defaults_to_model_server(self) -> Settings:
        # the proxy's upstream is usually the server the models run on: named once, it cannot drift apart
        if self.chat_upstream is None and self.openai_base_url is not None:
            self.chat_upstream = self.openai_base_url
        if self.chat_upstream_key is None and self.chat_upstream == self.openai_base_url:
            self.chat_upstream_key = self.openai_api_key
        return self

    @field_validator(
        "api_tokens_file",
        "owner_id",
        "specialist_confidence_intercept",
        "specialist_confidence_score",
        "specialist_confidence_length",
        "specialist_band_strong",
        "specialist_band_good",
        "specialist_band_possible",
        mode="before",
    )
    @classmethod
    def _empty_means_unset(cls, value: object) -> object:
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
    def _overlap_below_window(self) -> Settings:
        if self.chunk_overlap >= self.chunk_window:
            raise ValueError(
                f"BRAIN_CHUNK_OVERLAP={self.chunk_overlap} must be smaller than BRAIN_CHUNK_WINDOW={self.chunk_window}"
            )
        return self

    @model_validator(mode="after")
    def _bands_ordered(self) -> Settings:
        # the thresholds set here must be in order among themselves; those left to the embedder's defaults
        # are checked with them when a registry is made
        bands = (self.specialist_band_strong, self.specialist_band_good, self.specialist_band_possible)
        given = [v for v in bands if v is not None]
        if given != sorted(given, reverse=True) or not all(math.isfinite(v) for v in given):
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
        return checked_types(value, "memory ranking is served from the in-process index")

    @field_validator("mirror_types")
    @classmethod
    def _mirror_types(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return checked_types(value, "the mirror exists to keep every memory")

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
            **{
                name: entry(getattr(self, name), self.origin(name))
                for name in ("data_dir", "persona_path", "specialists_path")
            },
            "mirror_file": entry(self.mirror_file, mirror_origin),
            "chroma_url": self.chroma_url,
            "store": None if self.chroma_url else self.has_embedded_store(),
        }

    @property
    def mirror_file(self) -> Path:
        """Where the mirror lives: BRAIN_MIRROR_PATH, else <BRAIN_DATA_DIR>/mirror.db."""
        return self.mirror_path if self.mirror_path is not None else self.data_dir / "mirror.db"

    @field_validator("summary_model", "formation_model")
    @classmethod
    def _model_name(cls, value: str) -> str:
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


def load_settings(project_dir: str | os.PathLike[str] | None = None, **overrides: Any) -> Settings:
    """Read settings (for the project ``project_dir``, else the one found as the module docstring
    says); raise :class:`ConfigError` with a readable message when a value is wrong."""
    if project_dir is not None:
        overrides["_project_dir"] = project_dir
    return Settings(**overrides)
