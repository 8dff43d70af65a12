"""The main job on the embedded default: build the local store and show what a chat backend gets.

Creates the Chroma store under ``./data/`` (``brain.startup``: persona and warm-up), ingests the
sample knowledge base in ``config/kb/`` (``brain.ingest``), stores a few memories and an exchange, then prints the ranked memories (with
their score parts), the FAQ hits and the persona block for a sample question. Safe to re-run:
nothing is duplicated.
"""

from __future__ import annotations

import argparse
import sys

from brain.config import load_settings
from brain.errors import BrainError
from brain.ingest import ingest_paths
from brain.persona import persona_block
from brain.rag_store import RagStore
from brain.startup import startup

SAMPLE_QUESTION = "Can you read the text on the photo of my train ticket?"
SAMPLE_MEMORIES = [
    {"text": "The user commutes by train to Porto every weekday", "importance": 3, "tags": ["travel", "routine"]},
    {"text": "The user's passport expires in March 2027", "importance": 5, "tags": ["documents"]},
    {"text": "The user prefers answers in short bullet points", "importance": 4, "tags": ["preferences"]},
    {"text": "Alice keeps her receipts as photos on her phone", "importance": 3, "tags": ["documents"],
     "scope": "entity:alice"},
]
DEMO_CONVERSATION = "conv-demo"


def seed_conversation(store: RagStore) -> int:
    """Memories (idempotent by text) and one exchange, unless the demo conversation exists already."""
    store.upsert_docs([{"type": "memory", "source": "chat", **m} for m in SAMPLE_MEMORIES])
    if store.recent_turns(DEMO_CONVERSATION, k=1):
        return 0
    store.upsert_turn(DEMO_CONVERSATION, "I'm off to Porto again tomorrow morning.",
                      "Safe travels! Want me to check the train times?")
    return 2


def render(store: RagStore, question: str, entity: str | None) -> str:
    s = store.settings
    out = [f"Question: {question}" + (f"   (entity: {entity})" if entity else ""), ""]
    out.append(f"Ranked memories (top {s.memory_top_k}; score = similarity part + importance part + recency part):")
    for h in store.retrieve_memories(question, entity=entity):
        out.append(
            f"  {h.score:.3f} = {h.similarity_part:.3f} + {h.importance_part:.3f} + {h.recency_part:.3f}"
            f"  [importance {h.metadata['importance']}, {h.metadata['scope']}]  {h.text}"
        )
    out += ["", f"FAQ hits (top {s.faq_top_k}):"]
    for h in store.retrieve_faq(question):
        first = h.text.splitlines()[0]
        out.append(f"  {h.similarity:.3f}  [{h.metadata.get('topic')}]  {first}")
    out += ["", f"Recent turns of {DEMO_CONVERSATION}:"]
    for d in store.recent_turns(DEMO_CONVERSATION):
        out.append(f"  #{d.metadata['turn_index']} {d.metadata['role']}: {d.text}")
    out += ["", "Persona block:"]
    out += ["  " + line for line in persona_block(store, max_chars=1200).splitlines()]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="brain-demo", description=__doc__.splitlines()[0])
    parser.add_argument("question", nargs="?", default=SAMPLE_QUESTION)
    parser.add_argument("--entity", default="alice", help="entity whose memories may be used (default: alice)")
    parser.add_argument("--persona", default="persona.md")
    parser.add_argument("--kb", default="config/kb")
    args = parser.parse_args(argv)
    try:
        report = startup(load_settings(), persona_path=args.persona)
        store = report.store
        kb = ingest_paths(store, [args.kb])
        if not kb.ok:
            print(kb.summary(), file=sys.stderr)
            return 1
        turns = seed_conversation(store)
        stats = store.stats()
        print(f"Store: {stats['backend']} ({store.embedder.name}, {store.dimension}-d)")
        for warning in report.warnings:
            print(f"warning: {warning}")
        if report.persona:
            print(f"Persona: {report.persona.sections} sections, " + ("loaded" if report.persona.changed else "unchanged"))
        print(f"Knowledge base: {kb.files_read} files, {kb.added} documents added, {kb.unchanged} unchanged, "
              f"{kb.removed} removed; conversation: {turns} new turns")
        print(f"Documents: {stats['by_type']}\n")
        print(render(store, args.question, args.entity))
    except BrainError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
