"""The in-process indexes are built once, however many requests arrive together on a store that has not
built them yet (a server's first burst after it starts)."""

from __future__ import annotations

import threading

from brain.app.rag_store import RagStore
from brain.store.indexes import refresh_index


def test_concurrent_first_reads_build_the_indexes_once(backend_settings, local_embedder):
    settings = backend_settings.model_copy(update={"index_snapshot": False})  # the first build reads Chroma
    with RagStore(settings, embedder=local_embedder, mirror=False) as store:
        store.upsert_docs([{"type": "memory", "text": f"fact {n}: shelf {n % 17} holds box {n}"} for n in range(400)])
    query = local_embedder.embed_query("which shelf holds box 42")

    with RagStore(settings, embedder=local_embedder, mirror=False) as store:
        assert store.state.indexes is None
        builds = []
        real = store.state.refresh

        def counted():
            builds.append(threading.get_ident())
            return real()

        store.state.refresh = counted
        start = threading.Barrier(8)
        answers: list[list[str]] = []

        def read():
            start.wait()
            answers.append([h.id for h in store.retrieve_memories("", k=5, query_vector=query, relevance=False)])

        threads = [threading.Thread(target=read) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(answers) == 8 and all(a == answers[0] and len(a) == 5 for a in answers)
        assert len(builds) == 1, f"{len(builds)} builds of the indexes for 8 concurrent first reads"
        # an explicit refresh still rebuilds
        refresh_index(store)
        assert len(builds) == 2
