"""Memory formation: the durable facts of a conversation, asked of a model window by window, applied to the
memories of the conversation's scope with their history.

A **batch** is a summary's window (``2 * BRAIN_SUMMARY_EVERY_N`` turns of one conversation). After the window's
summary is stored, the summary worker (:mod:`brain.features.chat.summary_queue`) runs :meth:`Formation.run` for
it, never the chat request. The batch's state lives on the window's summary (durable, shared by every process
on a Chroma server, carried by the mirror): ``formation`` is ``pending``, ``done`` or ``failed``, with
``formation_attempts``, ``formation_error``, ``formation_at``, ``formation_facts`` and the model's tokens and
seconds (``formation_prompt_tokens``, ``formation_eval_tokens``, ``formation_seconds``, summed over every call).

One run of a batch:

1. the window's turns (in the scope of its last one, as for its summary) and the candidates: the current
   memories of that scope closest to the turns (``BRAIN_FORMATION_CANDIDATES`` of them, at or above the
   store's similarity floor when the relevance ranking is on);
2. the model is asked (:mod:`brain.rules.formation`); an answer it refuses gets one repair request showing
   every problem;
3. the facts are applied in **one write** together with the summary marked ``done``
   (:func:`brain.store.history.apply_changes`): a process killed meanwhile leaves all of it or none of it, and
   the batch pending. New memories are ``source: chat`` with the ``conversation_id``, the ids of the turns
   they come from (``source_turns``), ``valid_from`` (the fact's, else its last turn's time) and ``expires_at``;
4. a model that is down, slow or answers what is refused (also at the write: a memory superseded meanwhile)
   fails the attempt; ``BRAIN_FORMATION_RETRIES`` more follow with doubling back-off from
   ``BRAIN_SUMMARY_BACKOFF_SECONDS``, each asking the model again with the store as it is then. When they are
   spent the summary says ``failed`` with the last error (nothing else is written), and the batch waits to be
   run again (:meth:`brain.features.chat.ChatMemory.extract_memories`). When the last attempt found the model
   unreachable, the batch stays ``pending`` with that error instead: the worker runs it again once a later
   window is formed (the model answers again), and for ``BRAIN_SUMMARY_COOLDOWN_SECONDS`` does not ask the
   model for the windows queued behind it (they wait the same way), so the summaries are not held up.

Derived ids make a batch applied twice converge: a fact whose text a current memory of the scope says
already merges into it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from brain.config import Settings
from brain.features.chat.summaries import window_turns
from brain.model.errors import (
    Backoff,
    ConfigError,
    ExtractorError,
    ExtractorUnavailable,
    FormationAnswerError,
    NotFound,
    StoreUnavailable,
    ValidationError,
)
from brain.model.results import Document
from brain.model.schemas import (
    FORMATION_ERROR_LENGTH,
    FORMATION_OUTCOMES,
    FORMATION_STATES,
    GLOBAL_SCOPE,
    DocType,
    entity_of,
    format_timestamp,
    parse_timestamp,
    parse_turn_range,
    read_for_rewrite,
    utc_now,
    valid_conversation_id,
)
from brain.rules.formation import (
    Candidate,
    FormedFact,
    WindowTurn,
    accepted_entity,
    answer_schema,
    candidate_keys,
    check_answer,
    formation_messages,
    refusal_outcome,
    repair_messages,
)
from brain.store import SIMILARITY_ONLY, AppliedChanges, MemoryChange
from brain.store.history import apply_changes
from brain.store.indexes import memory_index
from brain.store.memory_query import MemoryQuery
from brain.wiring import formation_off_reason

if TYPE_CHECKING:
    from brain.providers.extractors import Extractor, ModelAnswer
    from brain.store import Store

log = logging.getLogger(__name__)

#: candidates are shown from the embedder's mean similarity of unrelated pairs up (z = 0 of its calibration,
#: :mod:`brain.rules.relevance`), far below the context's floor: a change is said in other words than the fact it
#: changes ("I moved to Berlin" is about 0.15 from "Alice lives in Paris" with the local model), and a memory the
#: model is not shown cannot be updated or contradicted, only repeated beside it
CANDIDATE_FLOOR_Z = 0.0
_LOCK_STRIPES = 64


@dataclass(frozen=True)
class FormationBatch:
    """Where the formation of one window stands, as its summary records it. ``status``: ``pending``,
    ``done`` or ``failed``; ``attempts`` the model attempts made so far; ``error`` the last failure;
    ``facts`` the facts the last successful run applied; tokens and seconds summed over every model call;
    ``at`` when it last ran (ISO time)."""

    conversation_id: str
    turn_range: str
    summary_id: str
    status: str
    attempts: int = 0
    error: str | None = None
    facts: int = 0
    prompt_tokens: int = 0
    eval_tokens: int = 0
    seconds: float = 0.0
    at: str | None = None
    outcome: str | None = None

    @classmethod
    def of(cls, summary: Document) -> FormationBatch:
        """The batch a stored summary records (``pending`` when it records none)."""
        meta = summary.metadata
        return cls(
            conversation_id=str(meta.get("conversation_id")),
            turn_range=str(meta.get("turn_range")),
            summary_id=summary.id,
            status=str(meta.get("formation") or "pending"),
            attempts=int(meta.get("formation_attempts") or 0),
            error=meta.get("formation_error"),
            facts=int(meta.get("formation_facts") or 0),
            prompt_tokens=int(meta.get("formation_prompt_tokens") or 0),
            eval_tokens=int(meta.get("formation_eval_tokens") or 0),
            seconds=float(meta.get("formation_seconds") or 0.0),
            at=meta.get("formation_at"),
            outcome=meta.get("formation_outcome"),
        )

    def to_dict(self) -> dict[str, object]:
        return {**asdict(self), "seconds": round(self.seconds, 3)}


@dataclass
class FormationReport:
    """What a run of several batches did (:meth:`brain.features.chat.ChatMemory.extract_memories`): the
    batches as they stand afterwards, how many ended done, failed, or still pending because the model could not
    be reached (``waiting``: they run again once it answers), the facts applied by what they did
    (``added``, ``merged``: the same as a memory, ``updated``, ``contradicted``), and the model's tokens and
    seconds spent by this run."""

    batches: list[FormationBatch] = field(default_factory=list)
    done: int = 0
    failed: int = 0
    waiting: int = 0
    added: int = 0
    merged: int = 0
    updated: int = 0
    contradicted: int = 0
    prompt_tokens: int = 0
    eval_tokens: int = 0
    seconds: float = 0.0

    def to_dict(self) -> dict[str, object]:
        return {
            "batches": [b.to_dict() for b in self.batches],
            "done": self.done,
            "failed": self.failed,
            "waiting": self.waiting,
            "added": self.added,
            "merged": self.merged,
            "updated": self.updated,
            "contradicted": self.contradicted,
            "prompt_tokens": self.prompt_tokens,
            "eval_tokens": self.eval_tokens,
            "seconds": round(self.seconds, 3),
        }


class _Spent:
    """The model calls of one run: tokens and seconds summed."""

    def __init__(self) -> None:
        self.prompt_tokens = 0
        self.eval_tokens = 0
        self.seconds = 0.0

    def add(self, answer: ModelAnswer) -> ModelAnswer:
        self.prompt_tokens += int(answer.prompt_tokens or 0)
        self.eval_tokens += int(answer.eval_tokens or 0)
        self.seconds += float(answer.seconds or 0.0)
        return answer


@dataclass
class _Outcome:
    """One window's run: the batch afterwards, what was applied (None: nothing), the model's spending, and
    whether it ran at all."""

    batch: FormationBatch
    applied: AppliedChanges | None
    spent: _Spent
    ran: bool = True


class FormationStopped(Exception):
    """Raised inside a run when the caller asked it to stop during a back-off wait: the batch stays pending."""


class Formation:
    """Runs the formation of windows (see the module) over ``store`` with ``extractor`` (None: no model).
    On when ``BRAIN_FORMATION`` is and a model is configured; :meth:`health` says why not otherwise.
    Thread-safe: one window runs once at a time in this process."""

    def __init__(
        self,
        store: Store,
        settings: Settings,
        extractor: Extractor | None,
        *,
        sleep: Callable[[float], Any] = time.sleep,
    ):
        self.store = store
        self.settings = settings
        self.extractor = extractor
        self._sleep = sleep
        self._stripes = [threading.Lock() for _ in range(_LOCK_STRIPES)]  # a window runs once at a time
        # monotonic time until which the worker does not ask the model: it was unreachable through a window's
        # every attempt, and retrying each queued window would hold the summaries behind it
        self._down_until = 0.0
        self._down_error = ""
        # windows left pending for want of the model, to run again once it answers (see take_waiting)
        self._waiting: dict[tuple[str, str], None] = {}
        self._waiting_lock = threading.Lock()
        # every model answer of this process by outcome, repairs included (the batches keep their last one)
        self._answers: Counter[str] = Counter()
        self._answers_lock = threading.Lock()

    # ---- on or off --------------------------------------------------------------------------------------
    @property
    def enabled(self) -> bool:
        return self.off_reason is None

    @property
    def off_reason(self) -> str | None:
        """Why formation is off (None when on), saying how to turn it on."""
        reason = formation_off_reason(self.settings)
        if reason is None and self.extractor is None:
            return "no model was given to form memories with: set BRAIN_FORMATION_MODEL to an Ollama chat model"
        return reason

    # ---- one batch --------------------------------------------------------------------------------------
    def run(self, conversation_id: str, turn_range: str, *, stop: threading.Event | None = None) -> FormationBatch:
        """Run the formation of one window now (see the module); returns the batch as it stands afterwards.
        Raises :class:`ConfigError` when formation is off, :class:`NotFound` when the window has no summary
        (formation follows the summary), and the store's errors when the store cannot be written (the batch
        stays as it was). ``stop`` set during a back-off wait raises :class:`FormationStopped`, the batch
        left as it was."""
        return self._run(conversation_id, turn_range, stop=stop).batch

    def run_if_pending(
        self, conversation_id: str, turn_range: str, *, stop: threading.Event | None = None
    ) -> FormationBatch | None:
        """:meth:`run` when the window's summary says ``pending`` (another process may have run it since it
        was queued); None when it does not."""
        outcome = self._run(conversation_id, turn_range, stop=stop, only=("pending",), patient=False)
        return outcome.batch if outcome.ran else None

    def extract(self, conversation_id: str | None = None, *, again: bool = False) -> FormationReport:
        """Run now, in the caller's thread, every pending and failed batch (of one conversation, or of all),
        and the summarised windows formation was never scheduled for; ``again``: the done ones too. A batch
        another thread finished meanwhile is not run twice (unless ``again``)."""
        if not self.enabled:
            raise ConfigError(f"memory formation is off: {self.off_reason}")
        statuses = ("pending", "failed", "done") if again else ("pending", "failed")
        windows = [(b.conversation_id, b.turn_range) for b in self.batches(conversation_id, statuses)]
        windows += self.unscheduled(conversation_id)
        report = FormationReport()
        for conversation, turn_range in sorted(set(windows), key=lambda w: (w[0], _window(w[1]))):
            outcome = self._run(conversation, turn_range, only=None if again else ("pending", "failed", None))
            report.batches.append(outcome.batch)
            if not outcome.ran:
                continue
            report.done += outcome.batch.status == "done"
            report.failed += outcome.batch.status == "failed"
            report.waiting += outcome.batch.status == "pending"
            if outcome.applied is not None:
                report.added += outcome.applied.count("add")
                report.merged += outcome.applied.count("same")
                report.updated += outcome.applied.count("update")
                report.contradicted += outcome.applied.count("contradict")
            report.prompt_tokens += outcome.spent.prompt_tokens
            report.eval_tokens += outcome.spent.eval_tokens
            report.seconds += outcome.spent.seconds
        return report

    def _run(
        self,
        conversation_id: str,
        turn_range: str,
        *,
        stop: threading.Event | None = None,
        only: Sequence[str | None] | None = None,
        patient: bool = True,
    ) -> _Outcome:
        """One window's run; ``only``: run it only when its summary's ``formation`` is one of these (None:
        never scheduled), else report it as it stands. Not ``patient`` (the worker): within
        ``BRAIN_SUMMARY_COOLDOWN_SECONDS`` of a window that found the model unreachable, the window waits for
        the model (stays pending, see :meth:`take_waiting`) without asking it."""
        if not self.enabled:
            raise ConfigError(f"memory formation is off: {self.off_reason}")
        conversation_id = valid_conversation_id(conversation_id)
        start, end = _window(turn_range)
        turn_range = f"{start}-{end}"
        with self._window_lock(conversation_id, turn_range):
            summary = self._find_summary(conversation_id, turn_range)
            if summary is None and only is None:
                raise _no_summary(conversation_id, turn_range)
            if summary is None:  # deleted since it was queued (a forgotten entity's conversation)
                return _Outcome(FormationBatch(conversation_id, turn_range, "", "pending"), None, _Spent(), ran=False)
            if only is not None and summary.metadata.get("formation") not in only:
                return _Outcome(FormationBatch.of(summary), None, _Spent(), ran=False)
            if not patient and time.monotonic() < self._down_until:
                return self._wait_for_model(
                    summary,
                    0,
                    _Spent(),
                    f"not asked: the model was unreachable for a window moments ago ({self._down_error})",
                )
            return self._locked_run(conversation_id, start, end, summary, stop)

    def _locked_run(
        self, conversation_id: str, start: int, end: int, summary: Document, stop: threading.Event | None
    ) -> _Outcome:
        turn_range = f"{start}-{end}"
        spent = _Spent()
        turns = window_turns(self.store, conversation_id, start, end)
        if not turns:
            raise NotFound(f"conversation {conversation_id!r} has no turns {turn_range} (deleted?)")
        scope = str(turns[-1].metadata.get("scope") or GLOBAL_SCOPE)
        entity = entity_of(scope)
        waits = Backoff(first=self.settings.summary_backoff_seconds, retries=self.settings.formation_retries).waits()
        attempts = 0
        error = ""
        outcome = "model_error"
        unreachable = False
        while True:
            attempts += 1
            try:
                applied = self._attempt(conversation_id, turns, scope, entity, summary, spent, attempts)
                self._down_until = 0.0
                return _Outcome(FormationBatch.of(self.store.get_one(summary.id)), applied, spent)
            except (ExtractorError, ValidationError, NotFound) as exc:  # refused: by the model's rules, or the store's
                error = _one_line(str(exc))
                unreachable = isinstance(exc, ExtractorUnavailable)
                outcome = _outcome_of(exc)
                if not isinstance(exc, FormationAnswerError):  # refused answers are counted where they are read
                    self._count(outcome)
                log.warning(
                    "memory formation of %s turns %s, attempt %d: %s", conversation_id, turn_range, attempts, error
                )
            wait = next(waits, None)
            if wait is None:
                break
            if (stop.wait(wait) if stop is not None else self._sleep(wait)) is True:
                raise FormationStopped(f"stopped while retrying the formation of {conversation_id} {turn_range}")
            summary = self._summary(conversation_id, turn_range)  # another process may have changed it
        if unreachable:
            self._down_until = time.monotonic() + self.settings.summary_cooldown_seconds
            self._down_error = error
            return self._wait_for_model(summary, attempts, spent, error)
        return self._failed(summary, attempts, spent, error, outcome)

    def take_waiting(self) -> list[tuple[str, str]]:
        """The windows (conversation id, turn range) left pending in this process because the model could not
        be reached, oldest first, and forget them: the worker queues them again once a window is formed."""
        with self._waiting_lock:
            windows, self._waiting = list(self._waiting), {}
        return windows

    def _wait_for_model(self, summary: Document, attempts: int, spent: _Spent, error: str) -> _Outcome:
        """Leave the window's batch pending with ``error``: an unreachable model is no fault of the window,
        which runs again when the model answers (:meth:`take_waiting`), at the next start, or by hand."""
        self.store.write_docs(
            [
                _summary_doc(
                    summary,
                    {
                        **_counted(summary, attempts, spent),
                        "formation": "pending",
                        "formation_error": error[:FORMATION_ERROR_LENGTH],
                        "formation_outcome": "unreachable",
                    },
                )
            ],
            merge_memories=False,
        )
        conversation_id, turn_range = summary.metadata["conversation_id"], summary.metadata["turn_range"]
        with self._waiting_lock:
            self._waiting[(conversation_id, turn_range)] = None
        log.warning("memory formation of %s turns %s waits for the model: %s", conversation_id, turn_range, error)
        return _Outcome(FormationBatch.of(self.store.get_one(summary.id)), None, spent)

    def _failed(self, summary: Document, attempts: int, spent: _Spent, error: str, outcome: str) -> _Outcome:
        """Mark the window's batch failed with ``error`` and how its last attempt ended (nothing else is
        written)."""
        self.store.write_docs(
            [
                _summary_doc(
                    summary,
                    {
                        **_counted(summary, attempts, spent),
                        "formation": "failed",
                        "formation_error": error[:FORMATION_ERROR_LENGTH],
                        "formation_outcome": outcome,
                    },
                )
            ],
            merge_memories=False,
        )
        conversation_id, turn_range = summary.metadata["conversation_id"], summary.metadata["turn_range"]
        log.error(
            "memory formation of %s turns %s failed after %d attempts: %s; run it again with "
            "`brain memory extract --conversation %s`",
            conversation_id,
            turn_range,
            attempts,
            error,
            conversation_id,
        )
        return _Outcome(FormationBatch.of(self.store.get_one(summary.id)), None, spent)

    def _attempt(
        self,
        conversation_id: str,
        turns: list[Document],
        scope: str,
        entity: str | None,
        summary: Document,
        spent: _Spent,
        attempts: int,
    ) -> AppliedChanges:
        """Ask, check (one repair), apply with the summary marked done; raises what refused it."""
        assert self.extractor is not None
        candidates = self.candidates(turns, scope)
        keys = candidate_keys(candidates)
        messages = formation_messages(
            [_window_turn(t) for t in turns], candidates, entity=entity, now=str(turns[-1].metadata.get("timestamp"))
        )
        indices = {int(t.metadata["turn_index"]) for t in turns}
        schema = answer_schema(entity=accepted_entity(entity), turn_indices=indices, candidate_keys=keys)
        timeout = self.settings.formation_timeout
        answer = spent.add(self.extractor.ask(messages, schema, timeout=timeout))
        outcome = "accepted"
        try:
            facts = self._checked(answer, entity, indices, keys)
        except FormationAnswerError as refused:
            repaired = spent.add(
                self.extractor.ask(repair_messages(messages, answer.content, refused), schema, timeout=timeout)
            )
            facts = self._checked(repaired, entity, indices, keys)
            outcome = "repaired"
        changes = [_change(fact, keys, turns) for fact in facts]
        done = _summary_doc(
            summary,
            {
                **_counted(summary, attempts, spent),
                "formation": "done",
                "formation_facts": len(changes),
                "formation_outcome": outcome,
            },
        )
        done.pop("formation_error", None)
        return apply_changes(
            self.store, changes, scope=scope, source="chat", conversation_id=conversation_id, with_docs=[done]
        )

    def _checked(
        self, answer: ModelAnswer, entity: str | None, indices: set[int], keys: dict[str, Candidate]
    ) -> list[FormedFact]:
        """The facts of one answer (:func:`check_answer`), its outcome counted; a refused answer raises
        :class:`FormationAnswerError` carrying its outcome."""
        try:
            facts = check_answer(answer.content, entity=entity, turn_indices=indices, candidate_keys=set(keys))
        except FormationAnswerError as refused:
            refused.outcome = refusal_outcome(refused, truncated=answer.truncated)  # type: ignore[attr-defined]
            self._count(refused.outcome)  # type: ignore[attr-defined]
            raise
        self._count("accepted")
        return facts

    def _count(self, outcome: str) -> None:
        with self._answers_lock:
            self._answers[outcome] += 1

    def answers(self) -> dict[str, int]:
        """Every model answer this process read, by outcome (``accepted``; refused as ``not_json``,
        ``wrong_fields``, ``too_long``, ``foreign``; no answer: ``unreachable``, ``model_error``); a repaired
        batch counts its refused answer and its accepted one."""
        with self._answers_lock:
            return {o: self._answers.get(o, 0) for o in FORMATION_OUTCOMES if o not in ("repaired", "conflict")}

    def candidates(self, turns: Sequence[Document], scope: str) -> list[Candidate]:
        """The current memories of ``scope`` closest in meaning to ``turns`` (their texts embedded as one
        query), at most ``BRAIN_FORMATION_CANDIDATES``, none less alike than an unrelated pair is on average
        (:data:`CANDIDATE_FLOOR_Z`); expired, superseded and retired memories are never shown."""
        k = self.settings.formation_candidates
        if k <= 0:
            return []
        vector = self.store.embedder.embed_query("\n".join(t.text for t in turns))
        hits = memory_index(self.store).search(MemoryQuery(vector, k, SIMILARITY_ONLY, time.time(), frozenset({scope})))
        floor = self.store.retrieval.calibration().floor(CANDIDATE_FLOOR_Z)
        return [
            Candidate(
                h.id,
                h.text,
                h.metadata.get("valid_from") or h.metadata.get("created_at") or h.metadata.get("timestamp"),
            )
            for h in hits
            if floor is None or h.similarity >= floor
        ]

    # ---- what stands ------------------------------------------------------------------------------------
    def batches(
        self, conversation_id: str | None = None, status: str | Iterable[str] | None = None
    ) -> list[FormationBatch]:
        """The windows formation was scheduled for (their summaries say so), by conversation and window;
        ``status``: only those in it (one of ``pending``, ``done``, ``failed``, or several)."""
        wanted = list(FORMATION_STATES) if status is None else [status] if isinstance(status, str) else list(status)
        bad = [s for s in wanted if s not in FORMATION_STATES]
        if bad or not wanted:
            raise ValidationError.of(
                "status", f"status must be one of {', '.join(FORMATION_STATES)}, got {bad or status!r}"
            )
        where: dict[str, object] = {"formation": wanted}
        if conversation_id is not None:
            where["conversation_id"] = valid_conversation_id(conversation_id)
        docs = self.store.get(where=where, type=DocType.SUMMARY)
        batches = [FormationBatch.of(d) for d in docs]
        batches.sort(key=lambda b: (b.conversation_id, _window(b.turn_range)))
        return batches

    def unscheduled(self, conversation_id: str | None = None) -> list[tuple[str, str]]:
        """``(conversation id, turn range)`` of the summarised windows formation was never scheduled for
        (summarised while it was off), in order."""
        where = None if conversation_id is None else {"conversation_id": valid_conversation_id(conversation_id)}
        windows = [
            (str(d.metadata.get("conversation_id")), str(d.metadata.get("turn_range")))
            for d in self.store.get(where=where, type=DocType.SUMMARY)
            if "formation" not in d.metadata and d.metadata.get("turn_range")
        ]
        return sorted(windows, key=lambda w: (w[0], _window(w[1])))

    def totals(self, conversation_id: str | None = None) -> dict[str, object]:
        """Batches by status (``pending``, ``failed``, ``done``), the facts applied, and the model's tokens and
        seconds summed over all of them."""
        return _totals(self.batches(conversation_id))

    def totals_by_conversation(self) -> dict[str, dict[str, int]]:
        """``{conversation id: {"pending": n, "failed": n, "done": n}}`` for every conversation with a batch
        (one read of the store, for listings)."""
        out: dict[str, dict[str, int]] = {}
        for batch in self.batches():
            out.setdefault(batch.conversation_id, {s: 0 for s in FORMATION_STATES})[batch.status] += 1
        return out

    def health(self) -> dict[str, object]:
        """``enabled``, ``model`` (None when there is none), ``off_reason`` (None when on), the batches by
        status and the tokens and seconds spent (:meth:`totals`), and ``last_error``: the newest failed
        batch's error. A store that cannot be read gives ``error`` instead of the batches: health reports a
        store that is down, it does not fail with it."""
        state = {
            "enabled": self.enabled,
            "model": None if self.extractor is None else self.extractor.name,
            "off_reason": self.off_reason,
        }
        try:
            batches = self.batches()
        except StoreUnavailable as exc:
            return {**state, "error": str(exc)}
        newest = max((b for b in batches if b.status == "failed"), key=lambda b: b.at or "", default=None)
        return {
            **state,
            **_totals(batches),
            "answers": self.answers(),
            "last_error": None if newest is None else newest.error,
        }

    # ---- helpers ----------------------------------------------------------------------------------------
    def _find_summary(self, conversation_id: str, turn_range: str) -> Document | None:
        docs = self.store.get(
            where={"conversation_id": conversation_id, "turn_range": turn_range},
            type=DocType.SUMMARY,
            include_embeddings=True,
        )
        return docs[0] if docs else None

    def _summary(self, conversation_id: str, turn_range: str) -> Document:
        summary = self._find_summary(conversation_id, turn_range)
        if summary is None:
            raise _no_summary(conversation_id, turn_range)
        return summary

    def _window_lock(self, conversation_id: str, turn_range: str) -> threading.Lock:
        return self._stripes[hash((conversation_id, turn_range)) % _LOCK_STRIPES]


def _no_summary(conversation_id: str, turn_range: str) -> NotFound:
    return NotFound(
        f"conversation {conversation_id!r} has no summary of turns {turn_range}: memory formation runs "
        f"on summarised windows (wait for the summaries first)"
    )


def _totals(batches: Iterable[FormationBatch]) -> dict[str, object]:
    out: dict[str, Any] = {s: 0 for s in FORMATION_STATES}
    out.update(facts=0, prompt_tokens=0, eval_tokens=0, seconds=0.0)
    outcomes = dict.fromkeys(FORMATION_OUTCOMES, 0)
    for batch in batches:
        out[batch.status] += 1
        if batch.outcome in outcomes:
            outcomes[batch.outcome] += 1
        out["facts"] += batch.facts
        out["prompt_tokens"] += batch.prompt_tokens
        out["eval_tokens"] += batch.eval_tokens
        out["seconds"] += batch.seconds
    out["seconds"] = round(out["seconds"], 3)
    out["outcomes"] = outcomes
    return out


def _outcome_of(exc: Exception) -> str:
    """The outcome (:data:`FORMATION_OUTCOMES`) an attempt that raised ``exc`` ends with."""
    if isinstance(exc, FormationAnswerError):
        return str(getattr(exc, "outcome", None) or refusal_outcome(exc))
    if isinstance(exc, ExtractorUnavailable):
        return "unreachable"
    if isinstance(exc, ExtractorError):
        return "too_long" if getattr(exc, "too_long", False) else "model_error"
    return "conflict"  # the store refused the write: a memory changed meanwhile, or is gone


def _window(turn_range: str) -> tuple[int, int]:
    try:
        return parse_turn_range(turn_range)
    except ValueError as exc:
        raise ValidationError.of("turn_range", str(exc)) from None


def _window_turn(doc: Document) -> WindowTurn:
    meta = doc.metadata
    return WindowTurn(
        int(meta["turn_index"]), str(meta.get("role", "user")), doc.text, meta.get("timestamp"), meta.get("speaker")
    )


def _change(fact: FormedFact, keys: dict[str, Candidate], turns: Sequence[Document]) -> MemoryChange:
    """A checked fact as a change of the scope's memories: its turns' ids, and its start (its own, else
    its last turn's time; a change never before the start of the memory it changes: a fact remembered by
    hand today is changed by a conversation recorded with older times from its own start on)."""
    sources = [t for t in turns if int(t.metadata["turn_index"]) in set(fact.turns)]
    value = fact.valid_from or (sources[-1].metadata.get("timestamp") if sources else None)
    at = None if value is None else parse_timestamp(value)
    target = None if fact.target is None else keys[fact.target]
    if at is not None and target is not None and fact.action != "same" and target.valid_from is not None:
        at = max(at, parse_timestamp(target.valid_from))
    return MemoryChange(
        action=fact.action,
        text=fact.text,
        target=None if target is None else target.id,
        importance=fact.importance,
        tags=tuple(fact.tags),
        at=at,
        expires_at=None if fact.expires_at is None else parse_timestamp(fact.expires_at, "expires_at"),
        source_turns=tuple(t.id for t in sources),
    )


def _counted(summary: Document, attempts: int, spent: _Spent) -> dict[str, Any]:
    """The summary's counters with this run's attempts, tokens and seconds added, and the time of the run."""
    before = FormationBatch.of(summary)
    return {
        "formation_attempts": before.attempts + attempts,
        "formation_prompt_tokens": before.prompt_tokens + spent.prompt_tokens,
        "formation_eval_tokens": before.eval_tokens + spent.eval_tokens,
        "formation_seconds": round(before.seconds + spent.seconds, 3),
        "formation_at": format_timestamp(utc_now()),
    }


def _summary_doc(summary: Document, state: Mapping[str, object]) -> dict[str, Any]:
    """The summary written again (same id, text, vector and fields) with the formation keys ``state``."""
    meta = read_for_rewrite(DocType.SUMMARY, summary.id, summary.metadata, "summarise the window again")
    fields = meta.model_dump(by_alias=True, exclude_none=True)
    fields.update(state)
    doc = {**fields, "id": summary.id, "text": summary.text, "type": DocType.SUMMARY.value}
    if summary.embedding is not None:
        doc["embedding"] = summary.embedding
    return doc


def _one_line(text: str) -> str:
    return " ".join(text.split())


__all__ = ["CANDIDATE_FLOOR_Z", "Formation", "FormationBatch", "FormationReport", "FormationStopped"]
