"""One worker process for test_feed_processes.py: a Brain on a Chroma server, driven by JSON lines.

Each line on stdin is ``{"call": name, "args": {...}}``; each answer on stdout is one JSON line,
``{"ok": result}`` or ``{"error": message}``. Run as ``python -m tests.store.feed_worker URL COLLECTION DATA_DIR``."""

from __future__ import annotations

import json
import sys
import time

import brain
from brain.config import Settings
from brain.store.follower import last_sequence


def main() -> None:
    url, collection, data_dir, interval = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
    opened = brain.open(Settings(chroma_url=url, collection=collection, data_dir=data_dir,
                                 feed_interval_seconds=interval, mirror_enabled=False, summarizer="extractive",
                                 summary_every_n=5))
    store = opened.store
    calls = {
        "upsert_memory": lambda a: store.upsert_memory(**a),
        "update_memory": lambda a: store.update_memory(**a).id,
        "delete": lambda a: store.delete(**a),
        "retrieve": lambda a: [{"id": h.id, "text": h.text, "importance": h.metadata.get("importance")}
                               for h in store.retrieve_memories(**a, relevance=False)],
        "last_sequence": lambda a: last_sequence(store),
        "write_batch_and_hang": lambda a: write_batch_and_hang(store, **a),
        "record_exchange": lambda a: opened.chat.record_exchange(**a).to_dict(),
        "wait_for_summaries": lambda a: opened.chat.wait_for_summaries(timeout=120),
    }
    if len(sys.argv) > 5:  # how long a pending record of another writer is waited for
        store.follower.grace = float(sys.argv[5])
    print(json.dumps({"ok": "ready"}), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        try:
            answer = {"ok": calls[request["call"]](request.get("args") or {})}
        except Exception as exc:  # noqa: BLE001 - the test reads the error from the answer
            answer = {"error": f"{type(exc).__name__}: {exc}"}
        print(json.dumps(answer), flush=True)
    opened.close()


def write_batch_and_hang(store, texts: list[str], chunk: int) -> None:
    """Write ``texts`` in chunks of ``chunk``; after the first chunk reached Chroma, say "half" and
    hang (the test kills the process there)."""
    store.chroma.max_batch_size = chunk
    real = store.chroma.collection.upsert
    written = []

    def upsert(**kwargs):
        if written:
            print(json.dumps({"ok": "half"}), flush=True)
            time.sleep(3600)
        real(**kwargs)
        written.append(kwargs["ids"])

    store.chroma.collection = _Wrapped(store.chroma.collection, upsert=upsert)
    store.upsert_docs([{"text": t, "type": "memory"} for t in texts])


class _Wrapped:
    """``target`` with some of its methods replaced."""

    def __init__(self, target, **methods):
        self._target, self._methods = target, methods

    def __getattr__(self, name):
        return self._methods.get(name) or getattr(self._target, name)


if __name__ == "__main__":
    main()
