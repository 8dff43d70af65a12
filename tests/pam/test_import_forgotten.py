"""A forgotten person stays forgotten: an export made before `brain forget` still holds them, and importing it
skips their documents (counted in the report) unless the operator asks for them with include_forgotten."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from brain.app.core import Brain, open_store
from brain.app.forget import forget_entity
from brain.features.pam import export_pam, import_pam
from brain.features.pam.forgotten import FORGOTTEN_FILE
from brain.features.pam.transfer import import_archive
from brain.ops.served import ServedOperations, ServerLink
from brain.shells.api import create_app

BOB_MEMORY = "Bob collects vintage orreries from Ljubljana"


@pytest.fixture
def forgotten_bob(embedded_store, tmp_path) -> Path:
    """An export of Ada's and Bob's memories and Bob's conversation, made before Bob was forgotten."""
    embedded_store.upsert_memory("Ada takes her tea without sugar", scope="entity:ada")
    embedded_store.upsert_memory(BOB_MEMORY, scope="entity:bob", importance=4)
    embedded_store.upsert_memory("The office closes at six")
    embedded_store.upsert_turn("conv-bob", "I polished the brass orrery", "It must shine now.", scope="entity:bob")
    folder = export_pam(embedded_store, tmp_path / "export").out_dir
    forget_entity(embedded_store, "bob")
    return folder


def bobs(store) -> list[str]:
    return [d.text for d in store.get(where={"scope": "entity:bob"})]


def test_an_import_of_an_older_export_does_not_bring_a_forgotten_person_back(embedded_store, forgotten_bob):
    report = import_pam(embedded_store, forgotten_bob)
    assert bobs(embedded_store) == []
    assert report.forgotten == 3  # the memory and the two turns
    assert report.new == 0 and report.unchanged == 2 and report.conversation_new == 0
    assert any("forgotten" in w and "include-forgotten" in w for w in report.warnings)
    again = import_pam(embedded_store, forgotten_bob)  # stays so, import after import
    assert again.forgotten == 3 and bobs(embedded_store) == []


def test_the_record_of_the_forgotten_holds_no_name(embedded_store, forgotten_bob):
    recorded = (embedded_store.settings.data_dir / FORGOTTEN_FILE).read_bytes()
    assert b"bob" not in recorded.lower()


def test_include_forgotten_brings_them_back_and_ends_their_record(embedded_store, forgotten_bob):
    report = import_pam(embedded_store, forgotten_bob, include_forgotten=True)
    assert report.forgotten == 0 and report.new == 1 and report.conversation_new == 2
    assert BOB_MEMORY in bobs(embedded_store)
    embedded_store.delete([d.id for d in embedded_store.get(where={"scope": "entity:bob"})])
    assert import_pam(embedded_store, forgotten_bob).new == 1  # the operator's word stands: no longer forgotten


def test_the_import_route_skips_a_forgotten_person_unless_asked(embedded_store, forgotten_bob):
    body = import_archive(forgotten_bob)
    with Brain(embedded_store, start_worker=False) as brain, TestClient(create_app(brain=brain)) as http:
        answer = http.post("/v1/import", content=body)
        assert answer.status_code == 200, answer.text
        assert answer.json()["forgotten"] == 3 and bobs(embedded_store) == []
        answer = http.post("/v1/import", content=body, params={"include_forgotten": "true"})
        assert answer.status_code == 200, answer.text
        assert answer.json()["forgotten"] == 0 and BOB_MEMORY in bobs(embedded_store)


# the link gives its long requests their own timeout, which Starlette's TestClient standing in for the server ignores
@pytest.mark.filterwarnings("ignore:You should not use the 'timeout' argument with the TestClient")
def test_brain_import_beside_the_server_skips_a_forgotten_person_unless_asked(embedded_store, forgotten_bob):
    with Brain(embedded_store, start_worker=False) as brain, TestClient(create_app(brain=brain)) as http:
        link = ServerLink("http://testserver")
        link._http = http  # the server in this process
        maintenance = ServedOperations(link).maintenance
        assert maintenance.import_pam(forgotten_bob).forgotten == 3 and bobs(embedded_store) == []
        assert maintenance.import_pam(forgotten_bob, include_forgotten=True).forgotten == 0
        assert BOB_MEMORY in bobs(embedded_store)


def test_brain_import_skips_a_forgotten_person_unless_asked(embedded_store, forgotten_bob, monkeypatch, local_embedder):
    import brain.store.facade
    import brain.wiring
    from brain.shells.cli import cli

    settings = embedded_store.settings
    embedded_store.close()  # the CLI opens the same data directory
    monkeypatch.setenv("BRAIN_DATA_DIR", str(settings.data_dir))
    monkeypatch.setattr(brain.store.facade, "get_embedder", lambda settings: local_embedder, raising=False)
    monkeypatch.setattr(brain.wiring, "get_embedder", lambda settings: local_embedder, raising=False)
    skipped = CliRunner().invoke(cli, ["import", str(forgotten_bob)])
    assert skipped.exit_code == 0, skipped.stderr
    assert "3 documents of forgotten entities" in skipped.stdout and "--include-forgotten" in skipped.stdout
    with open_store(settings, embedder=local_embedder) as store:
        assert bobs(store) == []
    included = CliRunner().invoke(cli, ["import", str(forgotten_bob), "--include-forgotten"])
    assert included.exit_code == 0, included.stderr
    with open_store(settings, embedder=local_embedder) as store:
        assert BOB_MEMORY in bobs(store)
