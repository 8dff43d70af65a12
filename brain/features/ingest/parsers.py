"""Parsing a knowledge-base file into drafts (a document's text and content metadata, before chunking):
Markdown sections and Q/A blocks, JSONL and CSV FAQ tables, plain text; problems located by line."""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from brain.model.schemas import metadata_value_problem
from brain.text.markdown import markdown_sections, slugify

#: metadata keys an input may not set through extra fields / columns
RESERVED_FIELDS = frozenset(
    {
        "id",
        "text",
        "embedding",
        "document",
        "type",
        "timestamp",
        "ts_epoch",
        "source",
        "scope",
        "question",
        "answer",
        "topic",
        "specialist",
        "specialist_name",
        "_specialist_name",
        "version",
        "_version",
    }
)


MAX_PROBLEMS_PER_FILE = 20


_QUESTION = re.compile(r"^\s*(?:\*\*|__)?Q(?:\*\*|__)?\s*:")


_ANSWER = re.compile(r"^\s*(?:\*\*|__)?A(?:\*\*|__)?\s*:")


@dataclass
class Draft:
    """One document before chunking: its text and content metadata."""

    text: str
    meta: dict[str, object]


@dataclass
class _Parsed:
    drafts: list[Draft] = field(default_factory=list)
    errors: list[tuple[int | None, str]] = field(default_factory=list)
    warnings: list[tuple[int | None, str]] = field(default_factory=list)


def _extra_problem(key: object, value: object) -> str | None:
    if not isinstance(key, str) or not key.strip():
        return "a field needs a non-empty name"
    if key in RESERVED_FIELDS or key.startswith("kb_"):
        return "this name is reserved"
    if key.startswith(("$", "#", "chroma:")):
        return "names cannot start with '$', '#' or 'chroma:'"
    return metadata_value_problem(value)


def _add_extras(
    meta: dict[str, object], extras: Iterable[tuple[str, object]], parsed: _Parsed, line: int | None
) -> None:
    for key, value in extras:
        problem = _extra_problem(key, value)
        if problem:
            shown = json.dumps(value, ensure_ascii=False, default=str) if not isinstance(value, str) else repr(value)
            parsed.warnings.append((line, f"field {key!r} = {shown[:80]} not stored: {problem}"))
        else:
            meta[key] = list(value) if isinstance(value, tuple) else value


def _faq_draft(question: str, answer: str, topic: str, specialist: str | None, version: str | None) -> Draft:
    meta: dict[str, object] = {"topic": topic, "kb_kind": "row"}
    if specialist:
        meta["_specialist_name"] = specialist
    if version:
        meta["_version"] = version
    return Draft(f"Q: {question.strip()}\nA: {answer.strip()}", meta)


def _front_matter(lines: list[str], parsed: _Parsed) -> tuple[dict[str, object], str | None, int]:
    """``(file metadata, topic or None, index of the first body line)``; no front matter -> ({}, None, 0)."""
    if not lines or lines[0].strip() != "---":
        return {}, None, 0
    end = next((i for i in range(1, len(lines)) if lines[i].strip() in ("---", "...")), None)
    if end is None:
        return {}, None, 0  # a lone '---' is a thematic break, not front matter
    meta: dict[str, object] = {}
    topic = None
    for i in range(1, end):
        raw = lines[i].strip()
        if not raw or raw.startswith("#"):
            continue
        key, sep, value = raw.partition(":")
        key, value = key.strip(), value.strip().strip("'\"")
        if not sep or not key:
            parsed.errors.append((i + 1, f"front matter line must be 'key: value', got {raw!r}"))
        elif key == "topic":
            topic = slugify(value) if value else None
        elif key == "specialist":
            if value:
                meta["_specialist_name"] = value
        elif key == "version":
            if value:
                meta["_version"] = value
        else:
            _add_extras(meta, [(key, value)], parsed, i + 1)
    return meta, topic, end + 1


def parse_markdown(text: str, default_topic: str) -> _Parsed:
    """Sections and Q:/A: blocks of a Markdown file (see the module docstring)."""
    parsed = _Parsed()
    lines = text.split("\n")
    file_meta, fm_topic, first = _front_matter(lines, parsed)

    for section in markdown_sections(lines[first:], first_line=first + 1):
        title = (section.title or "section") if section.level else ""
        base = {**file_meta, "topic": fm_topic or (slugify(title) if title else default_topic)}
        if title:
            base["kb_heading"] = title
        head = [(section.lines[0].number, section.lines[0].text)] if section.level else []
        blocks: list[list[tuple[int, str]]] = [[]]  # blocks[0]: the section's text before its first Q:
        answered: list[bool] = [True]
        for line in section.body:
            if not line.code and _QUESTION.match(line.text):
                blocks.append([])
                answered.append(False)
            elif not line.code and _ANSWER.match(line.text):
                answered[-1] = True
            blocks[-1].append((line.number, line.text))
        if "\n".join(line for _, line in blocks[0]).strip():
            parsed.drafts.append(
                Draft("\n".join(line for _, line in head + blocks[0]).strip(), {**base, "kb_kind": "section"})
            )
        for block, has_answer in zip(blocks[1:], answered[1:]):
            qa = "\n".join(line for _, line in block).strip()
            if not has_answer:
                parsed.warnings.append(
                    (block[0][0], f"a question without an 'A:' line (kept as written): {qa.splitlines()[0][:80]!r}")
                )
            parsed.drafts.append(Draft(qa, {**base, "kb_kind": "qa"}))
    return parsed


