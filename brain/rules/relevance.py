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
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from brain.model.errors import CalibrationError
from brain.model.provider_names import E5_EMBEDDER, MINILM_EMBEDDER, USE_EMBEDDER
from brain.model.vectors import unit_rows
from brain.providers.embeddings import Embedder

#: the labelled messages and facts the calibration reads
CALIBRATION_FILE = Path(__file__).resolve().parent / "data" / "relevance_calibration.json"
#: the same pairs in ten other languages, for the unrelated pairs across languages
TRANSLATIONS_FILE = Path(__file__).resolve().parent / "data" / "relevance_calibration_translations.json"
#: where a collection keeps its embedder's calibration (a JSON string: Chroma metadata values are flat)
METADATA_KEY = "relevance_calibration"


@dataclass(frozen=True)
class EmbedderTuning:
    """The distances above an embedder's unrelated pairs chosen on labelled data, in standard deviations:
    ``floor_z`` for a memory's relevance (``RAG_RELEVANCE_FLOOR_Z``), ``similarity_floor_z`` for a FAQ entry's
    or summary's similarity (``RAG_RELEVANCE_SIMILARITY_FLOOR_Z``), ``margin`` below the best memory
    (``RAG_RELEVANCE_MARGIN``). The calibration makes them comparable across models but not equal: the tails
    of the unrelated pairs differ (bench/RELEVANCE_RESULTS.md says which data chose each).

    ``across_floor_z``: for a memory in another language than its message, the floor on its similarity alone
    (no word can be shared, so the lexical part cannot count for it), in standard deviations of the unrelated
    pairs across languages (``RAG_RELEVANCE_ACROSS_FLOOR_Z``); None: such a memory has the usual floor, and the
    calibration reads no translations."""

    floor_z: float
    similarity_floor_z: float
    margin: float
    across_floor_z: float | None = None


