"""`brain mirror ...`, `brain restore --from-mirror`, `brain export/import` and `brain consolidate`."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

import brain.store.facade
import brain.wiring
from brain.app.core import open_store
from brain.config import Settings
from brain.shells.cli import cli


@pytest.fixture(autouse=True)
def _cli_env(monkeypatch, local_embedder, tmp_path):
    monkeypatch.setenv("BRAIN_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setattr(brain.store.facade, "get_embedder", lambda settings: local_embedder, raising=False)
    monkeypatch.setattr(brain.wiring, "get_embedder", lambda settings: local_embedder, raising=False)


def run(*args: str, env: dict[str, str] | None = None):
    return CliRunner().invoke(cli, list(args), env=env)


def run_json(*args: str, env: dict[str, str] | None = None):
    result = run("--json", *args, env=env)
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def seed(tmp_path, local_embedder) -> list[str]:
    with open_store(Settings(data_dir=tmp_path / "data"), embedder=local_embedder) as store:
        return [
            store.upsert_memory("Alice drinks green tea every morning", importance=4, tags=["drinks"]),
            store.upsert_memory("Bob is allergic to hazelnuts", importance=5, scope="entity:bob"),
            store.upsert_memory("Alice drinks green tea each morning", importance=2, tags=["morning"]),
        ]


def test_mirror_verify_sync_and_recall(tmp_path, local_embedder):
    ids = seed(tmp_path, local_embedder)
    assert run_json("mirror", "verify")["ok"] is True
    # a store written with the mirror off is behind: verify fails (exit 1), sync repairs it
    with open_store(Settings(data_dir=tmp_path / "data"), embedder=local_embedder, mirror=False) as store:
        late = store.upsert_memory("Carol moved to Lisbon")
    behind = run("mirror", "verify")
    assert behind.exit_code == 1 and "1 missing" in behind.stdout and late in behind.stdout
    assert run_json("mirror", "sync")["added"] == 1
    assert run_json("mirror", "sync")["changed"] == 0
    assert run("mirror", "verify").exit_code == 0
    hits = run_json("mirror", "recall", "where does Carol live now?", "--k", "2")["results"]
    assert hits[0]["id"] == late
    keyword = run_json("mirror", "recall", "hazelnuts", "--keyword")["results"]
    assert [h["id"] for h in keyword] == [ids[1]]


def test_restore_from_mirror_into_a_new_data_dir(tmp_path, local_embedder):
    ids = seed(tmp_path, local_embedder)
    env = {"BRAIN_DATA_DIR": str(tmp_path / "rebuilt"), "BRAIN_MIRROR_PATH": str(tmp_path / "data" / "mirror.db")}
    report = run_json("restore", "--from-mirror", env=env)
    assert report["restored"] == 3 and report["reused_vectors"] == 3 and report["embedded"] == 0
    listed = run_json("memory", "list", env=env)
    assert sorted(d["id"] for d in listed) == sorted(ids)


def test_restore_needs_from_mirror():
    result = run("restore")
    assert result.exit_code == 2


def test_export_then_import_elsewhere(tmp_path, local_embedder):
    ids = seed(tmp_path, local_embedder)
    out = tmp_path / "pam"
    exported = run_json("export", "--format", "pam", str(out))
    assert exported["memories"] == 3 and (out / "memory-store.json").exists() and (out / "embeddings.json").exists()
    bare = run_json("export", str(tmp_path / "bare"), "--no-embeddings")
    assert bare["embeddings"] is None and not (tmp_path / "bare" / "embeddings.json").exists()
    no_conv = run_json("export", str(tmp_path / "noconv"), "--no-conversations")
    assert no_conv["conversations"] == 0 and not (tmp_path / "noconv" / "conversations").exists()
    env = {"BRAIN_DATA_DIR": str(tmp_path / "other")}
    first = run_json("import", str(out), env=env)
    assert first["new"] == 3 and first["vectors_reused"] == 3 and first["vectors_embedded"] == 0
    assert run_json("import", str(out), env=env)["written"] == 0
    assert sorted(d["id"] for d in run_json("memory", "list", env=env)) == sorted(ids)


def test_import_of_a_bad_file_names_the_json_path_and_writes_nothing(tmp_path, local_embedder):
    seed(tmp_path, local_embedder)
    out = tmp_path / "pam"
    run_json("export", str(out))
    document = json.loads((out / "memory-store.json").read_text())
    document["memories"][1]["tags"] = ["Not A Tag!"]
    (out / "memory-store.json").write_text(json.dumps(document))
    env = {"BRAIN_DATA_DIR": str(tmp_path / "other")}
    result = run("import", str(out), env=env)
    assert result.exit_code == 1
    assert "memories[1].tags[0]" in result.stderr
    assert run_json("memory", "list", env=env) == []


def test_consolidate_dry_run_then_merge(tmp_path, local_embedder):
    ids = seed(tmp_path, local_embedder)
    dry = run_json("consolidate", "--dry-run", "--threshold", "0.9")
    assert dry["dry_run"] is True and dry["removed"] == 1
    [merge] = dry["merges"]
    assert {merge["kept_id"], *merge["merged_ids"]} == {ids[0], ids[2]}
    assert len(run_json("memory", "list")) == 3  # nothing changed
    done = run_json("consolidate", "--threshold", "0.9")
    assert done["removed"] == 1
    left = run_json("memory", "list")
    assert len(left) == 2
    kept = next(d for d in left if d["id"] == merge["kept_id"])
    assert kept["metadata"]["importance"] == 4 and set(kept["metadata"]["tags"]) == {"drinks", "morning"}
    # the other entity's memory is never merged into a global one
    assert any(d["metadata"]["scope"] == "entity:bob" for d in left)
    assert run("mirror", "verify").exit_code == 0  # consolidation went through the mirror too


# ---- specialists ---------------------------------------------------------------------------------

@pytest.mark.slow
def test_specialists_list_and_find(monkeypatch):
    from tests.conftest import ROOT

    monkeypatch.setenv("BRAIN_SPECIALISTS_PATH", str(ROOT / "config" / "specialists.yaml"))
    listed = run_json("specialists", "list")
    assert {"web_search", "ocr", "vision", "docs"} <= {s["id"] for s in listed}
    found = run_json("specialists", "find", "read the text in this photo", "--k", "2")["results"]
    assert found[0]["id"] == "ocr" and len(found) == 2
    text = run("specialists", "find", "look this up online")
    assert text.exit_code == 0 and text.stdout.splitlines()[1].split()[3] == "web_search"  # under the header


def test_specialists_with_a_missing_file_is_one_error_line(monkeypatch, tmp_path):
    monkeypatch.setenv("BRAIN_SPECIALISTS_PATH", str(tmp_path / "nope.yaml"))
    result = run("specialists", "list")
    assert result.exit_code == 1 and "nope.yaml" in result.stderr
