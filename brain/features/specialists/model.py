"""The specialist model: what ``config/specialists.yaml`` holds, and reading and validating it whole.

A specialist has an id, a description, its ``semantics`` (a canonical phrase, predicates, objects,
contexts and ``not`` examples; the phrases registration embeds) and its ``params`` (what a
``SPECIALIST_REQUEST`` marker may pass). A file is validated whole: one bad specialist and none
are returned, with every problem named by specialist and field.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

import pydantic
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StringConstraints, field_validator

from brain.model.errors import ConfigError, Problem, ValidationError
from brain.text.bounded import TooLarge, load_yaml_bounded, read_bounded_text

DEFAULT_PATH = Path("config") / "specialists.yaml"
#: a specialists file larger than this is refused (a long list of specialists is tens of kilobytes)
MAX_FILE_BYTES = 1_000_000
#: a specialists document whose nodes, every YAML alias expanded, are more than this is refused
MAX_YAML_NODES = 200_000
ParamType = Literal["string", "integer", "number", "boolean", "array", "object"]
PARAM_TYPES: tuple[str, ...] = get_args(ParamType)

_Text = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=2000)]


class SpecialistParam(BaseModel):
    """One parameter a specialist accepts in ``SPECIALIST_REQUEST[id:{...}]``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$", max_length=64)]
    type: ParamType = "string"
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

    def to_dict(self) -> dict[str, object]:
        """The specialist as written in YAML (``semantics.not``, not ``not_``)."""
        return self.model_dump(mode="json", by_alias=True)

    @property
    def embedded_texts(self) -> list[str]:
        """What registration embeds, in order: canonical, predicates, objects, not examples."""
        s = self.semantics
        return [s.canonical, *s.predicates, *s.objects, *s.not_]

    @property
    def lexical_text(self) -> str:
        """The words the lexical share matches a request against: canonical, predicates, objects."""
        s = self.semantics
        return " ".join([s.canonical, *s.predicates, *s.objects])

    @property
    def vectors_hash(self) -> str:
        """Changes exactly when the embedded texts change (so when the vectors must be recomputed)."""
        s = self.semantics
        return _digest({"canonical": s.canonical, "predicates": s.predicates, "objects": s.objects, "not": s.not_})

    @property
    def spec_hash(self) -> str:
        """Changes whenever anything in the specialist changes."""
        return _digest(self.to_dict())


def _digest(value: object) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()[:32]


# ---- reading and validating YAML --------------------------------------------------------------------
def load_specialists(path: str | Path) -> list[Specialist]:
    """Read and validate a specialists YAML file, whole: one bad specialist and none are returned."""
    path = Path(path)
    try:
        text = read_bounded_text(path, MAX_FILE_BYTES)
    except TooLarge as exc:
        raise ConfigError(
            f"specialists file {path}: {exc} (MAX_FILE_BYTES); a specialists file is a few "
            "kilobytes: check that BRAIN_SPECIALISTS_PATH names the right file"
        ) from None
    except FileNotFoundError:
        raise ConfigError(
            f"specialists file {path} does not exist; create it (see config/specialists.yaml) "
            "or set BRAIN_SPECIALISTS_PATH"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read specialists file {path}: {exc}") from None
    return specialists_from_yaml(text, source=str(path))


def specialists_from_yaml(text: str, *, source: str = "<string>") -> list[Specialist]:
    """Parse and validate specialists YAML text (``source`` names it in errors), bounded: text past
    :data:`MAX_FILE_BYTES` or whose aliases expand past :data:`MAX_YAML_NODES` nodes is refused."""
    import yaml

    try:
        if len(text) > MAX_FILE_BYTES:
            raise TooLarge(f"it is longer than {MAX_FILE_BYTES:,} characters (MAX_FILE_BYTES)")
        data = load_yaml_bounded(text, MAX_YAML_NODES)
    except TooLarge as exc:
        message = f"{source}: refused: {exc}; write each specialist out (without nested aliases)"
        raise ValidationError(message, [Problem("yaml", message, file=source)]) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        message = f"{source}: not valid YAML{where}: {problem}"
        raise ValidationError(message, [Problem("yaml", message, file=source)]) from None
    return validate_specialists(data, source=source)


def validate_specialists(data: object, *, source: str = "<data>") -> list[Specialist]:
    """Validate ``{"specialists": [...]}`` (or the list itself); raise one ValidationError listing
    every problem, each naming the specialist (``item``, from 0) and the field; its message names the
    specialist by number and id."""
    if isinstance(data, Mapping):
        extra = sorted(set(data) - {"specialists"})
        if extra:
            message = f"{source}: unknown top-level keys {extra}; the file holds one key, `specialists:`"
            raise ValidationError(message, [Problem(str(extra[0]), message, file=source)])
        data = data.get("specialists")
    if not isinstance(data, list) or not data:
        message = f"{source}: expected `specialists:` followed by a non-empty list of specialists"
        raise ValidationError(message, [Problem("specialists", message, file=source)])

    problems: list[Problem] = []
    names: dict[int, str] = {}  # as messages name them: "specialist 3 (email)"
    specialists: list[Specialist] = []
    seen: dict[str, int] = {}
    for i, raw in enumerate(data):
        name = f"specialist {i + 1}"
        if isinstance(raw, Mapping) and isinstance(raw.get("id"), str):
            name += f" ({raw['id']})"
        names[i] = name
        if not isinstance(raw, Mapping):
            problems.append(Problem("", f"must be a mapping, got {type(raw).__name__}", i, source))
            continue
        try:
            spec = Specialist.model_validate(dict(raw))
        except pydantic.ValidationError as exc:
            for err in exc.errors():
                loc = ".".join(str(p) for p in err["loc"])
                problems.append(Problem(loc, _pydantic_message(err), i, source))
            continue
        if spec.id in seen:
            problems.append(
                Problem("id", f"duplicate id; specialist {seen[spec.id] + 1} already uses {spec.id!r}", i, source)
            )
            continue
        seen[spec.id] = i
        specialists.append(spec)
    if problems:
        # every problem here is about one specialist, so its item is set
        lines = [f"{names.get(p.item or 0, '')}: {p.field + ': ' if p.field else ''}{p.message}" for p in problems]
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
