"""brain.shells.xaibo against Xaibo's real protocol classes, a real store and a real Xaibo exchange."""

from __future__ import annotations

import asyncio
import inspect
import json
from pathlib import Path

import numpy as np
import pytest
import yaml

xaibo_memory = pytest.importorskip("xaibo.core.protocols.memory")

from xaibo.core.config import AgentConfig, ConfigOverrides
from xaibo.core.exchange import Exchange
from xaibo.core.models import EventType
from xaibo.core.xaibo import Xaibo
from xaibo.primitives.modules.memory import MemoryToolProvider, VectorMemory

from brain import Brain
from brain.app.core import open_store
from brain.app.rag_store import RagStore
from brain.config import Settings
from brain.features.pam import MEMORY_STORE_FILE, export_pam
from brain.integrations import xaibo as protocols
from brain.model.errors import BrainError, ConfigError, EmbedderError, ValidationError
from brain.rules.chunking import TokenChunker
from brain.shells.xaibo import (
    BrainChunker,
    BrainEmbedder,
    BrainMemory,
    BrainVectorIndex,
    UnsupportedModality,
)

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE_YAML = ROOT / "config" / "xaibo" / "agent.yaml"

PAIRS = [
    (BrainChunker, xaibo_memory.ChunkingProtocol),
    (BrainEmbedder, xaibo_memory.EmbeddingProtocol),
    (BrainVectorIndex, xaibo_memory.VectorIndexProtocol),
    (BrainMemory, xaibo_memory.MemoryProtocol),
]

FACTS = [
    "Alice is vegetarian and loves Thai curries",
    "Bob's flight to Lisbon leaves on Friday at 7 am",
    "The office wifi password is walrus-42",
    "Carol plays the cello in a string quartet",
]


def run(coro):
    return asyncio.run(coro)


def long_text(secret: str = "The vault combination is 31-17-08.") -> str:
    """About 1,000 tokens of garden notes with ``secret`` at the end: several chunks, the secret in the last."""
    body = " ".join(
        f"Note {n}: the {['roses', 'tulips', 'ferns', 'hedges'][n % 4]} in bed {n} were watered and pruned."
        for n in range(70)
    )
    return f"{body} {secret}"


@pytest.fixture(autouse=True)
def _close_shared():
    yield
    protocols.close_shared_stores()


@pytest.fixture
def memory(embedded_store):
    return BrainMemory(store=embedded_store)


def memory_docs(store: RagStore, memory_id: str):
    """Every document of one memory: its head and its chunks, any revision."""
    by_key = store.get(where={protocols.PART_OF_KEY: memory_id}, type="memory")
    head = [d for d in store.get([memory_id], type="memory") if d.id not in {x.id for x in by_key}]
    return by_key + head


def cos(a, b) -> float:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))


# ---- the protocols themselves -------------------------------------------------------------------------
@pytest.mark.parametrize("cls,proto", PAIRS, ids=lambda x: getattr(x, "__name__", ""))
def test_each_class_is_the_xaibo_protocol(cls, proto, embedded_store, local_embedder):
    instance = {
        BrainChunker: lambda: BrainChunker(settings=embedded_store.settings),
        BrainEmbedder: lambda: BrainEmbedder(embedder=local_embedder),
        BrainVectorIndex: lambda: BrainVectorIndex(store=embedded_store),
        BrainMemory: lambda: BrainMemory(store=embedded_store),
    }[cls]()
    assert issubclass(cls, proto)
    assert isinstance(instance, proto)
    assert not any(isinstance(instance, other) for c, other in PAIRS if other is not proto)


@pytest.mark.parametrize("cls,proto", PAIRS, ids=lambda x: getattr(x, "__name__", ""))
def test_methods_are_async_with_xaibos_signatures(cls, proto):
    names = [n for n, v in vars(proto).items() if inspect.isfunction(v) and not n.startswith("_")]
    assert names
    for name in names:
        ours, theirs = getattr(cls, name), getattr(proto, name)
        assert inspect.iscoroutinefunction(ours), f"{cls.__name__}.{name} must be async def"
        assert inspect.signature(ours) == inspect.signature(theirs), f"{cls.__name__}.{name}"


@pytest.mark.parametrize("cls", [c for c, _ in PAIRS])
def test_init_follows_xaibos_wiring_rules(cls):
    # Xaibo injects every annotated __init__ parameter except config, by the annotation's __name__
    assert set(cls.__init__.__annotations__) == {"config"}
    assert not isinstance(cls.__init__.__annotations__["config"], str), "annotations must be evaluated"
    config = AgentConfig.from_yaml(f"id: t\nmodules:\n  - module: brain.shells.xaibo.{cls.__name__}\n    id: m\n")
    module = next(m for m in config.modules if m.id == "m")
    assert module.provides == [dict(PAIRS)[cls].__name__]
    assert not module.uses


