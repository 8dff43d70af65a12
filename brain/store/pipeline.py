"""The write pipeline: a :class:`~brain.store.plan.WritePlan` in, a
:class:`~brain.store.plan.WriteResult` out, every write all or nothing.

The steps of an upsert: assign ids (memories derive theirs from scope and text), assign positions
(``turn_index``, ``summary_index``), merge repeated and already stored memories (the rule:
:func:`brain.rules.memories.merge_duplicate`), embed what has no vector, then commit: a durable intent
(:mod:`brain.store.write_intents`) is written before the first Chroma call, the event is staged with the
subscribers (:mod:`brain.store.events`), Chroma is written in chunks, and the subscribers commit
(or abort, after the chunks written were rolled back). Deletes and metadata changes take the same
commit path.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from brain.model.errors import BrainError, ConversationOwned, Problem, StoreUnavailable, ValidationError
from brain.model.ids import memory_id, new_id
from brain.model.results import Document
from brain.model.schemas import GLOBAL_SCOPE, DocType, read_stored
from brain.providers.embeddings import Embedder
from brain.rules.filters import to_chroma_where
from brain.rules.memories import created, merge_duplicate, same_text
from brain.store.chroma import ChromaAccess
from brain.store.events import Op, WriteEvent, WriteEvents
from brain.store.plan import POSITION_FIELDS, PreparedDoc, WritePlan, WriteResult, as_memory
from brain.store.positions import PositionClaims
from brain.store.write_intents import PriorVersion, WriteIntent, WriteIntentLog

log = logging.getLogger(__name__)

#: what Chroma holds for an id, read once per write: (document, metadata), or None when absent
Stored = dict[str, "tuple[str, dict[str, object]] | None"]


class WritePipeline:
    """Runs the steps of every write. The caller holds the store's lock around each call."""

    def __init__(
        self,
        chroma: ChromaAccess,
        embedder: Embedder,
        dimension: int,
        events: WriteEvents,
        intents: WriteIntentLog,
        turns_of: Callable[[str], list[Document]],
    ):
        self.chroma = chroma
        self.embedder = embedder
        self.dimension = dimension
        self.events = events
        self.intents = intents
        self._turns_of = turns_of  # a conversation's turns, from the turn cache
        # with several processes on one server: positions claimed across them, under this store's token
        self.positions: PositionClaims | None = None
        self.writer = ""

    # ---- upserts ----------------------------------------------------------------------------------
    def upsert(self, plan: WritePlan, *, merge_memories: bool) -> WriteResult:
        stored: Stored = {}
        docs = self._assign_ids(list(plan.docs), stored)
        self._check_owners(docs)
        docs = self._assign_positions(docs)
        unique = _merge_duplicates(docs)
        if merge_memories:
            unique = self._merge_existing_memories(unique, stored)
        sequence = None
        if unique:
            unique = self._embed_missing(unique)
            sequence = self._commit_upsert(unique)
        positions = {d.key: getattr(d.metadata, POSITION_FIELDS[d.type]) for d in docs if d.type in POSITION_FIELDS}
        return WriteResult(tuple(d.key for d in docs), positions, sequence)

    def _stored(self, ids: Iterable[str], known: Stored) -> Stored:
        missing = [i for i in dict.fromkeys(ids) if i not in known]
        for page in self.chroma.get_ids(missing, ["documents", "metadatas"]):
            found = dict(zip(page["ids"], zip(page["documents"] or [], page["metadatas"] or [])))
            known.update((i, found.get(i)) for i in page["ids"])
        known.update((i, None) for i in missing if i not in known)
        return known

    def _assign_ids(self, docs: list[PreparedDoc], stored: Stored) -> list[PreparedDoc]:
        for n, d in enumerate(docs):
            if d.id is None:
                if d.type == DocType.MEMORY.value:
                    docs[n] = d.with_(id=memory_id(d.text, d.metadata.scope), derived=True)
                else:
                    docs[n] = d.with_(id=new_id())
        self._avoid_rewritten_ids(docs, stored)
        return docs

    def _avoid_rewritten_ids(self, docs: list[PreparedDoc], stored: Stored) -> None:
        """A derived memory id whose stored memory now has another text (changed in place by
        update_memory) belongs to that memory, and one whose memory was superseded belongs to the
        history: the new text takes the next derived id whose memory is absent or has this very text
        (and is not history), so writing it never overwrites the changed memory nor merges into a past one."""
        derived = [n for n, d in enumerate(docs) if d.derived]
        for attempt in range(1, 50):
            if not derived:
                return
            self._stored((docs[n].key for n in derived), stored)
            taken = [n for n in derived if _taken(stored[docs[n].key], docs[n].text)]
            for n in taken:
                docs[n] = docs[n].with_(id=memory_id(docs[n].text, docs[n].metadata.scope, attempt))
            derived = taken
        raise BrainError("could not find a free id for a memory after 50 attempts")  # pragma: no cover

    def _check_owners(self, docs: list[PreparedDoc]) -> None:
        """Turns appended to a conversation (no ``turn_index`` given) must be in the scope that owns it:
        the scope of its first turns, claimed across processes when the store has position claims
        (:mod:`brain.store.positions`). Raises :class:`ConversationOwned` otherwise, before anything
        is written. Turns written with their positions (a restore, an import) are copies of what was
        stored and are not checked."""
        appended: dict[str, str] = {}
        for d in docs:
            if d.type != DocType.TURN.value or d.metadata.turn_index is not None:
                continue
            conversation, scope = d.metadata.conversation_id, d.metadata.scope
            if appended.setdefault(conversation, scope) != scope:
                raise ConversationOwned(
                    f"one write appends turns in scopes {appended[conversation]!r} and {scope!r} "
                    f"to conversation {conversation!r}; a conversation belongs to one scope"
                )
        for conversation, scope in appended.items():
            existing = sorted(self._turns_of(conversation), key=lambda t: int(t.metadata.get("turn_index") or 0))
            owner = str(existing[0].metadata.get("scope") or GLOBAL_SCOPE) if existing else scope
            if self.positions is not None:
                owner = self.positions.claim_owner(conversation, owner, self.writer)
            if owner != scope:
                raise ConversationOwned(
                    f"conversation {conversation!r} belongs to scope {owner!r}; turns in scope "
                    f"{scope!r} cannot be added to it (start a new conversation)"
                )

    def _assign_positions(self, docs: list[PreparedDoc]) -> list[PreparedDoc]:
        """Give turns and summaries without an index the next ones in their conversation (claimed
        across processes when the store has position claims, :mod:`brain.store.positions`)."""
        wanted: dict[tuple[str, str], int] = {}
        for d in docs:
            field = POSITION_FIELDS.get(d.type)
            if field is not None and getattr(d.metadata, field) is None:
                key = (d.type, d.metadata.conversation_id)
                wanted[key] = wanted.get(key, 0) + 1
        next_free: dict[tuple[str, str], int] = {}
        out = []
        for d in docs:
            field = POSITION_FIELDS.get(d.type)
            if field is None or getattr(d.metadata, field) is not None:
                out.append(d)
                continue
            conversation = d.metadata.conversation_id
            key = (d.type, conversation)
            if key not in next_free:
                if d.type == DocType.TURN.value:
                    existing = [t.metadata for t in self._turns_of(conversation)]
                else:
                    existing = self.chroma.get_all(
                        to_chroma_where(None, type=d.type, conversation_id=conversation), ["metadatas"]
                    )["metadatas"]
                taken = [int(m.get(field) or 0) for m in existing]
                taken += [
                    getattr(q.metadata, field) or 0
                    for q in docs
                    if q.type == d.type and getattr(q.metadata, "conversation_id", None) == conversation
                ]
                next_free[key] = max(taken, default=0) + 1
                if self.positions is not None:
                    next_free[key] = self.positions.claim(
                        d.type, conversation, wanted[key], next_free[key], self.writer
                    )
            meta = d.metadata.model_copy()
            setattr(meta, field, next_free[key])
            next_free[key] += 1
            out.append(d.with_(metadata=meta))
        return out

    def _merge_existing_memories(self, unique: list[PreparedDoc], stored: Stored) -> list[PreparedDoc]:
        """Memories already stored under their id merge with the stored version; returns ``unique``
        without the writes that would change nothing but the time."""
        ids = [d.key for d in unique if d.type == DocType.MEMORY.value]
        if not ids:
            return unique
        self._stored(ids, stored)
        _refuse_scope_moves(unique, stored)
        out: list[PreparedDoc] = []
        keep_vector: list[int] = []
        for d in unique:
            text, old = stored.get(d.key) or (None, None)
            if not (old and old.get("type") == DocType.MEMORY.value and d.type == DocType.MEMORY.value):
                out.append(d)
                continue
            old_model, problems = read_stored(DocType.MEMORY, old)
            if old_model is None:  # unreadable as stored: the new write replaces it
                log.warning(
                    "memory %s as stored cannot be read (%s); replaced by the new write",
                    d.key,
                    "; ".join(problems.values()),
                )
                out.append(d)
                continue
            d = d.with_(metadata=merge_duplicate(as_memory(old_model), d.metadata))
            if same_text(text or "", d.text):
                if not problems and _same_content(old_model, d.metadata):
                    continue
                d = d.with_(text=text)  # the first spelling stays, and with it the stored vector
                keep_vector.append(len(out))
            out.append(d)
        if keep_vector:
            vectors = {
                i: v
                for page in self.chroma.get_ids([out[n].key for n in keep_vector], ["embeddings"])
                for i, v in zip(page["ids"], page["embeddings"])
            }
            for n in keep_vector:
                if out[n].key in vectors:
                    out[n] = out[n].with_(vector=np.asarray(vectors[out[n].key], dtype=np.float32))
        return out

    def _embed_missing(self, unique: list[PreparedDoc]) -> list[PreparedDoc]:
        todo = [n for n, d in enumerate(unique) if d.vector is None]
        if not todo:
            return unique
        vectors = self.embedder.embed_documents([unique[n].text for n in todo])
        if vectors.shape != (len(todo), self.dimension):
            raise BrainError(
                f"embedder {self.embedder.name} returned vectors of shape {vectors.shape}, "
                f"expected ({len(todo)}, {self.dimension})"
            )
        out = list(unique)
        for n, vec in zip(todo, vectors):
            out[n] = out[n].with_(vector=vec)
        return out

    def _commit_upsert(self, unique: list[PreparedDoc]) -> int:
        ids = [d.key for d in unique]
        texts = [d.text for d in unique]
        metas = [d.metadata.to_chroma() for d in unique]
        vectors = np.stack([d.embedded for d in unique]).astype(np.float32, copy=False)
        self.resolve_kept()
        prior = self.snapshot(ids)
        payload = _replacing(ids, metas, prior)
        intent = self.intents.begin(upserted=ids, prior=prior, mirrored=self.events.all_listening)
        event = WriteEvent(
            self._number(intent, "upsert", ids), "upsert", tuple(ids), tuple(texts), tuple(metas), vectors
        )
        self._commit(intent, event, "writing", lambda: self.chroma.upsert(ids, texts, payload, vectors))
        return event.sequence

    # ---- deletes and metadata changes ---------------------------------------------------------------
    def delete(self, found: list[str]) -> None:
        """Delete ``found`` (ids Chroma holds) everywhere, all or nothing."""
        self.resolve_kept()
        intent = self.intents.begin(deleted=found, prior=self.snapshot(found), mirrored=self.events.all_listening)
        event = WriteEvent(self._number(intent, "delete", found), "delete", tuple(found))
        self._commit(intent, event, "deleting", lambda: self.chroma.delete(found))

    def update_metadata(self, changes: Mapping[str, dict[str, object]]) -> None:
        """Merge ``changes`` (``{id: {key: value}}``, checked by the caller) into the stored metadata:
        only these keys are sent, so values another process changed meanwhile are kept."""
        ids = list(changes)
        metas = [changes[i] for i in ids]
        self.resolve_kept()
        intent = self.intents.begin(upserted=ids, prior=self.snapshot(ids), mirrored=self.events.all_listening)
        event = WriteEvent(self._number(intent, "metadata", ids), "metadata", tuple(ids), metadatas=tuple(metas))
        self._commit(intent, event, "updating", lambda: self.chroma.update_metadata(ids, metas))

    # ---- the commit --------------------------------------------------------------------------------
    def _number(self, intent: WriteIntent, op: Op, ids: Sequence[str]) -> int:
        """The write's sequence number; when it cannot be had (the change feed is unreachable),
        nothing was written, so the intent goes too."""
        try:
            return self.events.next_sequence(op, ids)
        except BaseException:
            intent.done()
            raise

    def _commit(self, intent: WriteIntent, event: WriteEvent, doing: str, chroma_call: Callable[[], None]) -> None:
        """Stage ``event``, run ``chroma_call``, then commit the event, or undo Chroma and abort it."""
        n = len(event.ids)
        try:
            staged = self.events.stage(event)
        except BaseException:
            intent.done()  # Chroma was never called
            raise
        try:
            self._chroma(intent, n, doing, chroma_call)
        except BaseException:
            self.events.abort(event, staged)
            raise
        try:
            self.events.commit(event, staged)
        except Exception as exc:
            raise StoreUnavailable(f"the {n} documents were written to Chroma but {exc}") from exc
        finally:
            intent.done()

    def _chroma(self, intent: WriteIntent, n: int, doing: str, call: Callable[[], None]) -> None:
        """``call()``; when it fails, the chunks written so far are rolled back from ``intent`` before
        the error is raised; if even that fails, the intent is kept and rolled back before this
        store's next write or at the next open."""
        try:
            call()
        except BaseException as exc:
            try:
                self.roll_back(intent, chroma_only=True)
            except BaseException as undo_exc:
                intent.keep()
                if not isinstance(exc, Exception):
                    raise
                raise StoreUnavailable(
                    f"{doing} {n} documents in Chroma failed: {exc}; undoing the part written failed too "
                    f"({undo_exc}): it is undone before the next write, or when the store is next opened"
                ) from exc
            intent.done()
            if not isinstance(exc, Exception):
                raise
            raise StoreUnavailable(f"{doing} {n} documents in Chroma failed: {exc}; nothing was written") from exc

    def snapshot(self, ids: Sequence[str]) -> dict[str, PriorVersion]:
        """What Chroma holds for ``ids`` now (absent ids are left out): what undoes a write to them."""
        snap = {}
        for page in self.chroma.get_ids(list(dict.fromkeys(ids)), ["documents", "metadatas", "embeddings"]):
            for i, d, m, e in zip(page["ids"], page["documents"], page["metadatas"], page["embeddings"]):
                snap[i] = PriorVersion(d, dict(m or {}), np.asarray(e, dtype=np.float32))
        return snap

    def resolve_kept(self) -> None:
        """Roll back what an earlier write of this process left half done (its undo had failed), before a
        new write: rolled back later, its record would undo the new write's ids too."""
        if self.intents.has_kept:
            self.intents.resolve(self.roll_back)

    def roll_back(self, intent: WriteIntent, *, chroma_only: bool = False) -> None:
        """Undo ``intent`` in Chroma (ids it inserted deleted, previous versions written back); unless
        ``chroma_only``, then tell the subscribers what Chroma holds for its ids (``restored`` events).
        Idempotent, so a crash during it is harmless."""
        self.chroma.delete(intent.inserted)
        old = list(intent.prior)
        if old:
            current = {
                i: m
                for page in self.chroma.get_ids(old, ["metadatas"])
                for i, m in zip(page["ids"], page["metadatas"] or [])
            }
            metadatas = []
            for i in old:
                version = intent.prior[i].metadata
                # Chroma merges metadata on upsert: keys the undone write added are removed (None)
                added = [k for k in (current.get(i) or {}) if k not in version]
                metadatas.append({**dict.fromkeys(added), **version} if added else version)
            self.chroma.upsert(
                old,
                [intent.prior[i].document for i in old],
                metadatas,
                np.stack([intent.prior[i].embedding for i in old]),
            )
        # the subscribers took nothing of a write that failed in this process; a write found at open may
        # have reached them (e.g. the mirror committed before the process died), so they are told
        if intent.mirrored and not chroma_only:
            self.restate(intent.ids)

    def restate(self, ids: list[str]) -> None:
        """Tell the subscribers what Chroma holds now for ``ids`` (``restored`` events, numbered anew)."""
        rows: dict[str, tuple[str, dict[str, object], np.ndarray]] = {}
        for page in self.chroma.get_ids(ids, ["documents", "metadatas", "embeddings"]):
            for i, d, m, e in zip(page["ids"], page["documents"], page["metadatas"], page["embeddings"]):
                rows[i] = (d or "", dict(m or {}), np.asarray(e, dtype=np.float32))
        gone = tuple(i for i in ids if i not in rows)
        if gone:
            self.events.publish(WriteEvent(self.events.next_sequence("delete", gone), "delete", gone, restored=True))
        if rows:
            self.events.publish(
                WriteEvent(
                    self.events.next_sequence("upsert", tuple(rows)),
                    "upsert",
                    tuple(rows),
                    tuple(r[0] for r in rows.values()),
                    tuple(r[1] for r in rows.values()),
                    np.stack([r[2] for r in rows.values()]),
                    restored=True,
                )
            )


