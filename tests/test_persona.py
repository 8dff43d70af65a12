"""persona.md -> persona documents: split by headings, idempotent, replaced as a whole."""

from __future__ import annotations

import pytest

from brain.errors import ValidationError
from brain.persona import load_persona, persona_block, split_sections

PERSONA = """You are Brain.

## Tone
Warm and brief.

### Hard Limits!
Never share secrets.
"""


def test_sections_follow_headings_with_core_first():
    sections = split_sections(PERSONA)
    assert [(s.topic, s.text) for s in sections] == [
        ("core", "You are Brain."), ("tone", "Warm and brief."), ("hard_limits", "Never share secrets."),
    ]


def test_unchanged_file_writes_nothing_and_changed_file_replaces_all(embedded_store, tmp_path, monkeypatch):
    embedded = []
    real = embedded_store.embedder.embed_documents
    monkeypatch.setattr(embedded_store.embedder, "embed_documents", lambda texts: embedded.append(len(texts)) or real(texts))
    path = tmp_path / "persona.md"
    path.write_text(PERSONA, encoding="utf-8")
    first = load_persona(embedded_store, path)
    assert first.changed and first.sections == 3
    assert embedded == [3]
    ids_before = sorted(d.id for d in embedded_store.get(type="persona"))
    again = load_persona(embedded_store, path)
    assert not again.changed and again.version == first.version
    assert sorted(d.id for d in embedded_store.get(type="persona")) == ids_before
    assert embedded == [3]  # nothing embedded for an unchanged file

    path.write_text(PERSONA.replace("Warm and brief.", "Formal and precise."), encoding="utf-8")
    changed = load_persona(embedded_store, path)
    assert changed.changed and changed.removed == 3
    docs = embedded_store.get(type="persona")
    assert len(docs) == 3 and not set(ids_before) & {d.id for d in docs}
    assert {d.metadata["version"] for d in docs} == {changed.version}
    block = persona_block(embedded_store)
    assert block.index("You are Brain.") < block.index("Formal and precise.") < block.index("Never share secrets.")
    assert "Warm and brief." not in block
    assert embedded_store.retrieve_persona("how formal should you be?", k=1)[0].metadata["topic"] == "tone"
    assert len(persona_block(embedded_store, max_chars=20)) == 20


def test_missing_or_empty_persona_is_a_clear_error(embedded_store, tmp_path):
    with pytest.raises(ValidationError, match="does not exist"):
        load_persona(embedded_store, tmp_path / "nope.md")
    (tmp_path / "empty.md").write_text("\n\n## Tone\n\n", encoding="utf-8")
    with pytest.raises(ValidationError, match="no text"):
        load_persona(embedded_store, tmp_path / "empty.md")