# ---- ChunkingProtocol -----------------------------------------------------------------------------------
def test_chunker_is_brains_token_window_chunker(settings):
    text = long_text()
    default = BrainChunker(settings=settings)
    assert (default.window_size, default.window_overlap) == (settings.chunk_window, settings.chunk_overlap)
    assert run(default.chunk(text)) == TokenChunker(settings.chunk_window, settings.chunk_overlap).chunk(text)
    small = BrainChunker({"window_size": 64, "window_overlap": 8, "data_dir": str(settings.data_dir)})
    chunks = run(small.chunk(text))
    assert chunks == TokenChunker(64, 8).chunk(text)
    assert len(chunks) > len(run(default.chunk(text))) > 1
    assert all(small.chunker.count_tokens(c) <= 64 for c in chunks)
    assert run(small.chunk("short")) == ["short"] and run(small.chunk("  ")) == []


def test_chunker_config_errors_name_the_key():
    with pytest.raises(ConfigError, match="window_size=300"):
        BrainChunker({"window_size": 300})  # beyond MiniLM's 254 content tokens
    with pytest.raises(ConfigError, match="window_siz\\b"):
        BrainChunker({"window_siz": 100})


# ---- EmbeddingProtocol ----------------------------------------------------------------------------------
def test_embedder_embeds_text_with_the_configured_embedder(local_embedder):
    embedder = BrainEmbedder(embedder=local_embedder)
    vec = run(embedder.text_to_embedding("read the text in this photo"))
    assert isinstance(vec, np.ndarray) and vec.shape == (local_embedder.dimension,)
    np.testing.assert_allclose(vec, local_embedder.embed_documents(["read the text in this photo"])[0])
    assert abs(np.linalg.norm(vec) - 1) < 1e-5
    query_side = BrainEmbedder({"kind": "query"}, embedder=local_embedder)
    np.testing.assert_allclose(run(query_side.text_to_embedding("hello")), local_embedder.embed_query("hello"))
    with pytest.raises(ValidationError):
        run(embedder.text_to_embedding("   "))
    with pytest.raises(ConfigError, match="kind"):
        BrainEmbedder({"kind": "image"}, embedder=local_embedder)


def test_embedder_from_config_uses_settings(tmp_path):
    embedder = BrainEmbedder({"embedder": "local/minilm-l6-v2"})
    assert embedder.embedder.name == "local/minilm-l6-v2"
    with pytest.raises(ConfigError, match="BRAIN_EMBEDDER"):
        BrainEmbedder({"embedder": "nonsense"})


@pytest.mark.parametrize("method,modality", [("image_to_embedding", "image"), ("audio_to_embedding", "audio")])
def test_other_modalities_raise_a_named_error(local_embedder, method, modality):
    embedder = BrainEmbedder(embedder=local_embedder)
    with pytest.raises(UnsupportedModality) as info:
        run(getattr(embedder, method)(b"\x89PNG..."))
    assert isinstance(info.value, EmbedderError) and isinstance(info.value, BrainError)
    assert modality in str(info.value) and local_embedder.name in str(info.value)


# ---- VectorIndexProtocol --------------------------------------------------------------------------------
def test_vector_index_adds_and_searches_in_the_collection(embedded_store, local_embedder):
    index = BrainVectorIndex(store=embedded_store)
    vectors = local_embedder.embed_documents(FACTS)
    attrs = [{"chunk_text": t, "n": i, "nested": {"k": [i, {"deep": None}]}, "empty": []} for i, t in enumerate(FACTS)]
    run(index.add_vectors(list(vectors), attrs))
    rows = embedded_store.get(type="memory", where={protocols.INDEX_KEY: "default"})
    assert sorted(r.text for r in rows) == sorted(FACTS)  # memory documents of the one collection
    assert embedded_store.settings.collection == "conversations"

    results = run(index.search(local_embedder.embed_query("what is the wifi password?"), k=2))
    assert isinstance(results[0], xaibo_memory.VectorSearchResult) and len(results) == 2
    assert results[0].attributes == attrs[2]  # nested values restored, not JSON strings
    exact = run(index.search(vectors[1], k=1))[0]
    assert exact.attributes["n"] == 1 and exact.similarity_score == pytest.approx(1.0, abs=1e-5)
    opposite = run(index.search(-vectors[1], k=4))
    assert all(0.0 <= r.similarity_score <= 1.0 for r in opposite)
    assert opposite[-1].similarity_score == 0.0  # cosine -1 floored at 0


