"""persona.md -> persona documents: split by headings, idempotent, replaced as a whole."""

from __future__ import annotations

import pytest

from brain.features.persona import load_persona, persona_block, split_sections
from brain.model.errors import ValidationError
from brain.shells.cli.reports import startup_text

PERSONA = """You are Brain.

## Tone
Warm and brief.

### Hard Limits!
Never share secrets.
"""


def test_sections_follow_headings_with_core_first():
    sections = split_sections(PERSONA)
    assert [(s.topic, s.text) for s in sections] == [
        ("core", "You are Brain."),
        ("tone", "Warm and brief."),
        ("hard_limits", "Never share secrets."),
    ]


def test_unchanged_file_writes_nothing_and_changed_file_replaces_all(embedded_store, tmp_path, monkeypatch):
    embedded = []
    real = embedded_store.embedder.embed_documents
    monkeypatch.setattr(
        embedded_store.embedder, "embed_documents", lambda texts: embedded.append(len(texts)) or real(texts)
    )
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


def test_readers_never_see_a_mix_or_an_empty_persona_while_it_changes(embedded_store, tmp_path):
    import threading

    from brain.features.persona import current_persona

    path = tmp_path / "persona.md"
    path.write_text(PERSONA, encoding="utf-8")
    load_persona(embedded_store, path)
    seen: list[tuple[int, int]] = []  # (sections, distinct versions) per read
    stop = threading.Event()

    def reader() -> None:
        while not stop.is_set():
            docs = current_persona(embedded_store)
            seen.append((len(docs), len({d.metadata["version"] for d in docs})))

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        for i in range(6):
            path.write_text(PERSONA + f"\n## Round\nRound {i}.\n" * (i % 2), encoding="utf-8")
            load_persona(embedded_store, path)
    finally:
        stop.set()
        thread.join()
    assert seen and all(n in (3, 4) and versions == 1 for n, versions in seen)


def test_an_interrupted_load_keeps_the_old_persona_and_a_rerun_completes_it(embedded_store, tmp_path, monkeypatch):
    path = tmp_path / "persona.md"
    path.write_text(PERSONA, encoding="utf-8")
    old = load_persona(embedded_store, path)
    path.write_text(PERSONA.replace("Warm and brief.", "Formal."), encoding="utf-8")
    real = embedded_store.upsert_docs

    def crash_after_two(docs):
        real(list(docs)[:2])  # a partial write, as if the process died here
        raise KeyboardInterrupt

    monkeypatch.setattr(embedded_store, "upsert_docs", crash_after_two)
    with pytest.raises(KeyboardInterrupt):
        load_persona(embedded_store, path)
    monkeypatch.setattr(embedded_store, "upsert_docs", real)
    assert "Warm and brief." in persona_block(embedded_store)  # the complete old version still serves
    assert {h.metadata["version"] for h in embedded_store.retrieve_persona("tone", k=5)} == {old.version}
    again = load_persona(embedded_store, path)
    assert again.changed
    docs = embedded_store.get(type="persona")
    assert len(docs) == 3 and {d.metadata["version"] for d in docs} == {again.version}
    assert "Formal." in persona_block(embedded_store)


def test_startup_opens_loads_and_warms(tmp_path, local_embedder):
    from brain.app.startup import startup
    from brain.config import Settings

    (tmp_path / "persona.md").write_text(PERSONA, encoding="utf-8")
    settings = Settings(data_dir=tmp_path / "data", persona_path=tmp_path / "persona.md")
    first = startup(settings)
    assert first.persona.changed and first.persona.sections == 3 and first.warnings == []
    assert first.indexed["persona"] == 3
    second = startup(settings)
    assert not second.persona.changed and second.persona.version == first.persona.version
    assert "unchanged" in startup_text(second)
    missing = startup(Settings(data_dir=tmp_path / "other", persona_path=tmp_path / "nope.md"))
    assert missing.persona is None and "not found" in missing.warnings[0]
    assert missing.to_dict()["store"]["by_type"]["persona"] == 0


def test_startup_brings_a_lagging_mirror_up_to_date(tmp_path, local_embedder):
    from brain.app.core import open_store
    from brain.app.startup import startup
    from brain.config import Settings

    settings = Settings(data_dir=tmp_path / "data", persona_path=tmp_path / "none.md")
    with open_store(settings, embedder=local_embedder, mirror=False) as store:  # written while the mirror was off
        ids = {store.upsert_memory("Alice likes tea"), store.upsert_memory("Bob likes chess")}
    report = startup(settings, warm=False)
    assert report.mirror_sync is not None and report.mirror_sync.added == 2
    assert report.store.mirror.ids(foreign=False) == ids
    report.store.close()
    again = startup(settings, warm=False)
    # in step: compared (content, not counts), nothing to do
    assert again.mirror_sync.changed == 0 and again.mirror_sync.rehashed == 0 and again.mirror_sync.unchanged == 2
    again.store.close()
