"""Files brain reads at start-up are bounded: a few hundred bytes of nested YAML aliases in specialists.yaml,
or a persona.md of tens of megabytes, is refused at once with an error naming the file and the limit, and
nothing is written; well-formed files (aliases used sparingly) load as before."""

from __future__ import annotations

import time
import tracemalloc
from pathlib import Path

import pytest
from click.testing import CliRunner

import brain
import brain.store.facade
from brain.config import Settings
from brain.features.persona import MAX_PERSONA_BYTES, MAX_PERSONA_SECTIONS, load_persona
from brain.features.specialists import load_specialists, specialists_from_yaml
from brain.features.specialists.model import MAX_FILE_BYTES, MAX_YAML_NODES
from brain.model.errors import ConfigError, ValidationError
from brain.providers.embeddings.local import BATCH_TOKENS, MAX_TOKENS, _load_runtime
from brain.text.bounded import TooLarge, load_yaml_bounded, read_bounded_text

ROOT = Path(__file__).resolve().parents[2]


def laughs(levels: int = 9, width: int = 9) -> str:
    """The classic alias bomb: each level a list of ``width`` aliases of the one before (width**levels nodes)."""
    names = [f"l{n}" for n in range(levels + 1)]
    lines = [f"{names[0]}: &{names[0]} [" + ",".join(['"lol"'] * width) + "]"]
    for prev, name in zip(names, names[1:]):
        lines.append(f"{name}: &{name} [" + ",".join([f"*{prev}"] * width) + "]")
    return (
        "\n".join(lines + ["specialists:", "  - id: ocr", "    description: reads text", "    bomb: *" + names[-1]])
        + "\n"
    )


def bounded(call, seconds: float = 5.0, megabytes: float = 200.0):
    """Run ``call``; assert it took less than ``seconds`` and peaked under ``megabytes`` of Python memory."""
    tracemalloc.start()
    started = time.perf_counter()
    try:
        return call()
    finally:
        elapsed = time.perf_counter() - started
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        assert elapsed < seconds, f"took {elapsed:.1f} s"
        assert peak < megabytes * 2**20, f"peaked at {peak / 2**20:.0f} MB"


def test_a_yaml_alias_bomb_is_refused_at_once(tmp_path):
    text = laughs()
    assert len(text.encode()) < 1000  # the file was 554 bytes
    path = tmp_path / "specialists.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ValidationError) as caught:
        bounded(lambda: load_specialists(path))
    message = str(caught.value)
    assert str(path) in message and f"expand to more than {MAX_YAML_NODES:,} nodes" in message
    with pytest.raises(ValidationError, match="aliases expand"):
        bounded(lambda: specialists_from_yaml(text))


def test_recursive_and_deeply_nested_yaml_are_refused():
    with pytest.raises(TooLarge, match="refers to a node that contains it"):
        load_yaml_bounded("a: &a [1, *a]\n", 1000)
    for deep in ("[" * 499_000 + "]" * 499_000, "- " * 499_000 + "x\n", "{a: " * 199_000 + "1" + "}" * 199_000):
        with pytest.raises(ValidationError, match="nested more than 100 levels deep"):
            bounded(lambda: specialists_from_yaml(deep))  # noqa: B023


def test_aliases_used_sparingly_still_load():
    text = """
specialists:
  - id: ocr
    description: Reads the text in an image.
    semantics: &reads {canonical: read the text in an image, predicates: [read], objects: [image]}
    params: &params [{name: image, type: string, description: the image, required: true}]
  - id: caption
    description: Describes what an image shows.
    semantics: *reads
    params: *params
"""
    loaded = specialists_from_yaml(text)
    assert [s.id for s in loaded] == ["ocr", "caption"]
    # 13 nodes once expanded: the mapping, two keys, [1, 2] (3) and [*x, *x] (1 + 3 + 3)
    assert load_yaml_bounded("x: &x [1, 2]\ny: [*x, *x]\n", 13) == {"x": [1, 2], "y": [[1, 2], [1, 2]]}
    with pytest.raises(TooLarge):
        load_yaml_bounded("x: &x [1, 2]\ny: [*x, *x]\n", 12)
    assert len(load_specialists(ROOT / "config" / "specialists.yaml")) > 0  # the shipped file


def test_a_huge_specialists_file_is_refused_unread(tmp_path):
    path = tmp_path / "specialists.yaml"
    with open(path, "wb") as out:
        out.truncate(50 * 2**20)  # 50 MB, sparse
    with pytest.raises(ConfigError, match=f"larger than {MAX_FILE_BYTES:,} bytes"):
        bounded(lambda: load_specialists(path), megabytes=10)


