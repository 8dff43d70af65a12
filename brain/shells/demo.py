"""The main job on the embedded default: build the local store and show what a chat backend gets.

Opens the Chroma store under ``./data/`` as one :class:`~brain.app.core.Brain` (``brain.app.startup``:
persona, warm-up, Engram mirror),
ingests the sample knowledge base in ``config/kb/`` (``brain.features.ingest``), stores a few memories and an
exchange (``ChatMemory.record_exchange``), then prints the context of a sample question
(``ChatMemory.build_context``): the ranked memories with their score parts, the FAQ hits, the recent
turns, the best specialists, and the rendered prompt block. Safe to re-run: a second run writes nothing.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from brain.config import Settings, load_settings
from brain.model.errors import BrainError, ConfigError, NotFound
from brain.model.schemas import entity_scope
from brain.ops import LocalOperations, Operations, open_operations
from brain.ops.offline import ingest, initialise
from brain.ops.values import Context, SpecialistMatch
from brain.shells.cli.reports import ingest_text
from brain.text.wording import counted

SAMPLE_QUESTION = "Can you read the text on the photo of my train ticket?"
#: whose conversation the demo records: what is about a person is stored in that person's scope, so that
#: another entity is never shown it (a global memory is shared by every entity)
DEMO_ENTITY = "alice"
SAMPLE_MEMORIES = [
    {
        "text": "Alice commutes by train to Porto every weekday",
        "importance": 3,
        "tags": ["travel", "routine"],
        "scope": entity_scope(DEMO_ENTITY),
    },
    {
        "text": "Alice's passport expires in March 2027",
        "importance": 5,
        "tags": ["documents"],
        "scope": entity_scope(DEMO_ENTITY),
    },
    {
        "text": "Alice prefers answers in short bullet points",
        "importance": 4,
        "tags": ["preferences"],
        "scope": entity_scope(DEMO_ENTITY),
    },
    {
        "text": "Alice keeps photos of her train tickets and receipts on her phone",
        "importance": 3,
        "tags": ["documents"],
        "scope": entity_scope(DEMO_ENTITY),
    },
    {"text": "Regional trains in Portugal can be booked in the CP app", "importance": 2, "tags": ["travel"]},
]
DEMO_CONVERSATION = "conv-demo"


def seed_conversation(ops: Operations) -> int:
    """Memories (idempotent by text) and one exchange, unless the demo conversation exists already."""
    ops.documents.write([{"type": "memory", "source": "chat", **m} for m in SAMPLE_MEMORIES])
    try:
        ops.conversations.turns(DEMO_CONVERSATION, k=1)
        return 0
    except NotFound:
        pass
    ops.conversations.record(
        DEMO_CONVERSATION,
        "I'm off to Porto again tomorrow morning.",
        "Safe travels! Want me to check the train times?",
        entity=DEMO_ENTITY,
    )
    return 2


def render(question: str, ctx: Context, specialists: list[SpecialistMatch] | None) -> str:
    out = [f"Question: {question}" + (f"   (entity: {ctx.entity})" if ctx.entity else ""), ""]
    gate = ctx.relevance.get("memory")
    if ctx.core:
        out.append(f"Always kept in mind about {ctx.entity} (their most important facts, whatever the question):")
        out += [f"  [importance {item.metadata['importance']}]  {item.text}" for item in ctx.core]
        out.append("")
    out.append(
        f"Ranked memories (top {len(ctx.memory)}; score = similarity part + words-in-common part + importance "
        f"part + recency part):"
    )
    for item in ctx.memory:
        sc, m = item.scores, item.metadata
        out.append(
            f"  {sc['score']:.3f} = {sc['similarity_part']:.3f} + {sc.get('lexical_part', 0.0):.3f} + "
            f"{sc['importance_part']:.3f} + {sc['recency_part']:.3f}  [importance {m['importance']}, {m['scope']}]  "
            f"{item.text}"
        )
    if gate:
        out.append(
            f"  ({gate['below_floor']} of {gate['candidates']} memories below the relevance floor "
            f"{gate['floor']:.2f}: not relevant to this question, so not ranked here"
            + ("; the ones always kept in mind are above)" if ctx.core else ")")
        )
    out += ["", f"FAQ hits (top {len(ctx.faq)}):"]
    for item in ctx.faq:
        first = item.text.splitlines()[0]
        out.append(f"  {item.scores['similarity']:.3f}  [{item.metadata.get('topic')}]  {first}")
    out += ["", f"Recent turns of {ctx.conversation_id}:"]
    for item in ctx.turn:
        out.append(f"  #{item.metadata['turn_index']} {item.metadata['role']}: {item.text}")
    if specialists is not None:
        out += ["", "Specialists for this question (best first by confidence; the band is read from it):"]
        out += [f"  confidence {m.confidence:.3f}  {m.band:<8}  score {m.score:.3f}  {m.id}" for m in specialists]
    out += ["", f"Prompt block (what the model sees, {ctx.chars} characters):"]
    out += ["  " + line for line in ctx.prompt.splitlines()]
    return "\n".join(out)


def _project_kb(settings: Settings) -> Path:
    """The sample knowledge base of the project the settings come from, whatever the working directory."""
    root = settings.layout.root
    if root is None or not (root / "config" / "kb").is_dir():
        raise ConfigError(
            f"no knowledge base to ingest: {settings.layout.describe()} has no config/kb; give one with --kb"
        )
    return root / "config" / "kb"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="brain-demo", description=__doc__.splitlines()[0])
    parser.add_argument("question", nargs="?", default=SAMPLE_QUESTION)
    parser.add_argument(
        "--entity", default=DEMO_ENTITY, help=f"entity whose memories may be used (default: {DEMO_ENTITY})"
    )
    parser.add_argument("--persona", help="the persona file (default: BRAIN_PERSONA_PATH, the project's persona.md)")
    parser.add_argument("--kb", help="the knowledge base (default: the project's config/kb)")
    args = parser.parse_args(argv)
    try:
        settings = load_settings()
        kb_path = args.kb or _project_kb(settings)
        # the demo sets the store up itself: never through a running server
        with open_operations(settings, through_server=False) as ops:
            assert isinstance(ops, LocalOperations)
            return _run(ops, args, kb_path)
    except BrainError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


def _run(ops: LocalOperations, args: argparse.Namespace, kb_path: Path) -> int:
    settings = ops.brain.settings
    report = initialise(settings, persona_path=args.persona, on=ops)
    kb = ingest(settings, [kb_path], on=ops)
    if not kb.ok:
        print(ingest_text(kb), file=sys.stderr)
        return 1
    turns = seed_conversation(ops)
    ctx = ops.conversations.context(DEMO_CONVERSATION, args.question, entity=args.entity)
    specialists = None
    if settings.specialists_path.exists():
        specialists = ops.specialists.find(args.question, k=3)
    stats = ops.maintenance.stats()
    print(f"Store: {stats['backend']} ({stats['embedder']}, {stats['dimension']}-d)")
    for warning in report.warnings:
        print(f"warning: {warning}")
    if report.persona:
        print(f"Persona: {report.persona.sections} sections, " + ("loaded" if report.persona.changed else "unchanged"))
    print(
        f"Knowledge base: {counted(kb.files_read, 'file')}, {counted(kb.added, 'document')} added, "
        f"{kb.unchanged} unchanged, {kb.removed} removed; conversation: {counted(turns, 'new turn')}"
    )
    print(f"Documents: {stats['by_type']}")
    mirror = stats.get("mirror")
    if isinstance(mirror, dict):
        counts = mirror["by_type"]
        print(
            f"Engram mirror: {counted(counts.get('memory', 0), 'memory')}, {counted(counts.get('turn', 0), 'turn')}, "
            f"{counted(counts.get('summary', 0), 'summary')} in {mirror['path']}"
        )
    print()
    print(render(args.question, ctx, specialists))
    return 0


if __name__ == "__main__":
    sys.exit(main())
