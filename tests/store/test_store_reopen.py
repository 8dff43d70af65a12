"""An embedded store closed and opened again in one process reads what another process wrote meanwhile
(chromadb keeps one copy of an embedded store per path and process, which a closed store must let go)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from brain.app.rag_store import RagStore

ROOT = Path(__file__).resolve().parents[2]

OTHER_PROCESS = """
from brain.app.rag_store import RagStore
with RagStore() as store:
    ids = store.upsert_docs([{"type": "memory", "text": f"other fact {n}"} for n in range(300)])
    store.delete(ids[::2])
"""


@pytest.mark.subprocess
def test_a_store_opened_again_reads_another_process_s_writes(tmp_path, monkeypatch):
    monkeypatch.setenv("BRAIN_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("BRAIN_MIRROR_ENABLED", "false")
    with RagStore() as store:
        store.upsert_docs([{"type": "memory", "text": f"fact {n}"} for n in range(50)])
        assert len(store.get(include_embeddings=True)) == 50

    subprocess.run([sys.executable, "-c", OTHER_PROCESS], check=True, cwd=tmp_path, timeout=300,
                   env={**os.environ, "PYTHONPATH": str(ROOT)})

    with RagStore() as store:
        docs = store.get(include_embeddings=True)
        assert len(docs) == 200 and all(d.embedding is not None for d in docs)
        assert [h.text for h in store.retrieve_memories("other fact 7", k=1, relevance=False)] == ["other fact 7"]