#: each local embedder's choices; another (an Ollama model) gets MiniLM's, in its own standard deviations
TUNINGS = {
    # LoCoMo conv-26 and conv-41 (floor, margin); the FAQ messages of bench/bench_relevance.py (FAQ floor)
    MINILM_EMBEDDER: EmbedderTuning(floor_z=6.0, similarity_floor_z=4.0, margin=3.0),
    # the same data measured with e5, and the tuning people of tests/fixtures/multilingual_memories.json: its
    # unrelated pairs reach further up (a FAQ entry at 4 sd answered a knee injury); a memory floor at 5 sd
    # finds what 6 sd finds on LoCoMo with more foreign sections still empty than MiniLM's (0.86 vs 0.79),
    # and lets a question in another language reach its memory more often (4 sd: more foreign memories)
    E5_EMBEDDER: EmbedderTuning(floor_z=5.0, similarity_floor_z=5.5, margin=3.0),
    # within one language MiniLM's choices, in its own sd; across languages a floor on similarity alone
    USE_EMBEDDER: EmbedderTuning(floor_z=6.0, similarity_floor_z=4.0, margin=3.0, across_floor_z=3.0),
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
    the related pairs their ``related_median`` (for reports). ``data`` is the digest of the files read.

    ``across_mean`` and ``across_sd`` are the same for pairs across languages (a message in one language, a
    fact in another, every direction of the eleven; None when not measured): the background of the floor a
    memory in another language than its message gets (:meth:`across_floor`)."""

    embedder: str
    mean: float
    sd: float
    related_median: float
    pairs: int
    data: str
    across_mean: float | None = None
    across_sd: float | None = None

    def floor(self, z: float) -> float:
        return self.mean + z * self.sd

    def across_floor(self, z: float) -> float | None:
        """The similarity a memory in another language than its message must reach, ``z`` standard
        deviations above the unrelated pairs across languages (None when they were not measured)."""
        if self.across_mean is None or self.across_sd is None:
            return None
        return self.across_mean + z * self.across_sd

    def margin(self, m: float) -> float:
        return m * self.sd

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: Any) -> Calibration | None:
        """The calibration a collection recorded, or None when it holds none or an unreadable one."""
        optional = {"across_mean", "across_sd"}  # absent from what earlier versions recorded
        try:
            data = json.loads(text)
            cal = cls(**{key: data.get(key) if key in optional else data[key] for key in cls.__dataclass_fields__})
        except (TypeError, ValueError, KeyError, AttributeError):
            return None
        numbers = (cal.mean, cal.sd, cal.related_median)
        if not all(isinstance(v, (int, float)) and math.isfinite(v) for v in numbers) or cal.sd <= 0:
            return None
        across = (cal.across_mean, cal.across_sd)
        if any(v is not None and not (isinstance(v, (int, float)) and math.isfinite(v)) for v in across):
            return None
        return cal


def _unreadable(path: Path, exc: Exception) -> CalibrationError:
    return CalibrationError(
        f"cannot read the relevance calibration data {path}: {exc}; reinstall brain, or set "
        f"RAG_RELEVANCE_FLOOR and RAG_MEMORY_RANKING=reference to rank without it"
    )


def calibration_pairs(path: Path = CALIBRATION_FILE) -> tuple[list[str], list[str], str]:
    """(messages, facts, digest of the file)."""
    try:
        raw = path.read_bytes()
        pairs = json.loads(raw)["pairs"]
        messages = [str(p["message"]) for p in pairs]
        facts = [str(p["fact"]) for p in pairs]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise _unreadable(path, exc) from None
    if len(pairs) < 3:
        raise CalibrationError(f"{path} holds {len(pairs)} pairs; the calibration needs at least 3")
    return messages, facts, hashlib.sha256(raw).hexdigest()[:16]


def translated_pairs(count: int, path: Path = TRANSLATIONS_FILE) -> tuple[dict[str, tuple[list[str], list[str]]], str]:
    """({language: (messages, facts)}, digest of the file): the ``count`` pairs in each other language."""
    try:
        raw = path.read_bytes()
        entries = json.loads(raw)["pairs"]
        languages = sorted(entries[0])
        out = {
            code: ([str(e[code]["message"]) for e in entries], [str(e[code]["fact"]) for e in entries])
            for code in languages
        }
    except (OSError, ValueError, KeyError, TypeError, IndexError) as exc:
        raise _unreadable(path, exc) from None
    if len(entries) != count:
        raise CalibrationError(f"{path} translates {len(entries)} pairs; the calibration data holds {count}")
    return out, hashlib.sha256(raw).hexdigest()[:16]


def data_digest(across: bool = False, path: Path = CALIBRATION_FILE, translations: Path = TRANSLATIONS_FILE) -> str:
    """The digest a calibration records of the data it read: the pairs', and with ``across`` their
    translations' too."""
    messages, _, digest = calibration_pairs(path)
    return f"{digest}+{translated_pairs(len(messages), translations)[1]}" if across else digest


#: calibrations of the in-process models, by (name, data): they are deterministic, and a store, a test or a
#: benchmark opening many stores with one of them need not embed the data again
_measured: dict[tuple[str, str], Calibration] = {}


def calibrate(
    embedder: Embedder, path: Path = CALIBRATION_FILE, translations: Path = TRANSLATIONS_FILE, *, across: bool = False
) -> Calibration:
    """Embed the calibration data with ``embedder`` and measure its unrelated pairs in English, and with
    ``across`` across languages too (each language's messages against every other language's facts, English
    included: ten times the texts, so only for an embedder whose tuning has a floor across languages)."""
    messages, facts, digest = calibration_pairs(path)
    by_language, translations_digest = translated_pairs(len(messages), translations) if across else ({}, "")
    data = f"{digest}+{translations_digest}" if across else digest
    memo = (embedder.name, data)
    if embedder.name.startswith("local/") and memo in _measured:
        return _measured[memo]
    texts = {"en": (messages, facts), **by_language}
    # English one message at a time, as searches embed them (and the query cache keeps them)
    queries = {
        "en": unit_rows(np.stack([np.asarray(embedder.embed_query(m), dtype=np.float64) for m in messages]), np.float64)
    }
    queries |= {
        code: unit_rows(np.asarray(embedder.embed_queries(m), dtype=np.float64), np.float64)
        for code, (m, _) in by_language.items()
    }
    docs = {
        code: unit_rows(np.asarray(embedder.embed_documents(f), dtype=np.float64), np.float64)
        for code, (_, f) in texts.items()
    }
    off_diagonal = ~np.eye(len(messages), dtype=bool)
    sims = queries["en"] @ docs["en"].T
    unrelated = sims[off_diagonal]
    pairs_across = [(queries[a] @ docs[b].T)[off_diagonal] for a in texts for b in texts if a != b]
    background = np.concatenate(pairs_across) if pairs_across else None
    cal = Calibration(
        embedder=embedder.name,
        mean=float(unrelated.mean()),
        sd=float(unrelated.std()),
        related_median=float(np.median(np.diag(sims))),
        pairs=len(messages),
        data=data,
        across_mean=None if background is None else float(background.mean()),
        across_sd=None if background is None else float(background.std()),
    )
    if embedder.name.startswith("local/"):
        _measured[memo] = cal
    return cal


def recorded(
    metadata: Mapping[str, object] | None, embedder: Embedder, path: Path = CALIBRATION_FILE, *, across: bool = False
) -> Calibration | None:
    """The calibration ``metadata`` (a collection's) holds for ``embedder`` and the current data (with
    ``across``, the translations too), if any."""
    cal = Calibration.from_json((metadata or {}).get(METADATA_KEY))
    if cal is None or cal.embedder != embedder.name or cal.data != data_digest(across, path):
        return None
    return cal


__all__ = [
    "CALIBRATION_FILE",
    "TRANSLATIONS_FILE",
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
