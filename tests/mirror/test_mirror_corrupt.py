"""A damaged mirror file: brain keeps serving from Chroma, says so, and `brain mirror rebuild` repairs it.

The damage is real: bytes of the file overwritten or cut, as a failing disk or a copy stopped half-way
leaves them. Each kind is checked first against SQLite itself (a fresh connection must refuse the file),
so a test never passes because the damage happened to miss.
"""

from __future__ import annotations

import json
import logging
import random
import sqlite3
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

import brain.store.facade
import brain.wiring
from brain.app.core import open_store
from brain.app.rag_store import RagStore
from brain.app.restore import rebuild_mirror, recover_store
from brain.config import Settings
from brain.features.mirror import EngramMirror, MirrorCorrupt, verify_mirror
from brain.model.errors import BrainError
from brain.shells.cli import cli
from tests.conftest import NOBODY, LiveServer

KINDS = ("half", "header", "middle", "tail")


def pages_of(path: Path, *tables: str) -> tuple[list[int], int]:
    with sqlite3.connect(path) as raw:
        size = raw.execute("PRAGMA page_size").fetchone()[0]
        pages = [p for (p,) in raw.execute(
            f"SELECT pageno FROM dbstat WHERE name IN ({','.join('?' * len(tables))}) ORDER BY pageno", tables)]
    return pages, size


def overwrite(path: Path, pages: list[int], size: int) -> None:
    noise = random.Random(7)
    with open(path, "r+b") as f:
        for page in pages:
            f.seek((page - 1) * size)
            f.write(bytes(noise.randrange(256) for _ in range(size)))