def _merge_duplicates(docs: list[PreparedDoc]) -> list[PreparedDoc]:
    """One entry per id (Chroma refuses repeated ids in one call); memories merge (the first
    spelling of the text is kept), others: last wins."""
    by_id: dict[str, PreparedDoc] = {}
    for d in docs:
        prev = by_id.get(d.key)
        if prev is not None and prev.type == d.type == DocType.MEMORY.value:
            merged = merge_duplicate(prev.metadata, d.metadata)
            d = prev.with_(metadata=merged) if same_text(prev.text, d.text) else d.with_(metadata=merged)
        by_id[d.key] = d
    return list(by_id.values())


def _refuse_scope_moves(unique: list[PreparedDoc], stored: Stored) -> None:
    """A write under the id of a stored memory of another scope (only an explicit id can do that)
    would move the memory to where other entities see it: refused, the whole batch."""
    problems = []
    for d in unique:
        old = (stored.get(d.key) or (None, None))[1]
        if (
            old
            and old.get("type") == d.type == DocType.MEMORY.value
            and old.get("scope", GLOBAL_SCOPE) != d.metadata.scope
        ):
            problems.append(
                Problem(
                    "scope",
                    (
                        f"memory {d.id!r} is stored in scope {old.get('scope')!r}, not {d.metadata.scope!r}: "
                        f"a memory's scope never changes; store it without an id, or delete the old one first"
                    ),
                )
            )
    if problems:
        raise ValidationError("; ".join(p.message for p in problems) + " (nothing was written)", problems)


