"""brain reindex: blue/green re-embedding, on embedded Chroma and on a `chroma run` server.

The new model is Ollama's nomic-embed-text (768-d) served by tests/ollama_stub.py, which records
every embed request: "nothing embedded twice" is counted there."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid

import numpy as np
import pytest

from brain.app import reindex
from brain.app.core import open_store
from brain.config import Settings
from brain.model.errors import EmbedderUnavailable, EmbeddingModelMismatch, StoreUnavailable
from brain.store import Store
from brain.store.follower import catch_up
from brain.store.indexes import refresh_index
from brain.store.live import follow_live, read_pointer
from tests.conftest import ROOT
from tests.ollama_stub import OllamaStub

NOMIC = "ollama/nomic-embed-text"
LOCAL = "local/minilm-l6-v2"
NOW = time.time()  # one clock for every ranking compared (recency counts in a memory's score)


def fill(store) -> None:
    """Documents of every type."""
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
    for n, text in enumerate(
        [
            "Alice is allergic to peanuts",
            "Bob prefers tea over coffee",
            "The office moved to Berlin in 2021",
            "Carol runs marathons",
            "Dave's birthday is in March",
            "The wifi password changes monthly",
        ]
    ):
        store.upsert_memory(text, importance=1 + n % 5, tags=["t" + str(n % 2)], entity="alice" if n % 3 == 0 else None)
    store.upsert_turn("conv-1", "Where is the office?", "It is in Berlin.")
    store.upsert_turn("conv-1", "Since when?", "Since 2021.")
    store.upsert_summary("conv-1", "The user asked where the office is; it is in Berlin since 2021.")


def everything(store) -> dict[str, tuple[str, dict]]:
    got = store.chroma.get_all(None, ["documents", "metadatas"])
    return {i: (d, m) for i, d, m in zip(got["ids"], got["documents"], got["metadatas"])}


QUERIES = ["allergy", "what does Bob drink", "office location", "hours", "refund"]


def results(store) -> list:
    """Retrieval of every kind, exact: ids and scores."""
    out = []
    for q in QUERIES:
        out.append(
            [
                (h.id, round(h.score, 5))
                for h in store.retrieve_memories(q, k=4, all_scopes=True, now=NOW, relevance=False)
            ]
        )
        out.append([(h.id, round(h.score, 5)) for h in store.search(q, k=5)])
        out.append([h.id for h in store.retrieve_faq(q, k=2)])
    return out


def other(settings: Settings, **update) -> Settings:
    """Settings for a second, independent store on the same backend."""
    if settings.chroma_url:
        return settings.model_copy(update={"collection": f"t-{uuid.uuid4().hex[:12]}", **update})
    return settings.model_copy(update={"data_dir": settings.data_dir.parent / f"data-{uuid.uuid4().hex[:6]}", **update})


@pytest.fixture
def ollama():
    with OllamaStub() as stub:
        yield stub


def embedded_texts(stub: OllamaStub) -> list[str]:
    return [t for r in stub.embed_requests() for t in r.inputs]


def test_local_to_ollama_and_back(backend_settings, local_embedder, ollama):
    settings = backend_settings.model_copy(update={"ollama_host": ollama.url})
    with open_store(settings, embedder=local_embedder) as store:
        fill(store)
        before_docs, before_results = everything(store), results(store)
        nomic = reindex.embedder_named(settings, NOMIC)
        plan = reindex.plan(store, nomic)
        assert (plan.documents, plan.to_embed, plan.reused) == (len(before_docs), len(before_docs), 0)
        report = reindex.run(store, nomic, batch=4, progress=False)
        assert report.embedded == len(before_docs) and store.embedder.name == NOMIC and store.dimension == 768
        assert store.collection_name == f"{settings.collection}__g2"
        assert everything(store) == before_docs  # identical text and metadata, every type
        assert len(embedded_texts(ollama)) == len(before_docs)  # nothing embedded twice
        after = results(store)
        with open_store(other(settings), embedder=nomic) as scratch:  # the same documents, embedded for nomic at once
            ids = list(before_docs)
            texts = [before_docs[i][0] for i in ids]
            scratch.chroma.upsert(ids, texts, [before_docs[i][1] for i in ids], nomic.embed_documents(texts))
            refresh_index(scratch)
            assert everything(scratch) == before_docs
            assert results(scratch) == after
        # and back: the mirror holds the local vectors of the mirrored documents, so they are not embedded
        mirrored = sum(1 for _, m in before_docs.values() if m["type"] in settings.mirrored_types)
        back_plan = reindex.plan(store, local_embedder)
        assert back_plan.reused == mirrored and back_plan.to_embed == len(before_docs) - mirrored
        back = reindex.run(store, local_embedder, batch=4, progress=False)
        assert (back.reused, back.embedded) == (mirrored, len(before_docs) - mirrored)
        assert everything(store) == before_docs
        assert results(store) == before_results
        assert store.collection_name == f"{settings.collection}__g3"


def test_writes_during_the_reindex_are_in_the_new_collection(backend_settings, local_embedder, ollama):
    settings = backend_settings.model_copy(update={"ollama_host": ollama.url})
    with open_store(settings, embedder=local_embedder) as store:
        fill(store)
        gone = store.get(type="faq")[0].id
        written: list[str] = []

        def meanwhile(batch: int) -> None:
            if batch == 1:
                written.append(store.upsert_memory("Erin joined the team in May", importance=5))
                store.delete(gone)
                store.update_memory(store.get(type="memory")[0].id, importance=1)
            if batch == 2:
                written.extend(store.upsert_turn("conv-2", "A late question", "A late answer"))

        reindex.run(store, reindex.embedder_named(settings, NOMIC), batch=3, progress=False, on_batch=meanwhile)
        assert store.embedder.name == NOMIC
        live = everything(store)
        assert all(i in live for i in written) and gone not in live
        # what the new collection holds is what the old one holds now, text and metadata
        old = store.client.get_collection(settings.collection, embedding_function=None)
        got = old.get(include=["documents", "metadatas"])
        assert live == {i: (d, m) for i, d, m in zip(got["ids"], got["documents"], got["metadatas"])}
        ranked = {h.id for h in store.retrieve_memories("anything", k=50, all_scopes=True, relevance=False)}
        assert written[0] in ranked  # in the memory index of the new collection
        vector = store.get([written[0]], include_embeddings=True)[0].embedding
        assert np.allclose(vector, store.embedder.embed_documents(["Erin joined the team in May"])[0], atol=1e-6)


def test_ollama_down_midway_leaves_the_live_collection_serving_and_resumes(backend_settings, local_embedder):
    first = OllamaStub().start()
    settings = backend_settings.model_copy(update={"ollama_host": first.url, "ollama_timeout": 1.0})
    with open_store(settings, embedder=local_embedder) as store:
        fill(store)
        before_docs, before_results = everything(store), results(store)

        def down(batch: int) -> None:
            if batch == 2:  # from now on Ollama takes every request and never answers
                first.hang_after = len(first.embed_requests())

        with pytest.raises(EmbedderUnavailable, match="did not answer within 1s"):
            reindex.run(store, reindex.embedder_named(settings, NOMIC), batch=3, progress=False, on_batch=down)
        first.stop()
        assert store.collection_name == settings.collection and store.embedder.name == LOCAL
        assert results(store) == before_results  # untouched and serving
        store.upsert_memory("Written while the re-index is stopped")
        done_before = [t for r in first.embed_requests()[: first.hang_after] for t in r.inputs]
        with OllamaStub() as second:
            again = settings.model_copy(update={"ollama_host": second.url})
            nomic = reindex.embedder_named(again, NOMIC)
            plan = reindex.plan(store, nomic)
            assert plan.resumed and plan.done == len(done_before)
            report = reindex.run(store, nomic, batch=3, progress=False)
            assert report.skipped == len(done_before)
            texts = done_before + embedded_texts(second)
            assert len(texts) == len(set(texts)) == len(before_docs) + 1  # every text once, none twice
        assert store.embedder.name == NOMIC and len(everything(store)) == len(before_docs) + 1


def test_rollback_restores_the_previous_results_and_drop_old_deletes(backend_settings, local_embedder, ollama):
    settings = backend_settings.model_copy(update={"ollama_host": ollama.url})
    with open_store(settings, embedder=local_embedder) as store:
        fill(store)
        before = results(store)
        reindex.run(store, reindex.embedder_named(settings, NOMIC), progress=False)
        assert results(store) != before
        new_id = store.upsert_memory("Written after the swap, before the roll-back")
        report = reindex.rollback(store, progress=False)
        assert report.embedded == 1  # only what changed since the swap, with the old model
        assert store.collection_name == settings.collection and store.embedder.name == LOCAL
        assert store.get([new_id])
        store.delete(new_id)
        assert results(store) == before
        pointer = read_pointer(store.client, settings.collection)
        assert pointer.previous == f"{settings.collection}__g2"
        if settings.chroma_url:  # other processes may still read the collection the roll-back retired
            with pytest.raises(reindex.ReindexError, match=r"__g2.*run this again in \d+ s \(nothing was deleted\)"):
                reindex.drop_old(store, keep=0)
            assert f"{settings.collection}__g2" in {c.name for c in store.client.list_collections()}
            assert NOMIC in store.mirror.models()
        dropped = reindex.drop_old(store, keep=0, grace_seconds=0 if settings.chroma_url else None)
        assert dropped.dropped == [f"{settings.collection}__g2"]
        assert f"{settings.collection}__g2" not in {c.name for c in store.client.list_collections()}
        assert NOMIC not in store.mirror.models()
        with pytest.raises(reindex.ReindexError, match="no previous collection"):
            reindex.rollback(store, progress=False)


def test_a_mismatching_embedder_at_start_names_the_command_and_no_fixed_rate(settings, local_embedder):
    with open_store(settings, embedder=local_embedder) as store:
        fill(store)
        count = store.count()
    with pytest.raises(EmbeddingModelMismatch) as caught:
        open_store(settings.model_copy(update={"embedder": NOMIC}))
    message = str(caught.value)
    assert f"`brain reindex --embedder {NOMIC}`" in message and f"{count} documents" in message
    assert f"BRAIN_EMBEDDER={LOCAL}" in message
    # a typical figure misleads on another machine: the run measures its own pace
    assert "documents/s" not in message and "first batch" in message


def test_the_store_opens_on_the_new_collection_after_the_swap(settings, local_embedder, ollama):
    settings = settings.model_copy(update={"ollama_host": ollama.url})
    with open_store(settings, embedder=local_embedder) as store:
        fill(store)
        reindex.run(store, reindex.embedder_named(settings, NOMIC), progress=False)
        after = results(store)
    with open_store(settings.model_copy(update={"embedder": NOMIC})) as reopened:
        assert reopened.collection_name == f"{settings.collection}__g2" and results(reopened) == after


def test_a_store_follows_a_swap_to_another_model_with_the_embedder_its_opener_builds(settings, local_embedder, ollama):
    settings = settings.model_copy(update={"ollama_host": ollama.url})
    built: list[str] = []

    def build(name: str):
        built.append(name)
        return reindex.embedder_named(settings, name)

    with open_store(settings, embedder=local_embedder) as store:
        fill(store)
        # stores beside it over the one client, opened before the swap: a second process on a server, in process
        bare = Store(settings, embedder=local_embedder, client=store.client)
        wired = Store(settings, embedder=local_embedder, embedder_for=build, client=store.client)
        try:
            reindex.run(store, reindex.embedder_named(settings, NOMIC), progress=False)
            with pytest.raises(StoreUnavailable, match="without a way to build that embedder; open the store again"):
                follow_live(bare)
            assert bare.embedder is local_embedder and bare.collection_name == settings.collection
            assert follow_live(wired) and built == [NOMIC]
            assert wired.collection_name == store.collection_name and wired.embedder.name == NOMIC
            assert results(wired) == results(store)
        finally:
            bare.close()
            wired.close()


@pytest.mark.server
def test_another_process_follows_the_swap_on_its_next_feed_check(chroma_server, tmp_path, local_embedder, ollama):
    settings = Settings(
        data_dir=tmp_path / "data",
        chroma_url=chroma_server,
        collection=f"t-{uuid.uuid4().hex[:12]}",
        ollama_host=ollama.url,
    )
    with (
        open_store(settings, embedder=local_embedder) as writer,
        open_store(settings, embedder=local_embedder) as reader,
    ):
        fill(writer)
        reindex.run(writer, reindex.embedder_named(settings, NOMIC), progress=False)
        catch_up(reader)
        assert reader.collection_name == writer.collection_name and reader.embedder.name == NOMIC
        assert results(reader) == results(writer)
        late = reader.upsert_memory("Written by the reader after it followed the swap")
        catch_up(writer)
        assert late in {h.id for h in writer.retrieve_memories("anything", k=50, all_scopes=True, relevance=False)}


@pytest.mark.server
def test_another_process_finds_specialists_with_the_new_model_after_the_swap(
    chroma_server, tmp_path, local_embedder, ollama
):
    from brain.features.specialists import SpecialistRegistry

    (tmp_path / "specialists.yaml").write_text(SPECIALISTS_YAML, encoding="utf-8")
    settings = Settings(
        data_dir=tmp_path / "data",
        chroma_url=chroma_server,
        collection=f"t-{uuid.uuid4().hex[:12]}",
        specialists_collection=f"s-{uuid.uuid4().hex[:12]}",
        ollama_host=ollama.url,
        specialists_path=tmp_path / "specialists.yaml",
    )
    with (
        open_store(settings, embedder=local_embedder) as writer,
        open_store(settings, embedder=local_embedder) as reader,
    ):
        fill(writer)
        registry = SpecialistRegistry.from_settings(reader, path=settings.specialists_path)
        registry.register()
        assert registry.find_specialists("what's the weather in Leeds tomorrow", k=1)[0].id == "weather"
        reindex.run(writer, reindex.embedder_named(settings, NOMIC), progress=False)
        catch_up(reader)
        asked = len(ollama.embed_requests())
        match = registry.find_specialists("is it going to rain in Leeds", k=2)
        assert registry.embedder.name == NOMIC and len(ollama.embed_requests()) == asked + 1  # the new model
        assert {m.id for m in match} == {"weather", "calculator"}  # ranked from the re-registered vectors


SPECIALISTS_YAML = """\
specialists:
  - id: weather
    description: Current weather and forecasts
    semantics:
      canonical: get the weather forecast for a place
      predicates: [will it rain tomorrow, what is the temperature outside]
      objects: [forecast, rain, temperature]
  - id: calculator
    description: Arithmetic
    semantics:
      canonical: calculate a sum
      predicates: [what is 17 percent of 2340, add these numbers]
      objects: [sum, percentage]