def test_vector_index_returns_only_its_own_rows(embedded_store, local_embedder):
    run(BrainMemory(store=embedded_store).store_memory(FACTS[2]))
    embedded_store.upsert_memory(FACTS[2] + " (kept by the assistant)")
    other = BrainVectorIndex({"index": "other"}, store=embedded_store)
    run(other.add_vectors([local_embedder.embed_documents([FACTS[2]])[0]], [{"text": FACTS[2]}]))
    mine = BrainVectorIndex(store=embedded_store)
    run(mine.add_vectors([local_embedder.embed_documents([FACTS[0]])[0]]))
    found = run(mine.search(local_embedder.embed_query(FACTS[2]), k=10))
    assert len(found) == 1 and found[0].attributes == {}
    assert "no text attribute" in embedded_store.get_one(found[0].vector_id).text
    assert [r.attributes for r in run(other.search(local_embedder.embed_query(FACTS[2]), k=10))] == [{"text": FACTS[2]}]


@pytest.mark.parametrize(
    "bad,message",
    [
        (np.ones(10, dtype=np.float32), "10 dimensions"),
        (np.full(384, np.nan, dtype=np.float32), "NaN"),
        (np.zeros(384, dtype=np.float32), "all zeros"),
        (np.ones((2, 384), dtype=np.float32), "one-dimensional"),
    ],
)
def test_bad_vectors_are_refused_and_nothing_is_written(embedded_store, local_embedder, bad, message):
    index = BrainVectorIndex(store=embedded_store)
    good = local_embedder.embed_documents(["fine"])[0]
    before = embedded_store.count()
    with pytest.raises(ValidationError, match=message) as info:
        run(index.add_vectors([good, bad], [{"text": "fine"}, {"text": "bad"}]))
    assert "vector 1" in str(info.value) and "nothing was written" in str(info.value)
    assert embedded_store.count() == before
    with pytest.raises(ValidationError, match=message):
        run(index.search(bad, k=3))


def test_bad_vector_attributes_are_refused_and_nothing_is_written(embedded_store, local_embedder):
    index = BrainVectorIndex(store=embedded_store)
    vecs = list(local_embedder.embed_documents(["a", "b"]))
    with pytest.raises(ValidationError, match="'blob'.*bytes"):
        run(index.add_vectors(vecs, [{"text": "a"}, {"blob": b"\x00"}]))
    with pytest.raises(ValidationError, match="'x'.*JSON"):
        run(index.add_vectors(vecs, [{"x": float("nan")}, {}]))
    with pytest.raises(ValidationError, match="2 vectors but 1"):
        run(index.add_vectors(vecs, [{}]))
    with pytest.raises(ValidationError, match="between 1 and 1000"):
        run(index.search(vecs[0], k=0))
    assert embedded_store.count() == 0


def test_xaibos_own_vector_memory_runs_on_our_primitives(embedded_store, tmp_path):
    memory = VectorMemory(
        chunker=BrainChunker(settings=embedded_store.settings),
        embedder=BrainEmbedder(store=embedded_store),
        vector_index=BrainVectorIndex(store=embedded_store),
        config={"memory_file_path": str(tmp_path / "xaibo" / "memories.pkl")},
    )
    ids = {fact: run(memory.store_memory(fact, {"importance": 4})) for fact in FACTS}
    found = run(memory.search_memory("when does Bob fly?", k=2))
    assert found[0].memory_id == ids[FACTS[1]] and found[0].content == FACTS[1]
    rows = embedded_store.get(type="memory", where={protocols.INDEX_KEY: "default"})
    assert len(rows) == len(FACTS) and {r.metadata["importance"] for r in rows} == {4}


# ---- MemoryProtocol -------------------------------------------------------------------------------------
def test_store_get_list_search(store):
    memory = BrainMemory(store=store)
    attrs = {"source": "user said so", "importance": 5, "tags": ["food"], "nested": {"likes": ["tofu", 3, None]}}
    ids = [run(memory.store_memory(FACTS[0], attrs))] + [run(memory.store_memory(f)) for f in FACTS[1:]]
    assert len(set(ids)) == len(FACTS)

    got = run(memory.get_memory(ids[0]))
    assert got["id"] == ids[0] and got["content"] == FACTS[0]
    assert got["attributes"] == attrs  # nested values round-trip; importance and tags as given
    assert got["importance"] == 5 and got["tags"] == ["food"]
    stored = store.get_one(ids[0]).metadata
    assert stored["importance"] == 5 and stored["tags"] == ["food"] and stored["type"] == "memory"
    assert json.loads(stored["xaibo.json.nested"]) == attrs["nested"]
    assert run(memory.get_memory("doc-unknown")) is None

    listed = run(memory.list_memories())
    assert sorted(m["id"] for m in listed) == sorted(ids)

    results = run(memory.search_memory("what food does Alice like?", k=2))
    assert isinstance(results[0], xaibo_memory.MemorySearchResult)
    assert [r.memory_id for r in results][:1] == [ids[0]] and len(results) == 2
    assert results[0].content == FACTS[0] and results[0].attributes == attrs
    assert all(0.0 <= r.similarity_score <= 1.0 for r in results)
    query = store.embedder.embed_query("what food does Alice like?")
    assert results[0].similarity_score == pytest.approx(
        cos(query, store.embedder.embed_documents([FACTS[0]])[0]), abs=1e-4
    )
    assert len(run(memory.search_memory("anything"))) == len(FACTS)  # k defaults to 10