def damage(path: Path, kind: str) -> bytes:
    """Damage the (closed, checkpointed) mirror file; returns its damaged bytes."""
    assert not Path(f"{path}-wal").exists()
    data = path.read_bytes()
    if kind == "half":
        path.write_bytes(data[: len(data) // 2])
    elif kind == "header":
        path.write_bytes(b"not a database, just bytes".ljust(100, b"\0") + data[100:])
    elif kind == "middle":
        pages, size = pages_of(path, "memories", "sqlite_autoindex_memories_1")
        overwrite(path, pages[len(pages) // 2 :][:2], size)
    else:  # the last two pages of the file
        pages, size = pages_of(path, *_all_tables(path))
        overwrite(path, sorted(pages)[-2:], size)
    with pytest.raises(sqlite3.DatabaseError):  # SQLite itself refuses the file now
        with sqlite3.connect(path) as raw:
            problems = raw.execute("PRAGMA quick_check").fetchall()
            if problems != [("ok",)]:
                raise sqlite3.DatabaseError(str(problems))
    return path.read_bytes()


def _all_tables(path: Path) -> list[str]:
    with sqlite3.connect(path) as raw:
        return [n for (n,) in raw.execute("SELECT DISTINCT name FROM dbstat")]


@pytest.fixture
def cli_env(monkeypatch, local_embedder, tmp_path):
    monkeypatch.setenv("BRAIN_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setattr(brain.store.facade, "get_embedder", lambda settings: local_embedder, raising=False)
    monkeypatch.setattr(brain.wiring, "get_embedder", lambda settings: local_embedder, raising=False)
    return Settings(data_dir=tmp_path / "data")


def run(*args: str):
    return CliRunner().invoke(cli, list(args))


def seed(settings: Settings, embedder) -> dict[str, tuple]:
    with open_store(settings, embedder=embedder) as store:
        # one write of the 30 facts (the file's pages are what the damage needs, not 30 transactions)
        store.upsert_docs([{"type": "memory", "text": f"Fact {i}: Alice keeps jar number {i} on the shelf",
                            "importance": 1 + i % 5} for i in range(30)])
        store.upsert_memory("Bob is allergic to peanuts", importance=5, scope="entity:bob")
        store.upsert_turn("conv-1", "Where is jar 7?", "On the shelf.")
        return chroma_documents(store)


def chroma_documents(store: RagStore) -> dict[str, tuple]:
    return {d.id: (d.text, d.metadata) for t in ("memory", "turn") for d in store.get(type=t)}


@pytest.mark.parametrize("kind", KINDS)
def test_a_damaged_mirror_is_worked_around_then_rebuilt_from_chroma(kind, cli_env, local_embedder, caplog):
    settings = cli_env
    before = seed(settings, local_embedder)
    damaged = damage(settings.mirror_file, kind)

    # read-only commands work, from Chroma
    with caplog.at_level(logging.WARNING):
        stats = run("--json", "stats")
    assert stats.exit_code == 0, stats.stderr
    assert json.loads(stats.stdout)["documents"] == len(before)
    assert "is damaged" in caplog.text and "brain mirror rebuild" in caplog.text
    listed = run("--json", "memory", "list")
    assert listed.exit_code == 0 and len(json.loads(listed.stdout)) == 31
    found = run("--json", "search", "who is allergic to peanuts?", "--type", "memory", "--entity", "bob")
    assert found.exit_code == 0 and "peanuts" in json.loads(found.stdout)["results"][0]["text"]
    # what needs the mirror fails with the fix named, never a traceback
    for args in (("mirror", "verify"), ("mirror", "recall", "jar", "--keyword"), ("mirror", "sync")):
        failed = run(*args)
        assert failed.exit_code == 1 and failed.stderr.startswith("error: the mirror")
        assert "is damaged" in failed.stderr and "`brain mirror rebuild`" in failed.stderr
        assert "Traceback" not in failed.stderr
    # a write goes to Chroma and says what was not mirrored
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        added = run("--json", "memory", "add", "Carol waters the plants on Mondays")
    assert added.exit_code == 0, added.stderr
    assert "1 documents written in Chroma only" in caplog.text and "brain mirror rebuild" in caplog.text
    new_id = json.loads(added.stdout)["id"]

    rebuilt = run("--json", "mirror", "rebuild")
    assert rebuilt.exit_code == 0, rebuilt.stderr
    report = json.loads(rebuilt.stdout)
    assert report["written"] == len(before) + 1 and report["sync"]["deleted"] == 0
    aside = Path(report["moved_aside"][0])
    assert aside.parent == settings.mirror_file.parent and aside.name.startswith("mirror.broken-")
    assert aside.read_bytes() == damaged  # kept as it was
    assert run("mirror", "verify").exit_code == 0
    keyword = json.loads(run("--json", "mirror", "recall", "plants", "--keyword").stdout)["results"]
    assert [h["id"] for h in keyword] == [new_id]
    with open_store(settings, embedder=local_embedder) as store:  # nothing in Chroma was lost
        after = chroma_documents(store)
        assert store.mirror_health.status == "ok"
        assert store.mirror.integrity_check() == "ok"
    assert {k: v for k, v in after.items() if k != new_id} == before


@pytest.mark.parametrize("kind", ("header", "middle"))
def test_health_reports_a_damaged_mirror_and_the_api_keeps_working(kind, tmp_path, local_embedder):
    settings = Settings(data_dir=tmp_path / "data", ollama_host=NOBODY, summary_retries=0, summary_backoff_seconds=0,
                        summarizer="extractive")  # a summariser that is always there: health is the mirror's
    seed(settings, local_embedder)
    damage(settings.mirror_file, kind)
    with open_store(settings, embedder=local_embedder) as store:
        from brain.shells.api import create_app

        with LiveServer(create_app(settings, store=store)) as server, \
                httpx.Client(base_url=server.url, timeout=30) as http:
            health = http.get("/v1/health")
            assert health.status_code == 200
            body = health.json()
            assert body["status"] == "degraded" and body["store"]["ok"] is True
            mirror = body["mirror"]
            assert mirror["status"] == "broken" and mirror["ok"] is False
            assert mirror["fix"] == "brain mirror rebuild" and mirror["unmirrored"] == 0 and mirror["error"]
            created = http.post("/v1/memories", json={"text": "Dana sings in a choir", "importance": 4})
            assert created.status_code == 201
            found = http.get("/v1/memories/search", params={"q": "who sings?"}).json()["results"]
            assert found[0]["text"] == "Dana sings in a choir"
            assert http.delete(f"/v1/memories/{created.json()['id']}").status_code == 200
            assert http.get("/v1/health").json()["mirror"]["unmirrored"] == 2  # one write, one delete

            report = rebuild_mirror(store)
            assert report.sync.added == 33  # 31 memories, 2 turns
            healed = http.get("/v1/health", params={"verify": "true"}).json()
            assert healed["status"] == "ok"
            verified = healed["mirror"].pop("verify")  # the admin's detail: the verify summary
            assert healed["mirror"] == {"status": "ok", "ok": True, "path": str(settings.mirror_file)}
            assert verified["ok"] is True and verified["checked"] == 33
        assert verify_mirror(store, store.mirror).ok


def corrupt_while_open(path: Path) -> None:
    """Damage the pages of ``memories`` under an open connection, then let another process commit
    elsewhere in the file (as engram logging an access would): the open connection drops its page
    cache and meets the damage on its next read."""
    pages, size = pages_of(path, "memories", "sqlite_autoindex_memories_1")
    overwrite(path, pages, size)
    with sqlite3.connect(path) as other:
        other.execute("INSERT OR REPLACE INTO engram_meta (key, value) VALUES ('touched', 'yes')")


def test_damage_found_by_a_write_switches_the_mirror_off_and_the_write_succeeds(tmp_path, local_embedder, caplog):
    settings = Settings(data_dir=tmp_path / "data")
    seed(settings, local_embedder)
    with open_store(settings, embedder=local_embedder) as store:
        assert store.mirror_health.status == "ok"
        corrupt_while_open(settings.mirror_file)
        with caplog.at_level(logging.WARNING):
            doc_id = store.upsert_memory("Erin restores old bicycles")
        assert store.get_one(doc_id).text == "Erin restores old bicycles"
        assert store.mirror is None
        health = store.mirror_health.to_dict()
        assert health["status"] == "broken" and "malformed" in health["error"] and health["unmirrored"] == 1
        assert "brain mirror rebuild" in caplog.text
        store.upsert_turn("conv-2", "hi", "hello")
        assert store.delete(doc_id) == 1
        assert store.mirror_health.unmirrored == 4  # two turns, one delete
        rebuild_mirror(store)
        assert store.mirror_health.status == "ok" and verify_mirror(store, store.mirror).ok
        assert store.count("turn") == 4 and store.count("memory") == 31


def test_damage_found_by_a_read_is_a_named_error(tmp_path, local_embedder, cli_env):
    settings = cli_env
    seed(settings, local_embedder)
    with EngramMirror(settings.mirror_file, local_embedder.name) as mirror:
        corrupt_while_open(settings.mirror_file)
        with pytest.raises(MirrorCorrupt, match="brain mirror rebuild") as caught:
            mirror.keyword_recall("jar", 5)
        assert caught.value.path == settings.mirror_file and "malformed" in caught.value.detail
        with pytest.raises(MirrorCorrupt):
            mirror.upsert([{"id": "x", "text": "x",
                            "metadata": {"type": "memory", "timestamp": "2026-01-01T00:00:00+00:00"}}])
    result = run("mirror", "recall", "jar", "--keyword")  # the damage is now found at open
    assert result.exit_code == 1 and "brain mirror rebuild" in result.stderr and "Traceback" not in result.stderr


def test_restore_from_a_damaged_mirror_says_it_cannot(tmp_path, local_embedder):
    settings = Settings(data_dir=tmp_path / "data")
    seed(settings, local_embedder)
    damage(settings.mirror_file, "middle")
    lost = settings.model_copy(update={"data_dir": tmp_path / "new", "mirror_path": settings.mirror_file})
    with open_store(lost, embedder=local_embedder) as store:
        with pytest.raises(BrainError, match="cannot restore from the mirror .* it is damaged") as caught:
            recover_store(store)
        assert "copy of the mirror file" in str(caught.value)
        # rebuilding would leave an empty mirror: refused unless forced, and the old file is kept anyway
        with pytest.raises(BrainError, match="restore --from-mirror"):
            rebuild_mirror(store)
        assert rebuild_mirror(store, force=True).moved_aside


def test_rebuild_keeps_the_rows_engram_wrote_itself(tmp_path, local_embedder, monkeypatch):
    from engram import Memory

    for key in ("ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_API_KEY", "ENGRAM_EXTRACTOR_MODEL"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("HOME", "/nonexistent-home-for-engram")
    settings = Settings(data_dir=tmp_path / "data")
    seed(settings, local_embedder)
    engram = Memory(str(settings.mirror_file))
    engram.set_extractor(None)
    own = engram.add("Engram noted that the boiler was serviced in March", type="episodic", extract=False)
    engram.close()
    with open_store(settings, embedder=local_embedder) as store:
        report = rebuild_mirror(store)
        assert report.foreign_copied == 1 and report.foreign_error is None
        assert store.mirror.ids(foreign=True) == {own}
        assert [h.id for h in store.mirror.keyword_recall("boiler", 3)] == [own]
        assert verify_mirror(store, store.mirror).ok


def test_rebuild_reports_rows_it_could_not_read_from_the_old_file(cli_env, local_embedder):
    settings = cli_env
    seed(settings, local_embedder)
    damage(settings.mirror_file, "header")
    result = run("mirror", "rebuild")
    assert result.exit_code == 0, result.stderr
    assert "the old file is kept as" in result.stdout
    assert "could not be read from the old file (file is not a database)" in result.stdout