"""


def _cli(settings: Settings, *args: str, env_extra: dict | None = None) -> subprocess.Popen:
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "BRAIN_DATA_DIR": str(settings.data_dir),
        "OLLAMA_HOST": settings.ollama_host,
        **(env_extra or {}),
    }
    if settings.chroma_url:
        env.update(BRAIN_CHROMA_URL=settings.chroma_url, BRAIN_COLLECTION=settings.collection)
    return subprocess.Popen(
        [sys.executable, "-m", "brain.shells.cli", "--json", "reindex", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.subprocess
def test_kill_9_at_several_points_then_resume_embeds_nothing_twice(backend_settings, local_embedder, ollama):
    settings = backend_settings.model_copy(update={"ollama_host": ollama.url})
    with open_store(settings, embedder=local_embedder) as store:
        fill(store)
        documents = store.count()
    hung: set[int] = set()  # positions of the embed requests a killed process was waiting for
    for answers in (1, 2, 1):  # killed after this many more answers (one batch of 2 texts each)
        ollama.hang_after = len(ollama.embed_requests()) + answers
        proc = _cli(settings, "--embedder", NOMIC, "--batch", "2")
        deadline = time.monotonic() + 120
        while len(ollama.embed_requests()) <= ollama.hang_after:
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline
            time.sleep(0.05)
        time.sleep(0.5)  # the batch before it is written meanwhile (a second thread writes while the next embeds)
        os.kill(proc.pid, signal.SIGKILL)
        proc.communicate()
        hung.add(ollama.hang_after)
    ollama.hang_after = None
    proc = _cli(settings, "--embedder", NOMIC, "--batch", "2")
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    requests = ollama.embed_requests()
    answered = [t for n, r in enumerate(requests) if n not in hung for t in r.inputs]
    assert len(answered) == len(set(answered)) == documents  # every text embedded once
    with open_store(settings.model_copy(update={"embedder": NOMIC})) as store:
        assert store.count() == documents and store.collection_name.endswith("__g2")


@pytest.mark.subprocess
def test_the_command_dry_run_rollback_and_usage(settings, local_embedder, ollama):
    settings = settings.model_copy(update={"ollama_host": ollama.url})
    with open_store(settings, embedder=local_embedder) as store:
        fill(store)
        documents = store.count()
    proc = _cli(settings, "--embedder", NOMIC, "--dry-run")
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    planned = json.loads(out)
    assert (planned["documents"], planned["to_embed"], planned["reused"]) == (documents, documents, 0)
    assert ollama.embed_requests() == []  # a dry run embeds nothing
    proc = _cli(settings, "--embedder", NOMIC)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert json.loads(out)["collection"] == f"{settings.collection}__g2"
    proc = _cli(settings, "--rollback")
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert json.loads(out)["collection"] == settings.collection
    proc = _cli(settings, "--rollback", "--drop-old")
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2 and "one of --rollback, --drop-old and --keep" in err
    proc = _cli(settings, "--keep", "0")
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert json.loads(out)["dropped"] == [f"{settings.collection}__g2"]


@pytest.mark.server
def test_a_write_of_a_process_that_had_not_seen_the_swap_is_carried_over(
    chroma_server, tmp_path, local_embedder, ollama
):
    settings = Settings(
        data_dir=tmp_path / "data",
        chroma_url=chroma_server,
        collection=f"t-{uuid.uuid4().hex[:12]}",
        ollama_host=ollama.url,
    )
    slow = settings.model_copy(update={"feed_interval_seconds": 3600})  # checks the feed only when asked
    with open_store(settings, embedder=local_embedder) as writer, open_store(slow, embedder=local_embedder) as late:
        fill(writer)
        catch_up(late)
        reindex.run(writer, reindex.embedder_named(settings, NOMIC), progress=False)
        gone = late.get(type="faq")[0].id
        late_id = late.upsert_memory("Written into the old collection after the swap")  # not seen yet
        late.delete(gone)
        assert late.collection_name == settings.collection
        catch_up(late)  # the swap record: it moves, and carries its two writes over
        assert late.collection_name == writer.collection_name and late.embedder.name == NOMIC
        catch_up(writer)
        for store in (writer, late):
            assert store.get([late_id]) and not store.get([gone])
            assert late_id in {
                h.id for h in store.retrieve_memories("anything", k=50, all_scopes=True, relevance=False)
            }
        vector = writer.get([late_id], include_embeddings=True)[0].embedding
        assert np.allclose(
            vector, writer.embedder.embed_documents(["Written into the old collection after the swap"])[0], atol=1e-6
        )


def test_the_command_says_what_to_set_once_the_new_model_is_live(settings, local_embedder, ollama):
    from brain.ops.offline import reindex as run_command
    from brain.shells.cli.reports import reindex_text

    settings = settings.model_copy(update={"ollama_host": ollama.url})
    with open_store(settings, embedder=local_embedder) as store:
        fill(store)
    report = run_command(settings, embedder_name=NOMIC, progress=False)
    assert f"set BRAIN_EMBEDDER={NOMIC}" in report.next_step and f"it is {LOCAL} here" in report.next_step
    assert f"next: set BRAIN_EMBEDDER={NOMIC}" in reindex_text(report)
    back = run_command(settings, rollback=True, progress=False)  # back to the model BRAIN_EMBEDDER names
    assert back.next_step.startswith(f"BRAIN_EMBEDDER is {LOCAL} already")


def test_the_run_estimates_the_rest_from_its_first_batch(settings, local_embedder, ollama):
    import io

    from brain.text.progress import ProgressOptions

    settings = settings.model_copy(update={"ollama_host": ollama.url})
    shown = io.StringIO()
    with open_store(settings, embedder=local_embedder) as store:
        fill(store)
        left = store.count() - 4
        reindex.run(
            store,
            reindex.embedder_named(settings, NOMIC),
            batch=4,
            progress=ProgressOptions(stream=shown, bar=False, interval=3600),
        )
    [estimate] = [line for line in shown.getvalue().splitlines() if "first 4 documents took" in line]
    assert "documents/s here" in estimate and f"the {left} left" in estimate and "about" in estimate


@pytest.mark.slow
def test_drop_old_gives_the_dropped_collections_space_back(settings, local_embedder, ollama):
    import sqlite3

    from brain.shells.cli.reports import drop_text

    settings = settings.model_copy(update={"ollama_host": ollama.url})
    chroma_dir = settings.data_dir / "chroma"

    def folders() -> set[str]:
        return {p.name for p in chroma_dir.iterdir() if p.is_dir()}

    def segments() -> set[str]:
        with sqlite3.connect(chroma_dir / "chroma.sqlite3") as conn:
            return {row[0] for row in conn.execute("SELECT id FROM segments")}

    def free_pages() -> int:
        with sqlite3.connect(chroma_dir / "chroma.sqlite3") as conn:
            return conn.execute("PRAGMA freelist_count").fetchone()[0]

    with open_store(settings, embedder=local_embedder) as store:
        fill(store)
        for n in range(150):
            store.upsert_memory(f"Filler memory number {n} about the garden, the weather and the trains")
        reindex.run(store, reindex.embedder_named(settings, NOMIC), progress=False)
        after = results(store)
        served = set(folders())
        dropped = reindex.drop_old(store, keep=0)
        assert dropped.dropped == [settings.collection]
        assert folders() <= segments() and folders() < served  # the old index's folder is gone
        assert free_pages() == 0 and dropped.reclaimed_bytes > 0
        assert "of the data directory given back" in drop_text(dropped)
        assert results(store) == after
    with open_store(settings.model_copy(update={"embedder": NOMIC})) as reopened:
        assert results(reopened) == after