def test_same_text_is_one_memory_merged_like_the_store(memory, embedded_store):
    first = run(memory.store_memory("Dana is allergic to peanuts", {"importance": 4, "tags": ["health"], "by": "a"}))
    again = run(memory.store_memory("  dana IS allergic to  peanuts ", {"importance": 2, "tags": ["food"], "seen": 2}))
    assert again == first
    got = run(memory.get_memory(first))
    assert got["content"] == "Dana is allergic to peanuts"  # the first spelling stays, as in the store
    assert got["importance"] == 4 and got["tags"] == ["health", "food"]
    assert got["attributes"]["by"] == "a" and got["attributes"]["seen"] == 2
    # the assistant's own memory of that text is the same memory
    assert embedded_store.upsert_memory("Dana is allergic to peanuts") == first
    assert len(run(memory.list_memories())) == 1


def test_long_text_is_chunked_and_found_once(memory, embedded_store):
    text = long_text()
    chunks = memory.chunker.chunk(text)
    assert len(chunks) >= 3
    mid = run(memory.store_memory(text, {"tags": ["garden"]}))
    for fact in FACTS:
        run(memory.store_memory(fact))
    docs = memory_docs(embedded_store, mid)
    assert len(docs) == len(chunks)  # the head (whole text) and chunks 2..n
    assert sorted(d.text for d in docs if d.id != mid) == sorted(chunks[1:])
    assert all(d.metadata["tags"] == ["garden"] for d in docs)

    # the secret is only in the last chunk: the memory is found by it, once, with that chunk's similarity
    results = run(memory.search_memory("what is the vault combination?", k=3))
    assert results[0].memory_id == mid and results[0].content == text
    assert len({r.memory_id for r in results}) == len(results) == 3
    query = embedded_store.embedder.embed_query("what is the vault combination?")
    best = max(cos(query, v) for v in embedded_store.embedder.embed_documents([text, *chunks[1:]]))
    assert results[0].similarity_score == pytest.approx(best, abs=1e-4)
    assert [m["id"] for m in run(memory.list_memories())].count(mid) == 1


def test_update_leaves_no_stale_text(memory, embedded_store):
    old = long_text("The wifi password of the shed is walrus-42.")
    mid = run(memory.store_memory(old, {"importance": 4, "tags": ["garden"], "where": "shed"}))
    for fact in FACTS[:2]:
        run(memory.store_memory(fact))
    question = "what is the shed's wifi password?"
    assert run(memory.search_memory(question, k=1))[0].memory_id == mid

    assert run(memory.update_memory(mid, "The shed has a new blue door.")) is True
    assert run(memory.update_memory("doc-unknown", "x")) is False
    docs = memory_docs(embedded_store, mid)
    assert [d.id for d in docs] == [mid] and docs[0].text == "The shed has a new blue door."
    assert not any("walrus" in d.text for d in embedded_store.get(type="memory"))
    # its score is the new text's, with no stale chunk behind it
    query = embedded_store.embedder.embed_query(question)
    hit = next(r for r in run(memory.search_memory(question, k=5)) if r.memory_id == mid)
    new_vec = embedded_store.embedder.embed_documents(["The shed has a new blue door."])[0]
    assert hit.similarity_score == pytest.approx(max(0.0, cos(query, new_vec)), abs=1e-4)
    assert hit.content == "The shed has a new blue door."
    # the same for the store's own ranking and the mirror
    assert all("walrus" not in h.text for h in embedded_store.retrieve_memories(question, k=10, relevance=False))
    assert [d.text for d in embedded_store.mirror.get([mid])] == ["The shed has a new blue door."]
    # attributes were kept
    got = run(memory.get_memory(mid))
    assert got["attributes"] == {"importance": 4, "tags": ["garden"], "where": "shed"}


