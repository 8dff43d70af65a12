"""The routes that carry a whole export over HTTP: GET /v1/export streams one as a tar that a client writes
where it is, POST /v1/import takes one; anything that is not such a tar is refused with 422 and stores nothing."""

from __future__ import annotations

import io
import json
import tarfile

import pytest
from fastapi.testclient import TestClient

from brain.app.core import Brain
from brain.features.pam.export import write_export
from brain.features.pam.transfer import read_export_archive
from brain.shells.api import create_app


def tar_of(*members: tuple[str, bytes], kind: bytes = tarfile.REGTYPE) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data) if kind == tarfile.REGTYPE else 0
            info.type = kind
            archive.addfile(info, io.BytesIO(data) if kind == tarfile.REGTYPE else None)
    return buffer.getvalue()


@pytest.fixture
def client(embedded_store):
    embedded_store.upsert_memory("Ada takes her tea without sugar", entity="ada", importance=4)
    embedded_store.upsert_memory("The office closes at six")
    with Brain(embedded_store, start_worker=False) as brain, TestClient(create_app(brain=brain)) as http:
        yield http, embedded_store


def test_an_export_travels_as_a_tar_and_is_written_where_the_client_is(client, tmp_path):
    http, _ = client
    response = http.get("/v1/export", params={"entity": "ada"})
    assert response.status_code == 200 and response.headers["content-type"] == "application/x-tar"
    built = read_export_archive(response.content)
    assert list(built.files)[-1] == "memory-store.json"  # written last: it names the others
    report = write_export(built, tmp_path / "out")
    texts = {m["content"] for m in json.loads((tmp_path / "out" / "memory-store.json").read_text())["memories"]}
    assert texts == {"Ada takes her tea without sugar", "The office closes at six"} and report.memories == 2


def test_an_import_of_a_tar_stores_it_and_anything_else_is_refused_whole(client, tmp_path):
    http, store = client
    exported = read_export_archive(http.get("/v1/export").content)
    before = store.count()
    refused = [
        b"",
        b"not a tar at all",
        tar_of(("memory-store.json", b"{}"), ("../escape.json", b"{}")),  # a name outside the export
        tar_of(("conversations", b""), kind=tarfile.DIRTYPE),  # not a file
        tar_of(("embeddings.json", b"{}")),  # no memory store
        tar_of(("memory-store.json", b"{not json")),
    ]
    for body in refused:
        answer = http.post("/v1/import", content=body, headers={"content-type": "application/octet-stream"})
        assert answer.status_code == 422, (body[:40], answer.text)
        assert answer.json()["error"] == "validation_error"
    assert store.count() == before
    ada = [d.id for d in store.get(type="memory") if d.text.startswith("Ada")]
    store.delete(ada)  # gone here, still in the export
    body = tar_of(*exported.files.items())
    imported = http.post("/v1/import", content=body)
    assert imported.status_code == 200, imported.text
    assert imported.json()["new"] == 1 and imported.json()["unchanged"] == 1
    assert "Ada takes her tea without sugar" in {d.text for d in store.get(type="memory")}