def test_a_brain_with_the_bomb_keeps_serving_and_reports_it(tmp_path, local_embedder):
    path = tmp_path / "specialists.yaml"
    path.write_text(laughs(), encoding="utf-8")
    settings = Settings(data_dir=tmp_path / "data", specialists_path=path)
    with brain.open(settings, embedder=local_embedder, start_worker=False) as b:
        started = time.perf_counter()
        with pytest.raises(ConfigError, match="aliases expand"):
            b.register_specialists()
        assert time.perf_counter() - started < 10
        assert b.health()["status"] in ("ok", "degraded")


def test_a_huge_persona_is_refused_and_nothing_is_written(tmp_path, embedded_store):
    path = tmp_path / "persona.md"
    with open(path, "wb") as out:
        out.write(b"You are Juniper.\n\n# Tone\n")
        out.truncate(48 * 2**20)  # the 48 MB
    with pytest.raises(ValidationError) as caught:
        bounded(lambda: load_persona(embedded_store, path), megabytes=10)
    assert str(path) in str(caught.value) and f"{MAX_PERSONA_BYTES:,} bytes" in str(caught.value)
    assert embedded_store.count("persona") == 0


def test_a_persona_over_the_cap_is_refused_naming_file_size_cap_and_fix(tmp_path, embedded_store):
    path = tmp_path / "persona.md"
    path.write_text("You are Juniper.\n\n# Tone\n" + "warm " * (MAX_PERSONA_BYTES // 5), encoding="utf-8")
    size = path.stat().st_size
    with pytest.raises(ValidationError) as caught:
        load_persona(embedded_store, path)
    message = str(caught.value)
    assert str(path) in message and f"{size:,} bytes" in message and f"{MAX_PERSONA_BYTES:,} bytes" in message
    assert "brain ingest" in message
    assert embedded_store.count("persona") == 0


def test_a_persona_at_the_cap_is_embedded_in_bounded_batches(tmp_path, embedded_store, monkeypatch):
    """The model's memory grows with (texts x longest text) per call: no call may exceed BATCH_TOKENS,
    however many long sections the largest accepted persona has."""
    embedder = embedded_store.embedder
    calls: list[tuple[int, int]] = []
    real = type(embedder)._embed

    def counting(self, texts, kind):
        lengths = [len(e.ids) for e in _load_runtime().tokenizer.encode_batch(texts)]
        calls.append((len(texts), max(lengths)))
        return real(self, texts, kind)

    monkeypatch.setattr(type(embedder), "_embed", counting)
    sentence = "The assistant keeps to what it knows and asks when a request is unclear. "
    sections = "".join(f"# Part {n}\n{sentence * 20}\n" for n in range(MAX_PERSONA_BYTES // 1560))
    path = tmp_path / "persona.md"
    path.write_text("You are Juniper.\n\n" + sections, encoding="utf-8")
    assert MAX_PERSONA_BYTES * 0.9 < path.stat().st_size <= MAX_PERSONA_BYTES
    report = load_persona(embedded_store, path)
    assert report.sections == MAX_PERSONA_BYTES // 1560 + 1
    assert sum(n for n, _ in calls) == report.sections
    assert max(n * longest for n, longest in calls) <= BATCH_TOKENS
    assert max(longest for _, longest in calls) == MAX_TOKENS  # the long sections did fill the model's window


def test_a_persona_of_too_many_sections_is_refused(tmp_path, embedded_store):
    path = tmp_path / "persona.md"
    path.write_text("".join(f"# Part {n}\ntext {n}\n" for n in range(MAX_PERSONA_SECTIONS + 1)), encoding="utf-8")
    with pytest.raises(ValidationError, match=f"{MAX_PERSONA_SECTIONS + 1} sections"):
        load_persona(embedded_store, path)
    assert embedded_store.count("persona") == 0
    path.write_text("You are Juniper.\n\n# Tone\nWarm.\n", encoding="utf-8")
    assert load_persona(embedded_store, path).sections == 2  # a persona of the usual size loads


def test_read_bounded_text_reads_no_further_than_the_limit(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(b"x" * 11)
    assert read_bounded_text(path, 11) == "x" * 11
    with pytest.raises(TooLarge, match="larger than 10 bytes"):
        read_bounded_text(path, 10)


def test_the_cli_says_what_is_wrong_with_the_persona(tmp_path, monkeypatch, local_embedder):
    monkeypatch.setattr(brain.store.facade, "get_embedder", lambda settings: local_embedder, raising=False)
    from brain.shells.cli import cli

    path = tmp_path / "persona.md"
    with open(path, "wb") as out:
        out.truncate(MAX_PERSONA_BYTES + 1)
    result = CliRunner().invoke(cli, ["--data-dir", str(tmp_path / "data"), "persona", "load", str(path)])
    assert result.exit_code == 1, result.output
    assert "MAX_PERSONA_BYTES" in result.output and "Traceback" not in result.output