def _row_fields(row: dict[str, Any], line: int, parsed: _Parsed, default_topic: str, known: dict[str, str]) -> None:
    """One FAQ row (keys already mapped to question/answer/topic/specialist/version where known)."""
    values = {name: row.get(col) for name, col in known.items()}
    problems = []
    for name in ("question", "answer"):
        value = values[name]
        if not isinstance(value, str) or not value.strip():
            problems.append(f"'{name}' must be a non-empty string, got {value!r}")
    for name in ("topic", "specialist", "version"):
        value = values.get(name)
        if value is not None and not isinstance(value, str):
            problems.append(f"'{name}' must be a string, got {value!r}")
    if problems:
        parsed.errors.append((line, "; ".join(problems)))
        return
    # the checks above leave question and answer non-empty strings, and topic a string or None
    question, answer, given_topic = str(values["question"]), str(values["answer"]), values.get("topic")
    topic = slugify(given_topic) if isinstance(given_topic, str) and given_topic.strip() else default_topic
    draft = _faq_draft(
        question,
        answer,
        topic,
        (values.get("specialist") or "").strip() or None,
        (values.get("version") or "").strip() or None,
    )
    known_cols = set(known.values())
    _add_extras(draft.meta, ((k, v) for k, v in row.items() if k not in known_cols), parsed, line)
    parsed.drafts.append(draft)


_ROW_FIELDS = ("question", "answer", "topic", "specialist", "version")


def parse_jsonl(text: str, default_topic: str) -> _Parsed:
    parsed = _Parsed()
    for line_no, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            parsed.errors.append((line_no, f"not valid JSON: {exc.msg} (column {exc.colno})"))
            continue
        if not isinstance(row, dict):
            parsed.errors.append((line_no, f"each line must be a JSON object, got {type(row).__name__}"))
            continue
        _row_fields(row, line_no, parsed, default_topic, {name: name for name in _ROW_FIELDS})
    return parsed


def parse_csv(text: str, default_topic: str) -> _Parsed:
    parsed = _Parsed()
    reader = csv.reader(io.StringIO(text, newline=""))
    header: list[str] | None = None
    known: dict[str, str] = {}
    header_line = 1
    previous_end = 0
    try:
        for row in reader:
            line_no, previous_end = previous_end + 1, reader.line_num
            if not any(cell.strip() for cell in row):
                continue
            if header is None:
                header, header_line = [cell.strip() for cell in row], line_no
                lowered = [h.casefold() for h in header]
                duplicates = sorted({h for h in header if lowered.count(h.casefold()) > 1 and h})
                if duplicates:
                    parsed.errors.append((line_no, f"duplicate columns: {', '.join(duplicates)}"))
                    return parsed
                known = {name: header[lowered.index(name)] for name in _ROW_FIELDS if name in lowered}
                missing = [name for name in ("question", "answer") if name not in known]
                if missing:
                    parsed.errors.append(
                        (
                            line_no,
                            f"no {' or '.join(repr(m) for m in missing)} column in the header "
                            f"(columns: {', '.join(header) or 'none'})",
                        )
                    )
                    return parsed
                continue
            if len(row) != len(header):
                parsed.errors.append(
                    (
                        line_no,
                        f"row has {len(row)} fields but the header (line {header_line}) has "
                        f"{len(header)}; quote values that contain commas",
                    )
                )
                continue
            cells = {}
            for key, value in zip(header, row):
                if key in known.values():
                    cells[key] = value if value.strip() else None
                elif value.strip():
                    cells[key] = value
            _row_fields(cells, line_no, parsed, default_topic, known)
    except csv.Error as exc:
        parsed.errors.append((previous_end + 1, f"not valid CSV: {exc}"))
    if header is None:
        return parsed  # an empty file: no documents
    return parsed


def parse_text(text: str, default_topic: str) -> _Parsed:
    parsed = _Parsed()
    if text.strip():
        parsed.drafts.append(Draft(text.strip(), {"topic": default_topic, "kb_kind": "text"}))
    return parsed


PARSERS = {"markdown": parse_markdown, "jsonl": parse_jsonl, "csv": parse_csv, "text": parse_text}