def test_update_merges_removes_and_replaces_attributes(memory, embedded_store):
    mid = run(
        memory.store_memory("Eve runs the Berlin office", {"tags": ["work"], "importance": 5, "team": {"size": 4}})
    )
    embedded_store.update_memory(mid, metadata={"created_at": "2026-01-01T00:00:00+00:00"})  # the assistant's key

    assert run(memory.update_memory(mid, "Eve runs the Berlin office", {"team": "platform", "since": 2021}))
    assert run(memory.get_memory(mid))["attributes"] == {
        "tags": ["work"],
        "importance": 5,
        "team": "platform",
        "since": 2021,
    }
    meta = embedded_store.get_one(mid).metadata
    assert "xaibo.json.team" not in meta and meta["xaibo.attr.team"] == "platform"  # no leftover of the old form

    assert run(memory.update_memory(mid, "Eve runs the Munich office", {"since": None, "tags": ["work", "travel"]}))
    got = run(memory.get_memory(mid))
    assert got["attributes"] == {"tags": ["work", "travel"], "importance": 5, "team": "platform"}
    assert got["content"] == "Eve runs the Munich office"

    assert run(memory.update_memory(mid, "Eve runs the Munich office", {"$replace": True, "team": "infra"}))
    got = run(memory.get_memory(mid))
    assert got["attributes"] == {"team": "infra"}
    assert got["importance"] == 3 and got["tags"] == []  # fields that came from attributes: back to defaults
    assert embedded_store.get_one(mid).metadata["created_at"] == "2026-01-01T00:00:00+00:00"  # not ours: kept
    with pytest.raises(ValidationError, match=r"\$replace"):
        run(memory.update_memory(mid, "x", {"$replace": "yes"}))


def test_update_of_a_long_memory_rechunks(memory, embedded_store):
    mid = run(memory.store_memory("A short note about tulips."))
    text = long_text()
    assert run(memory.update_memory(mid, text))
    docs = memory_docs(embedded_store, mid)
    assert len(docs) == len(memory.chunker.chunk(text)) > 1
    assert len({d.metadata[protocols.REVISION_KEY] for d in docs}) == 1
    assert run(memory.search_memory("vault combination", k=1))[0].memory_id == mid


def test_delete_removes_every_chunk(store):
    memory = BrainMemory(store=store)
    keep = run(memory.store_memory(FACTS[0]))
    before = store.count(type="memory")
    mid = run(memory.store_memory(long_text()))
    assert len(memory_docs(store, mid)) > 1
    assert run(memory.delete_memory(mid)) is True
    assert memory_docs(store, mid) == [] and store.count(type="memory") == before
    assert run(memory.get_memory(mid)) is None
    assert [r.memory_id for r in run(memory.search_memory("vault combination", k=5))] == [keep]
    assert all(h.id == keep for h in store.retrieve_memories("vault combination", k=5, relevance=False))
    if store.mirror is not None:
        assert store.mirror.ids() == {keep}
    assert run(memory.delete_memory(mid)) is False


def test_a_plain_memory_of_the_assistant_is_managed_too(memory, embedded_store):
    mid = embedded_store.upsert_memory("Frank drinks oat milk", importance=4, tags=["food"])
    got = run(memory.get_memory(mid))
    assert got["content"] == "Frank drinks oat milk" and got["attributes"] == {"importance": 4, "tags": ["food"]}
    assert run(memory.update_memory(mid, "Frank drinks soy milk", {"note": "changed"}))
    assert embedded_store.get_one(mid).text == "Frank drinks soy milk"
    assert run(memory.delete_memory(mid)) and embedded_store.count(type="memory") == 0


def test_an_interrupted_write_never_returns_a_stale_chunk(memory, embedded_store):
    mid = run(memory.store_memory("Grace keeps bees on the roof"))
    # what an update interrupted after its new chunks leaves behind: chunks of a revision the head never got
    orphan = {
        "text": "The vault combination is 31-17-08.",
        "type": "memory",
        "id": "doc-orphan-chunk",
        protocols.PART_OF_KEY: mid,
        protocols.REVISION_KEY: "not-the-heads",
    }
    embedded_store.upsert_docs([orphan])
    results = run(memory.search_memory("vault combination", k=5))
    assert [r.memory_id for r in results] == [mid]
    query = embedded_store.embedder.embed_query("vault combination")
    head_vec = embedded_store.embedder.embed_documents(["Grace keeps bees on the roof"])[0]
    assert results[0].similarity_score == pytest.approx(max(0.0, cos(query, head_vec)), abs=1e-4)
    assert all(m["id"] != "doc-orphan-chunk" for m in run(memory.list_memories()))
    run(memory.update_memory(mid, "Grace keeps bees in the garden"))  # the next write clears it
    assert [d.id for d in memory_docs(embedded_store, mid)] == [mid]


