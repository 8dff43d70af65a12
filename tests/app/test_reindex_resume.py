"""A re-index resumed after kill -9 leaves the mirror with every new vector, and ``brain reindex --rollback``
works with a specialists file, whatever BRAIN_EMBEDDER says.

The new model is Ollama's nomic-embed-text served by tests/ollama_stub.py (as in tests/app/test_reindex.py).
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from brain.app.core import open_store
from brain.config import Settings
from brain.features.specialists import SpecialistRegistry
from tests.app.test_reindex import LOCAL, NOMIC, SPECIALISTS_YAML, _cli, fill, ollama  # noqa: F401 (a fixture)

# runs in the killed process: a re-index in batches of 2, killed after Chroma took its second batch and
# before the mirror got that batch's new vectors
KILLED_REINDEX = r"""
import os, signal, sys
from brain.app import reindex
from brain.config import Settings
from brain.features.mirror import EngramMirror

calls = [0]
real = EngramMirror.upsert_embeddings

def upsert_embeddings(self, *args, **kwargs):
    calls[0] += 1
    if calls[0] == 2:
        os.kill(os.getpid(), signal.SIGKILL)
    return real(self, *args, **kwargs)

EngramMirror.upsert_embeddings = upsert_embeddings
settings = Settings()
store = reindex.open_live_store(settings)
reindex.run(store, reindex.embedder_named(settings, sys.argv[1]), batch=2, progress=False)
print("finished")
"""


def _env(settings: Settings) -> dict[str, str]:
    import os

    from tests.conftest import ROOT

    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "BRAIN_DATA_DIR": str(settings.data_dir),
        "OLLAMA_HOST": settings.ollama_host,
    }
    if settings.chroma_url:
        env.update(BRAIN_CHROMA_URL=settings.chroma_url, BRAIN_COLLECTION=settings.collection)
    return env


@pytest.mark.subprocess
@pytest.mark.slow
def test_a_reindex_resumed_after_kill_9_leaves_no_mirror_vector_missing(
    backend_settings, local_embedder, ollama, tmp_path
):
    settings = backend_settings.model_copy(update={"ollama_host": ollama.url})
    with open_store(settings, embedder=local_embedder) as store:
        fill(store)
        mirrored = sorted(store.mirror.ids(foreign=False))
    killed = subprocess.run(
        [sys.executable, "-c", KILLED_REINDEX, NOMIC],
        cwd=tmp_path,
        env=_env(settings),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert killed.returncode == -9, killed.stderr
    resumed = _cli(settings, "--embedder", NOMIC, "--batch", "2")
    _, err = resumed.communicate(timeout=300)
    assert resumed.returncode == 0, err
    with open_store(settings.model_copy(update={"embedder": NOMIC})) as store:
        assert store.collection_name.endswith("__g2")
        vectors = store.mirror.vectors_of(mirrored, NOMIC)
        assert sorted(vectors) == mirrored  # every mirrored document has its new vector
        stored = {d.id: d.embedding for d in store.get(mirrored, include_embeddings=True)}
        for doc_id, (_, vector) in vectors.items():
            np.testing.assert_allclose(vector, stored[doc_id], atol=1e-6)


@pytest.mark.subprocess
def test_rollback_with_a_specialists_file_whatever_brain_embedder_says(settings, local_embedder, ollama, tmp_path):
    (tmp_path / "specialists.yaml").write_text(SPECIALISTS_YAML, encoding="utf-8")
    settings = settings.model_copy(
        update={"ollama_host": ollama.url, "specialists_path": tmp_path / "specialists.yaml"}
    )
    with open_store(settings, embedder=local_embedder) as store:
        fill(store)
        SpecialistRegistry.from_settings(store).register()
    specialists = {"BRAIN_SPECIALISTS_PATH": str(settings.specialists_path)}
    for embedder in (LOCAL, NOMIC):
        forward = _cli(settings, "--embedder", NOMIC, env_extra=specialists)
        _, err = forward.communicate(timeout=300)
        assert forward.returncode == 0, err
        back = _cli(settings, "--rollback", env_extra={**specialists, "BRAIN_EMBEDDER": embedder})
        out, err = back.communicate(timeout=300)
        assert back.returncode == 0, (embedder, err)
    with open_store(settings, embedder=local_embedder) as store:
        assert store.collection_name == settings.collection and store.embedder.name == LOCAL
        registry = SpecialistRegistry.from_settings(store)
        assert registry.embedder.name == LOCAL
        assert registry.find_specialists("will it rain in Leeds tomorrow", k=1)[0].id == "weather"