def _taken(held: tuple[str, dict[str, object]] | None, text: str) -> bool:
    """Whether a stored row ``held`` keeps its id from a memory saying ``text``: it says something else
    (changed in place) or it is history (superseded)."""
    if held is None:
        return False
    return not same_text(held[0] or "", text) or (held[1] or {}).get("status") == "superseded"


# what a repeated write may move without it counting as a change
_TIME_KEYS = ("timestamp", "ts_epoch", "created_at")


def _same_content(old: Any, merged: Any) -> bool:
    """Whether ``merged`` says nothing ``old`` did not: equal apart from the later time."""
    if created(old) != created(merged):
        return False
    return _without_times(old) == _without_times(merged)


def _without_times(meta: Any) -> dict[str, object]:
    return {k: v for k, v in meta.to_chroma().items() if k not in _TIME_KEYS}


def _replacing(
    ids: list[str], metas: list[dict[str, object]], prior: Mapping[str, PriorVersion]
) -> list[dict[str, object]]:
    """Metadata that replaces what is stored. Chroma's upsert merges metadata into the old one, so a
    key the new version lacks (an extra key dropped, tags emptied) is sent as None, which removes it."""
    payload = []
    for doc_id, meta in zip(ids, metas):
        old = prior[doc_id].metadata if doc_id in prior else {}
        stale = [k for k in old if k not in meta]
        payload.append({**meta, **dict.fromkeys(stale)} if stale else meta)
    return payload


__all__ = ["WritePipeline"]