def test_memories_show_up_in_the_store_mirror_and_pam(memory, embedded_store, tmp_path):
    mid = run(memory.store_memory(FACTS[1], {"importance": 5, "tags": ["travel"], "trip": {"to": "Lisbon"}}))
    hits = embedded_store.retrieve_memories("when is Bob's flight?", k=1, relevance=False)
    assert hits[0].id == mid and hits[0].metadata["importance"] == 5
    mirrored = embedded_store.mirror.get([mid])
    assert mirrored[0].text == FACTS[1] and mirrored[0].metadata["tags"] == ["travel"]
    report = export_pam(embedded_store, tmp_path / "pam")
    exported = json.loads((tmp_path / "pam" / MEMORY_STORE_FILE).read_text())["memories"]
    assert report.memories == 1 and exported[0]["id"] == mid and exported[0]["content"] == FACTS[1]
    brain = exported[0]["metadata"]["brain"]
    assert brain["importance"] == 5 and json.loads(brain["extra"]["xaibo.json.trip"]) == {"to": "Lisbon"}


def test_parts_are_not_memories_of_their_own(memory, embedded_store, local_embedder, tmp_path):
    """Continuation chunks and vector-index rows are parts: the store's ranking and PAM see each memory once."""
    text = long_text()
    chunks = memory.chunker.chunk(text)
    mid = run(memory.store_memory(text, {"tags": ["garden"]}))
    for fact in FACTS:
        run(memory.store_memory(fact))
    secret = "The vault combination is 31-17-08."
    index = BrainVectorIndex(store=embedded_store)
    run(index.add_vectors(list(local_embedder.embed_documents([secret, FACTS[0]])), [{"chunk_text": secret}, {}]))
    part_ids = {d.id for d in memory_docs(embedded_store, mid) if d.id != mid}
    part_ids |= {d.id for d in embedded_store.get(type="memory", where={protocols.INDEX_KEY: "default"})}
    assert len(part_ids) == len(chunks) - 1 + 2

    hits = embedded_store.retrieve_memories("what is the vault combination?", k=20, relevance=False)
    assert sorted(h.id for h in hits) == sorted([mid, *(protocols.derived_memory_id(f, "global") for f in FACTS)])
    assert [h.text for h in hits if h.id == mid] == [text]  # the whole text, once
    assert embedded_store.retrieve_memories("garden", k=20, tags=["garden"], relevance=False)[0].id == mid
    # operators' all_scopes view still sees every row; the Xaibo modules still find their parts
    assert part_ids <= {h.id for h in embedded_store.retrieve_memories("vault", k=50, all_scopes=True, relevance=False)}
    assert run(memory.search_memory("what is the vault combination?", k=1))[0].memory_id == mid
    found = run(index.search(local_embedder.embed_query(secret), k=1))[0]
    assert found.attributes == {"chunk_text": secret}

    report = export_pam(embedded_store, tmp_path / "pam")
    exported = json.loads((tmp_path / "pam" / MEMORY_STORE_FILE).read_text())["memories"]
    assert report.memories == len(exported) == 1 + len(FACTS) and report.parts_skipped == len(part_ids)
    assert [m["content"] for m in exported if m["id"] == mid] == [text]
    assert not part_ids & {m["id"] for m in exported}


def test_entity_scope(embedded_store):
    alice = BrainMemory({"entity": "alice"}, store=embedded_store)
    everyone = BrainMemory(store=embedded_store)
    private = run(alice.store_memory("Alice's locker code is 4412", {"entity": "alice", "who": "bob"}))
    shared = run(everyone.store_memory("The gym opens at 6 am"))
    assert embedded_store.get_one(private).metadata["scope"] == "entity:alice"
    assert run(everyone.get_memory(private)) is None and run(everyone.delete_memory(private)) is False
    assert [r.memory_id for r in run(everyone.search_memory("locker code"))] == [shared]
    assert {r.memory_id for r in run(alice.search_memory("locker code"))} == {private, shared}
    assert {m["id"] for m in run(alice.list_memories())} == {private, shared}
    assert embedded_store.retrieve_memories("locker code", k=1, entity="alice", relevance=False)[0].id == private
    # an entity attribute that contradicts the scope stays an attribute
    other = run(alice.store_memory("Alice owes Bob lunch", {"entity": "bob"}))
    assert embedded_store.get_one(other).metadata["entity"] == "alice"
    assert run(alice.get_memory(other))["attributes"] == {"entity": "bob"}


