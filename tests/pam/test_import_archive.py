"""An import sent to the server as a tar (POST /v1/import, `brain import` beside a running server): what it
costs is bounded by what it takes on the wire, and every archive that is not an export's files is refused
with a 422 naming the member at fault, before anything is stored."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from brain.app.core import Brain
from brain.config import Settings
from brain.features.pam import export_pam, transfer
from brain.features.pam.transfer import import_archive, unpack_import
from brain.model.errors import ValidationError
from brain.ops.served import ServedOperations, ServerLink
from brain.shells.api import create_app
from brain.shells.web.tokens import TokenTable

ADMIN = "admin-token-0123456789abcdef"
ALICE = "alice-token-0123456789abcdef"


def tar_of(*members: tuple[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def sparse_tar(name: str, real_size: int, data: bytes = b"{}") -> bytes:
    """One member of GNU's sparse format (PAX 0.1): ``data`` on the wire, ``real_size`` bytes once read."""
    buffer = io.BytesIO()
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.pax_headers = {"GNU.sparse.map": f"{real_size - len(data)},{len(data)}", "GNU.sparse.size": str(real_size)}
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as archive:
        archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


@pytest.fixture
def exported(embedded_store, tmp_path) -> Path:
    embedded_store.upsert_memory("Ada takes her tea without sugar", entity="ada", importance=4)
    embedded_store.upsert_memory("The office closes at six")
    folder = export_pam(embedded_store, tmp_path / "export").out_dir
    embedded_store.delete([d.id for d in embedded_store.get(type="memory")])
    return folder


def served(embedded_store, **settings):
    brain = Brain(embedded_store, start_worker=False)
    tokens = TokenTable.from_settings(Settings(api_token=ADMIN))
    app = create_app(Settings(data_dir=embedded_store.settings.data_dir, **settings), brain=brain, tokens=tokens)
    return brain, TestClient(app, headers={"Authorization": f"Bearer {ADMIN}"})


@pytest.fixture
def client(embedded_store):
    brain, http = served(embedded_store)
    with brain, http:
        yield http


def post(http: TestClient, body: bytes):
    return http.post("/v1/import", content=body, headers={"content-type": "application/octet-stream"})


def refused(http: TestClient, body: bytes) -> str:
    answer = post(http, body)
    assert answer.status_code == 422, answer.text
    assert answer.json()["error"] == "validation_error"
    return answer.json()["message"]


def test_a_conversation_file_name_too_long_for_a_file_system_is_a_422_naming_it(client, exported, embedded_store):
    name = "conversations/" + "a" * 300 + ".json"
    body = tar_of(("memory-store.json", (exported / "memory-store.json").read_bytes()), (name, b"{}"))
    message = refused(client, body)
    assert "more than 250 characters" in message and "'conversations/aaaa" in message
    assert len(message) < 400  # the name is shown by its start, not whole
    assert embedded_store.count() == 0


def test_a_sparse_member_is_refused_from_its_header_before_anything_is_written(client, tmp_path, embedded_store):
    body = sparse_tar("memory-store.json", 32 << 20)  # 32 MiB once read, a few KB on the wire
    assert len(body) < 16 << 10
    message = refused(client, body)
    assert "'memory-store.json' is a sparse file" in message
    into = tmp_path / "unpacked"
    into.mkdir()
    with pytest.raises(ValidationError, match="sparse"):
        unpack_import(body, into)
    assert list(into.iterdir()) == []  # refused before a byte of it was written


def test_a_member_named_twice_is_refused_naming_it(client, exported, embedded_store):
    good = (exported / "memory-store.json").read_bytes()
    body = tar_of(("memory-store.json", b'{"not": "this one"}'), ("memory-store.json", good))
    message = refused(client, body)
    assert "'memory-store.json' twice" in message
    assert embedded_store.count() == 0


def test_an_archive_of_too_many_members_is_refused(client, exported, monkeypatch):
    monkeypatch.setattr(transfer, "MAX_MEMBERS", 2)
    members = [(f"conversations/c{i}.json", b"{}") for i in range(3)]
    message = refused(client, tar_of(("memory-store.json", b"{}"), *members))
    assert "more than 2 files" in message


def test_members_together_never_exceed_the_archive(tmp_path):
    """The sizes members declare are bounded by the archive they are in (a header claiming more is refused)."""
    body = bytearray(tar_of(("memory-store.json", b"{}" * 600)))
    info = tarfile.TarInfo.frombuf(bytes(body[:512]), "utf-8", "surrogateescape")
    info.size = 1 << 30
    body[:512] = info.tobuf()
    into = tmp_path / "unpacked"
    into.mkdir()
    with pytest.raises(ValidationError, match="more than the archive"):
        unpack_import(bytes(body), into)
    assert list(into.iterdir()) == []


def test_an_import_larger_than_the_body_limit_is_taken_up_to_its_own_bound(embedded_store, exported):
    body = import_archive(exported)
    assert len(body) > 2048
    brain, http = served(embedded_store, api_max_body_bytes=2048, import_max_bytes=len(body) + 10_000)
    with brain, http:
        assert http.post("/v1/memories", json={"text": "x" * 3000}).status_code == 413  # other routes keep theirs
        answer = post(http, body)
        assert answer.status_code == 200, answer.text
        assert answer.json()["new"] == 2
    assert {d.text for d in embedded_store.get(type="memory")} == {
        "Ada takes her tea without sugar",
        "The office closes at six",
    }


def test_an_import_over_its_bound_is_a_413_naming_the_setting_declared_or_streamed(embedded_store, exported):
    body = import_archive(exported)
    brain, http = served(embedded_store, import_max_bytes=len(body) - 1)
    with brain, http:
        declared = post(http, body)

        def chunks():
            for start in range(0, len(body), 1000):
                yield body[start : start + 1000]

        streamed = http.post("/v1/import", content=chunks())  # no Content-Length: counted as it comes
        for answer in (declared, streamed):
            assert answer.status_code == 413, answer.text
            assert "BRAIN_IMPORT_MAX_BYTES" in answer.json()["message"]
    assert embedded_store.count() == 0


def test_an_entity_token_is_refused_before_the_body_is_read(embedded_store, tmp_path):
    tokens_file = tmp_path / "tokens"
    tokens_file.write_text(f"alice {ALICE}\n", encoding="utf-8")
    brain = Brain(embedded_store, start_worker=False)
    tokens = TokenTable.from_settings(Settings(api_token=ADMIN, api_tokens_file=tokens_file))
    app = create_app(
        Settings(data_dir=embedded_store.settings.data_dir, import_max_bytes=1024), brain=brain, tokens=tokens
    )

    def chunks():  # over the bound, without a Content-Length: a route that read it would answer 413
        for _ in range(10):
            yield b"\0" * 1000

    with brain, TestClient(app, headers={"Authorization": f"Bearer {ALICE}"}) as http:
        answer = http.post("/v1/import", content=chunks())
    assert answer.status_code == 403, answer.text
    assert embedded_store.count() == 0


# the link gives its long requests their own timeout, which Starlette's TestClient standing in for the server ignores
@pytest.mark.filterwarnings("ignore:You should not use the 'timeout' argument with the TestClient")
def test_brain_import_beside_the_server_sends_an_export_over_the_body_limit(embedded_store, exported):
    brain, http = served(embedded_store, api_max_body_bytes=2048)
    with brain, http:
        link = ServerLink("http://testserver", token=ADMIN)
        link._http = http  # the server in this process
        report = ServedOperations(link).maintenance.import_pam(exported)
    assert report.new == 2 and report.memory_store == exported / "memory-store.json"
