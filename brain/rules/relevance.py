"""The relevance floor and margin of an embedder, calibrated on data that ships with brain.

Cosine similarities mean different things for different models: MiniLM puts unrelated sentences near
0.04, other models near 0.4. So the floor is not a number but a rule applied to each embedder:

    floor  = mean + z * sd        margin = m * sd

(a memory's relevance, its similarity plus its weighted lexical match, must reach the floor, lowered by
``RAG_RELEVANCE_FLOOR_IMPORTANCE`` for important memories; a FAQ entry's or summary's similarity must
reach mean + ``RAG_RELEVANCE_SIMILARITY_FLOOR_Z`` sd; unset, each is the embedder's own, :data:`TUNINGS`)
where ``mean`` and ``sd`` are the mean and standard deviation of the similarities between messages and
facts that do not answer them: the ``pairs`` of ``brain/rules/data/relevance_calibration.json`` (messages a
user might send and the remembered fact that answers each), every message against every other
message's fact. ``z`` is ``RAG_RELEVANCE_FLOOR_Z`` and ``m`` is ``RAG_RELEVANCE_MARGIN``; both were
chosen on LoCoMo conversations (bench/RELEVANCE_RESULTS.md says which).

A store computes its embedder's calibration once and keeps it in its collection's metadata under
:data:`METADATA_KEY`, with the embedder's name and a digest of the data; a re-index builds a new
collection for the new embedder, which is calibrated again on first use.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from brain.model.errors import CalibrationError
from brain.model.provider_names import E5_EMBEDDER, MINILM_EMBEDDER
from brain.model.vectors import unit_rows
from brain.providers.embeddings import Embedder

#: the labelled messages and facts the calibration reads
CALIBRATION_FILE = Path(__file__).resolve().parent / "data" / "relevance_calibration.json"
#: where a collection keeps its embedder's calibration (a JSON string: Chroma metadata values are flat)
METADATA_KEY = "relevance_calibration"


@dataclass(frozen=True)
class EmbedderTuning:
    """The distances above an embedder's unrelated pairs chosen on labelled data, in standard deviations:
    ``floor_z`` for a memory's relevance (``RAG_RELEVANCE_FLOOR_Z``), ``similarity_floor_z`` for a FAQ entry's
    or summary's similarity (``RAG_RELEVANCE_SIMILARITY_FLOOR_Z``), ``margin`` below the best memory
    (``RAG_RELEVANCE_MARGIN``). The calibration makes them comparable across models but not equal: the tails
    of the unrelated pairs differ (bench/RELEVANCE_RESULTS.md says which data chose each)."""

    floor_z: float
    similarity_floor_z: float
    margin: float


#: each local embedder's choices; another (an Ollama model) gets MiniLM's, in its own standard deviations
TUNINGS = {
    # LoCoMo conv-26 and conv-41 (floor, margin); the FAQ messages of bench/bench_relevance.py (FAQ floor)
    MINILM_EMBEDDER: EmbedderTuning(floor_z=6.0, similarity_floor_z=4.0, margin=3.0),
    # the same data measured with e5, and the tuning people of tests/fixtures/multilingual_memories.json: its
    # unrelated pairs reach further up (a FAQ entry at 4 sd answered a knee injury); a memory floor at 5 sd
    # finds what 6 sd finds on LoCoMo with more foreign sections still empty than MiniLM's (0.86 vs 0.79),
    # and lets a question in another language reach its memory more often (4 sd: more foreign memories)
    E5_EMBEDDER: EmbedderTuning(floor_z=5.0, similarity_floor_z=5.5, margin=3.0),
}


def tuning_for(embedder: str) -> EmbedderTuning:
    """The choices for the embedder ``embedder`` (``provider/model``) names."""
    return TUNINGS.get(embedder, TUNINGS[MINILM_EMBEDDER])


#: the first-person rule (``RAG_RELEVANCE_FIRST_PERSON``): an entity's own memory may be shown for a message in
#: the first person when it stands this many standard deviations above the entity's other memories' mean
#: relevance to the message, and this many above unrelated pairs' mean (:func:`brain.rules.ranking.own_floor`).
#: Chosen on the tuning people of tests/fixtures/first_person_facts.json with local/minilm-l6-v2: the right
#: fact is the person's closest for 25 of 25 questions there but its similarity has a median of 0.32 (the
#: floor is 0.51); 2 sd above the others' mean, and at least 1 sd above unrelated pairs, finds it for 23 of 25
#: and shows nothing for 20 of 25 asked of another person (held out: 22 and 21 of 25; bench/PEOPLE_RESULTS.md).
FIRST_PERSON_FLOOR_Z = 1.0
FIRST_PERSON_STAND_OUT_Z = 2.0

#: the standard deviation of unrelated pairs' similarity, on the shipped pairs, of the embedder the
#: ``RAG_RELEVANCE_*`` weights were chosen with (local/minilm-l6-v2): the unit those weights are in
REFERENCE_SD = 0.0797


@dataclass(frozen=True)
class Calibration:
    """One embedder's similarities of unrelated message/fact pairs: their ``mean`` and ``sd``, and of
    the related pairs their ``related_median`` (for reports). ``data`` is the digest of the file read."""

    embedder: str
    mean: float
    sd: float
    related_median: float
    pairs: int
    data: str

    def floor(self, z: float) -> float:
        return self.mean + z * self.sd

    def margin(self, m: float) -> float:
        return m * self.sd

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: Any) -> Calibration | None:
        """The calibration a collection recorded, or None when it holds none or an unreadable one."""
        try:
            data = json.loads(text)
            cal = cls(**{key: data[key] for key in cls.__dataclass_fields__})
        except (TypeError, ValueError, KeyError):
            return None
        numbers = (cal.mean, cal.sd, cal.related_median)
        if not all(isinstance(v, (int, float)) and math.isfinite(v) for v in numbers) or cal.sd <= 0:
            return None
        return cal


def calibration_pairs(path: Path = CALIBRATION_FILE) -> tuple[list[str], list[str], str]:
    """(messages, facts, digest of the file)."""
    try:
        raw = path.read_bytes()
        pairs = json.loads(raw)["pairs"]
        messages = [str(p["message"]) for p in pairs]
        facts = [str(p["fact"]) for p in pairs]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise CalibrationError(
            f"cannot read the relevance calibration data {path}: {exc}; reinstall brain, or set "
            f"RAG_RELEVANCE_FLOOR and RAG_MEMORY_RANKING=reference to rank without it"
        ) from None
    if len(pairs) < 3:
        raise CalibrationError(f"{path} holds {len(pairs)} pairs; the calibration needs at least 3")
    return messages, facts, hashlib.sha256(raw).hexdigest()[:16]


def calibrate(embedder: Embedder, path: Path = CALIBRATION_FILE) -> Calibration:
    """Embed the calibration data with ``embedder`` and measure its unrelated pairs."""
    messages, facts, digest = calibration_pairs(path)
    queries = np.stack([np.asarray(embedder.embed_query(m), dtype=np.float64) for m in messages])
    docs = np.asarray(embedder.embed_documents(facts), dtype=np.float64)
    queries, docs = unit_rows(queries, np.float64), unit_rows(docs, np.float64)
    sims = queries @ docs.T
    unrelated = sims[~np.eye(len(messages), dtype=bool)]
    return Calibration(
        embedder=embedder.name,
        mean=float(unrelated.mean()),
        sd=float(unrelated.std()),
        related_median=float(np.median(np.diag(sims))),
        pairs=len(messages),
        data=digest,
    )


def recorded(metadata: dict[str, Any] | None, embedder: Embedder, path: Path = CALIBRATION_FILE) -> Calibration | None:
    """The calibration ``metadata`` (a collection's) holds for ``embedder`` and the current data, if any."""
    cal = Calibration.from_json((metadata or {}).get(METADATA_KEY))
    if cal is None or cal.embedder != embedder.name or cal.data != calibration_pairs(path)[2]:
        return None
    return cal


__all__ = [
    "CALIBRATION_FILE",
    "METADATA_KEY",
    "Calibration",
    "CalibrationError",
    "calibrate",
    "calibration_pairs",
    "recorded",
]


def spread_scale(calibration: Calibration) -> float:
    """How much narrower than the reference embedder's this embedder's similarities spread (1.0 for the
    reference; multilingual-e5-small about 0.24): a weight added to a similarity (a lexical match, an
    importance) is multiplied by it so that it moves a memory as many standard deviations as it was chosen
    to. Two decimals, so that measuring the same embedder again on other hardware gives the same ranking."""
    return round(calibration.sd / REFERENCE_SD, 2)