def test_bad_input_is_refused_and_nothing_is_written(memory, embedded_store):
    with pytest.raises(ValidationError, match="text"):
        run(memory.store_memory("   "))
    with pytest.raises(ValidationError, match="attributes must be a dict"):
        run(memory.store_memory("ok", ["not", "a", "dict"]))
    with pytest.raises(ValidationError, match="'raw'.*bytes"):
        run(memory.store_memory("ok", {"raw": b"\x00", "fine": 1}))
    with pytest.raises(ValidationError, match=r"'\$set'"):
        run(memory.store_memory("ok", {"$set": 1}))
    with pytest.raises(ValidationError, match="between 1 and 1000"):
        run(memory.search_memory("ok", k=0))
    with pytest.raises(ValidationError, match="query"):
        run(memory.search_memory(""))
    assert embedded_store.count() == 0
    mid = run(memory.store_memory("Heidi likes jazz"))
    with pytest.raises(ValidationError, match="'bad'"):
        run(memory.update_memory(mid, "Heidi likes blues", {"bad": {1, 2}}))
    assert embedded_store.get_one(mid).text == "Heidi likes jazz"
    # attributes that are not valid for the store's fields are kept as attributes instead
    odd = {"importance": "high", "tags": "solo", "conversation_id": "chat-9"}
    other = run(memory.store_memory("Ivan likes opera", odd))
    assert run(memory.get_memory(other))["attributes"] == odd
    assert embedded_store.get_one(other).metadata["importance"] == 3


def test_config_errors_name_the_problem(tmp_path):
    with pytest.raises(ConfigError, match="bogus"):
        BrainMemory({"bogus": 1, "data_dir": str(tmp_path / "d")})
    with pytest.raises(ConfigError, match="entity"):
        BrainMemory({"entity": " spaced ", "data_dir": str(tmp_path / "d")})
    with pytest.raises(ConfigError, match="source"):
        BrainMemory({"source": "web", "data_dir": str(tmp_path / "d")})
    with pytest.raises(ConfigError, match="BRAIN_RECENCY|RAG_RECENCY_HALF_LIFE_DAYS"):
        BrainMemory({"recency_half_life_days": -1, "data_dir": str(tmp_path / "d")})


def test_modules_from_config_share_one_store(tmp_path):
    config = {"data_dir": str(tmp_path / "shared")}
    memory, index = BrainMemory(config), BrainVectorIndex(config)
    assert memory.store is index.store is protocols.shared_store(Settings(**config))
    assert BrainEmbedder(config).embedder is memory.store.embedder
    mid = run(memory.store_memory("Judy collects stamps"))
    assert BrainMemory(config).store.get_one(mid).text == "Judy collects stamps"


def test_shared_stores_are_the_stores_of_shared_brains(tmp_path, embedded_store):
    config = {"data_dir": str(tmp_path / "shared")}
    shared = protocols.shared_brain(Settings(**config))
    assert BrainMemory(config).store is shared.store is protocols.shared_store(Settings(**config))
    # a Brain the application opened: the modules use it, and closing the shared ones leaves it open
    opened = Brain(embedded_store)
    protocols.register_shared_store(opened)
    assert BrainMemory({"data_dir": str(embedded_store.settings.data_dir)}).store is embedded_store
    assert BrainMemory(store=opened).store is embedded_store
    protocols.close_shared_stores()
    assert shared.closed and not opened.closed
    with pytest.raises(ConfigError, match="Brain or RagStore"):
        protocols.register_shared_store(object())


# ---- a real Xaibo agent ---------------------------------------------------------------------------------
def tool_call(call_id: str, name: str, **arguments) -> dict:
    return {"content": "", "tool_calls": [{"id": call_id, "name": name, "arguments": arguments}]}


def example_agent(responses: list[dict]) -> AgentConfig:
    """The README's agent (config/xaibo/agent.yaml) with a scripted LLM in place of the network one."""
    data = yaml.safe_load(EXAMPLE_YAML.read_text())
    llm = next(m for m in data["modules"] if m["id"] == "llm")
    llm["module"] = "xaibo.primitives.modules.llm.MockLLM"
    llm["config"] = {"responses": responses}
    return AgentConfig(**data)


def test_example_yaml_wires_brain_memory_into_xaibos_memory_tools():
    config = AgentConfig.from_yaml(EXAMPLE_YAML.read_text())
    wiring = {(e.module, e.protocol): e.provider for e in config.exchange}
    assert wiring[("memory-tools", "MemoryProtocol")] == "memory"
    assert wiring[("orchestrator", "ToolProviderProtocol")] == "memory-tools"
    memory = next(m for m in config.modules if m.id == "memory")
    assert memory.module == "brain.integrations.xaibo.BrainMemory" and memory.provides == ["MemoryProtocol"]


def test_a_xaibo_exchange_stores_and_retrieves_through_brain(tmp_path, local_embedder):
    # the YAML's data_dir is ./data (the test runs in tmp_path); hand the modules our store for that dir
    store = open_store(Settings(data_dir="data"), embedder=local_embedder)
    protocols.register_shared_store(store)
    try:
        results: list = []

        def listen(event):
            if event.event_type == EventType.RESULT and event.method_name == "execute_tool":
                results.append(event.result)

        xaibo = Xaibo()
        xaibo.register_agent(
            example_agent(
                [
                    tool_call(
                        "c1",
                        "store_memory",
                        text="The user's daughter Mia turns 7 on 12 May",
                        attributes={"importance": 5, "tags": ["family"], "said_in": {"channel": "chat"}},
                    ),
                    tool_call("c2", "search_memory", query="when is Mia's birthday?", k=3),
                    {"content": "Mia turns 7 on 12 May."},
                ]
            )
        )
        agent = xaibo.get_agent_with("brain-memory-agent", ConfigOverrides(), [("", listen)])
        assert isinstance(agent.exchange.module_instances["memory"], BrainMemory)
        assert agent.exchange.module_instances["memory"].store is store
        assert isinstance(agent.exchange.module_instances["memory-tools"], MemoryToolProvider)

        response = run(agent.handle_text("Remember that Mia turns 7 on 12 May, then tell me when it is."))
        assert response.text == "Mia turns 7 on 12 May."
        stored, searched = results
        assert stored.success and searched.success
        mid = stored.result["memory_id"]
        assert searched.result[0]["memory_id"] == mid
        assert searched.result[0]["content"] == "The user's daughter Mia turns 7 on 12 May"
        assert searched.result[0]["attributes"]["said_in"] == {"channel": "chat"}
        # it is a memory of the assistant's store, ranked by its own retrieval too
        hit = store.retrieve_memories("Mia's birthday", k=1, relevance=False)[0]
        assert hit.id == mid and hit.metadata["importance"] == 5 and hit.metadata["tags"] == ["family"]

        # a later exchange (new module instances, same store) updates and then deletes it through the tools
        results.clear()
        xaibo.register_agent(
            example_agent(
                [
                    tool_call(
                        "c3", "update_memory", memory_id=mid, text="Mia turns 7 on 14 May", attributes={"fixed": True}
                    ),
                    tool_call("c4", "get_memory", memory_id=mid),
                    tool_call("c5", "delete_memory", memory_id=mid),
                    tool_call("c6", "search_memory", query="Mia's birthday"),
                    {"content": "Forgotten."},
                ]
            )
        )
        agent = xaibo.get_agent_with("brain-memory-agent", ConfigOverrides(), [("", listen)])
        assert run(agent.handle_text("Mia's birthday moved; then forget it.")).text == "Forgotten."
        updated, got, deleted, searched = results
        assert updated.success and got.success and deleted.success and searched.success
        assert got.result["content"] == "Mia turns 7 on 14 May"
        assert got.result["attributes"] == {
            "importance": 5,
            "tags": ["family"],
            "said_in": {"channel": "chat"},
            "fixed": True,
        }
        assert searched.result == [] and store.count(type="memory") == 0
    finally:
        protocols.close_shared_stores()
        store.close()


def test_an_exchange_with_the_memory_handed_in_from_python(embedded_store):
    config = example_agent([tool_call("c1", "list_memories"), {"content": "ok"}])
    mid = embedded_store.upsert_memory("Ken is learning Japanese", tags=["languages"])
    events: list = []
    exchange = Exchange(
        config,
        override_config=ConfigOverrides(instances={"memory": BrainMemory(store=embedded_store)}),
        event_listeners=[("", lambda e: events.append(e) if e.method_name == "list_memories" else None)],
    )
    from xaibo.core.agent import Agent

    assert run(Agent("brain-memory-agent", exchange).handle_text("what do you know?")).text == "ok"
    listed = next(e.result for e in events if e.event_type == EventType.RESULT)
    assert [m["id"] for m in listed] == [mid] and listed[0]["attributes"] == {"importance": 3, "tags": ["languages"]}


def test_consolidation_leaves_xaibo_documents_alone(embedded_store, local_embedder):
    """Two vector-index rows with the same text, and a chunked memory, are not consolidated away."""
    from brain.features.consolidate import consolidate_memories

    index = BrainVectorIndex(store=embedded_store)
    vector = local_embedder.embed_documents(["the invoice total is 42 euros"])[0]
    run(
        index.add_vectors(
            [vector, vector],
            [
                {"chunk_text": "the invoice total is 42 euros", "file": "a.pdf"},
                {"chunk_text": "the invoice total is 42 euros", "file": "b.pdf"},
            ],
        )
    )
    mid = run(BrainMemory(store=embedded_store).store_memory(long_text()))
    embedded_store.upsert_memory("Alice drinks green tea every morning", importance=4)
    embedded_store.upsert_memory("Alice drinks green tea each morning", importance=2)
    before = embedded_store.count("memory")
    report = consolidate_memories(embedded_store, threshold=0.9)
    assert report.removed == 1  # only the two plain memories merged
    assert embedded_store.count("memory") == before - 1
    found = run(index.search(vector, k=5))
    assert sorted(r.attributes["file"] for r in found) == ["a.pdf", "b.pdf"]
    assert len(memory_docs(embedded_store, mid)) >= 3
