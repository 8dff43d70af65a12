"""The settings, section by section: each class declares one section's fields (with their environment
variables, descriptions and ranges), and :class:`~brain.config.Settings` is all of them together. A part of
brain that reads one section can be typed with that section's class and still be given the whole
``Settings``: the type checker then keeps it to its own fields."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Literal

import pydantic
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from brain.config.sections import (
    SPECIALIST_BAND_DEFAULTS,
    SPECIALIST_CONFIDENCE_DEFAULTS,
    DocTypeList,
    SummarizerKind,
    api_setting,
    chat_setting,
    context_setting,
    default_embedder,
    default_summary_model,
    document_types,
    embedding_setting,
    knowledge_setting,
    mirror_setting,
    ranking_setting,
    specialists_setting,
    storage_setting,
)
from brain.model.provider_names import (
    DEFAULT_EMBED_BATCH_SIZE,
    DEFAULT_OLLAMA_EMBED_TIMEOUT,
    DEFAULT_OLLAMA_HOST,
    DEFAULT_QUERY_CACHE_SIZE,
)


class ContextFields(BaseModel):
    """Settings: what a chat request's context holds (RAG_*)."""

    rag_enabled: bool = context_setting(
        "RAG_ENABLED", True, "master switch: false gives every chat request an empty context"
    )
    enable_persona: bool = context_setting("RAG_ENABLE_PERSONA", True, "include the persona section")
    enable_faq: bool = context_setting(
        "RAG_ENABLE_FAQ", True, "include knowledge-base (FAQ) passages matching the message"
    )
    enable_memory: bool = context_setting("RAG_ENABLE_MEMORY", True, "include the best-ranked memories")
    enable_turn: bool = context_setting("RAG_ENABLE_TURN", True, "include the conversation's latest turns")
    enable_summary: bool = context_setting("RAG_ENABLE_SUMMARY", True, "include the conversation's summaries")
    enable_related_turns: bool = context_setting(
        "RAG_ENABLE_RELATED_TURNS",
        True,
        "include older turns of the conversation that match the message (hybrid dense + BM25 search)",
    )
    turn_top_k: int = context_setting("RAG_TURN_TOP_K", 4, "latest turns shown (count)", ge=1, le=20)
    related_turn_top_k: int = context_setting(
        "RAG_RELATED_TURN_TOP_K", 3, "older matching turns shown (count)", ge=1, le=20
    )
    faq_top_k: int = context_setting("RAG_FAQ_TOP_K", 2, "knowledge-base passages shown (count)", ge=1, le=10)
    memory_top_k: int = context_setting("RAG_MEMORY_TOP_K", 3, "memories shown (count)", ge=1, le=20)
    core_top_k: int = context_setting(
        "RAG_CORE_TOP_K",
        3,
        "facts about the entity always shown whatever the message (its own most important memories, "
        "importance first, then closeness to the message, then the newest; count; 0: none)",
        ge=0,
        le=20,
    )
    core_min_importance: int = context_setting(
        "RAG_CORE_MIN_IMPORTANCE", 4, "the importance a memory needs to be one of those always shown", ge=1, le=5
    )
    core_max_chars: int = context_setting(
        "RAG_CORE_MAX_CHARS",
        600,
        "budget of the always-shown facts in characters (about 150 tokens); a fact that does not fit is left to "
        "the relevance-ranked memories",
        ge=0,
        le=100_000,
    )
    summary_top_k: int = context_setting(
        "RAG_SUMMARY_TOP_K", 2, "summaries shown, most relevant first (count)", ge=1, le=10
    )
    context_max_chars: int = context_setting(
        "RAG_CONTEXT_MAX_CHARS",
        8000,
        "budget of the rendered context block in characters; whole items are dropped, lowest priority first",
        ge=200,
        le=1_000_000,
    )
    context_max_tokens: int = context_setting(
        "RAG_CONTEXT_MAX_TOKENS",
        0,
        "budget of the rendered context block in tokens (the local WordPiece tokenizer); 0: characters only",
        ge=0,
        le=1_000_000,
    )


class RankingFields(BaseModel):
    """Settings: how memories are ranked (RAG_*)."""

    memory_ranking: Literal["relevance", "reference"] = ranking_setting(
        "RAG_MEMORY_RANKING",
        "relevance",
        "relevance: the relevance gate (floor, margin) and the RAG_RELEVANCE_* weights, also a floor for the FAQ "
        "and summaries; reference: w_sim * similarity + w_imp * importance/5 + recency with the RAG_WEIGHT_* "
        "weights, every memory eligible",
    )
    relevance_floor: float | None = ranking_setting(
        "RAG_RELEVANCE_FLOOR",
        None,
        "the lowest relevance (similarity + w_lex * lexical match) a memory is shown at; unset: calibrated for "
        "the embedder (the mean similarity of unrelated message/fact pairs + RAG_RELEVANCE_FLOOR_Z standard "
        "deviations, stored with the collection)",
        example="0.51",
        ge=-1.0,
        le=6.0,
    )
    relevance_floor_z: float | None = ranking_setting(
        "RAG_RELEVANCE_FLOOR_Z",
        None,
        "the calibrated floor's distance above unrelated pairs' mean similarity (standard deviations); unset: "
        "the embedder's own (6 for local/minilm-l6-v2, 5 for local/multilingual-e5-small)",
        example="6",
        ge=0.0,
        le=20.0,
    )
    relevance_similarity_floor_z: float | None = ranking_setting(
        "RAG_RELEVANCE_SIMILARITY_FLOOR_Z",
        None,
        "the calibrated floor of FAQ entries and summaries, ranked by similarity alone (standard deviations above "
        "unrelated pairs' mean similarity; lower than a memory's, which has a lexical part); unset: the embedder's "
        "own (4 for local/minilm-l6-v2, 5.5 for local/multilingual-e5-small)",
        example="4",
        ge=0.0,
        le=20.0,
    )
    relevance_across_floor_z: float | None = ranking_setting(
        "RAG_RELEVANCE_ACROSS_FLOOR_Z",
        None,
        "the floor of a memory in another language than the message (told by py3langid), on its similarity "
        "alone, since no word can be shared: standard deviations above the mean similarity of unrelated pairs "
        "across languages (the calibration's translations); unset: the embedder's own (3 for "
        "local/use-multilingual-v3; none for the others, whose memories keep the one floor)",
        example="3",
        ge=0.0,
        le=20.0,
    )
    relevance_floor_importance: float = ranking_setting(
        "RAG_RELEVANCE_FLOOR_IMPORTANCE",
        0.15,
        "how much lower the floor is for an importance-5 memory than for an importance-1 one (a critical fact "
        "gets a lower bar; linear in between), for a memory sharing words (by stem prefix) with the message or the "
        "latest turns; in local/minilm-l6-v2's similarity units, scaled to another embedder's spread",
        ge=0.0,
        le=1.0,
    )
    relevance_first_person: bool = ranking_setting(
        "RAG_RELEVANCE_FIRST_PERSON",
        True,
        "a message in the first person (I, my, me) asked for an entity is about that entity: its own memories "
        "then need a lower floor, standing out above its other memories instead (mean similarity of those + "
        "2 standard deviations, and at least 1 above unrelated pairs' mean); false: one floor for every message",
    )
    relevance_margin: float | None = ranking_setting(
        "RAG_RELEVANCE_MARGIN",
        None,
        "how far below the best memory's relevance another may be and still be shown (standard deviations of "
        "unrelated pairs' similarity, as calibrated); unset: the embedder's own (3 for both local embedders)",
        example="3",
        ge=0.0,
        le=100.0,
    )
    relevance_lexical: float = ranking_setting(
        "RAG_RELEVANCE_LEXICAL",
        1.0,
        "w_lex: weight of the lexical match (BM25 over keywords / its largest value, 0..1) in a memory's relevance; "
        "in local/minilm-l6-v2's similarity units, scaled to another embedder's spread",
        ge=0.0,
        le=5.0,
    )
    relevance_importance: float = ranking_setting(
        "RAG_RELEVANCE_IMPORTANCE",
        0.1,
        "w_imp among relevant memories: weight of importance / 5 (0.1: importance 5 beats importance 1 at up to "
        "0.08 less relevance); scaled like RAG_RELEVANCE_LEXICAL",
        ge=0.0,
        le=1.0,
    )
    relevance_recency: float = ranking_setting(
        "RAG_RELEVANCE_RECENCY",
        0.05,
        "w_rec among relevant memories: weight of the recency decay; scaled like RAG_RELEVANCE_LEXICAL",
        ge=0.0,
        le=1.0,
    )
    weight_similarity: float = ranking_setting(
        "RAG_WEIGHT_SIMILARITY",
        0.5,
        "reference ranking: w_sim, weight of cosine similarity to the message",
        ge=0.0,
        le=1.0,
    )
    weight_importance: float = ranking_setting(
        "RAG_WEIGHT_IMPORTANCE", 0.5, "reference ranking: w_imp, weight of importance / 5", ge=0.0, le=1.0
    )
    weight_recency: float = ranking_setting(
        "RAG_WEIGHT_RECENCY", 0.1, "reference ranking: w_rec, weight of the recency decay", ge=0.0, le=1.0
    )
    recency_half_life_days: float = ranking_setting(
        "RAG_RECENCY_HALF_LIFE_DAYS", 30.0, "age at which the recency part halves (days)", gt=0.0, le=36500.0
    )
    recency_from: Literal["created", "last_used"] = ranking_setting(
        "RAG_RECENCY_FROM",
        "created",
        "what a memory's age counts from: created (when it was written) or last_used (when it was last "
        "retrieved; needs RAG_TRACK_ACCESS)",
    )
    track_access: bool = ranking_setting(
        "RAG_TRACK_ACCESS",
        False,
        "record when each memory is retrieved (its last_used), for RAG_RECENCY_FROM=last_used",
    )


class StorageFields(BaseModel):
    """Settings: where the data lives and how it is served."""

    # path settings: unset, they default to the project's (or the user-level) places; see the module docstring
    data_dir: Path = storage_setting(
        "BRAIN_DATA_DIR",
        Path("data"),
        "the data directory: the embedded store lives in `<dir>/chroma`, the mirror in `<dir>/mirror.db`",
    )
    chroma_url: str | None = storage_setting(
        "BRAIN_CHROMA_URL",
        None,
        "an http(s) URL of a Chroma server (`chroma run --path ./data/chroma --port 8000`); unset: the embedded "
        "store in BRAIN_DATA_DIR",
        example="http://127.0.0.1:8000",
    )
    collection: str = storage_setting(
        "BRAIN_COLLECTION", "conversations", "the Chroma collection of all five document types (3..512 characters)"
    )
    index_types: DocTypeList = storage_setting(
        "BRAIN_INDEX_TYPES",
        ("memory", "persona", "faq", "summary"),
        "document types ranked from the in-process exact index instead of Chroma's (comma-separated; "
        "memory is required)",
    )
    index_refresh_seconds: float = storage_setting(
        "BRAIN_INDEX_REFRESH_SECONDS",
        5.0,
        "how often the store checks for writes by another process and rebuilds its in-process state "
        "(seconds; 0: never)",
        ge=0.0,
        le=86400.0,
    )
    index_memory_mb: float = storage_setting(
        "BRAIN_INDEX_MEMORY_MB",
        256.0,
        "memory the in-process indexes may hold (MB): the global part always, and the parts of the entities "
        "served most recently while they fit; the least recently served are evicted first and read from "
        "Chroma again when asked for (about 3 KB per memory at 384 dimensions)",
        ge=1.0,
        le=1_048_576.0,
    )
    feed_interval_seconds: float = storage_setting(
        "BRAIN_FEED_INTERVAL_SECONDS",
        1.0,
        "with BRAIN_CHROMA_URL: how often each process applies other processes' writes from the change feed, on "
        "a read and in the background (seconds; 0: on every read, no background thread)",
        ge=0.0,
        le=3600.0,
    )
    feed_keep: int = storage_setting(
        "BRAIN_FEED_KEEP",
        10000,
        "with BRAIN_CHROMA_URL: change-feed records kept before older ones are compacted; a process further "
        "behind rebuilds its in-process state",
        ge=1000,
        le=10_000_000,
    )
    min_free_disk_mb: int = storage_setting(
        "BRAIN_MIN_FREE_DISK_MB",
        256,
        "writes are refused while the disk of the data directory (or the mirror) has less free space than this, "
        "before Chroma or SQLite meet a full disk; reads and health go on (MB; 0: never refused)",
        ge=0,
        le=10_000_000,
    )
    index_snapshot: bool = storage_setting(
        "BRAIN_INDEX_SNAPSHOT",
        True,
        "save the in-process indexes when the store closes and load them at the next start instead of reading "
        "the whole collection (ignored, and rebuilt, when they cannot be proven current)",
    )
    index_snapshot_path: Path | None = storage_setting(
        "BRAIN_INDEX_SNAPSHOT_PATH",
        None,
        "the index snapshot's file; unset: `<BRAIN_DATA_DIR>/index_snapshots/<BRAIN_COLLECTION>.npz`",
        example="data/index_snapshots/conversations.npz",
    )
    snapshot_key_dir: Path | None = storage_setting(
        "BRAIN_SNAPSHOT_KEY_DIR",
        None,
        "where the embedded store keeps the keys that sign its index snapshots (one 0600 file per store, in a 0700 "
        "directory); must be outside BRAIN_DATA_DIR, so that writing the data directory is not enough to forge a "
        "snapshot; unset: `$XDG_STATE_HOME/brain/snapshot-keys` (`~/.local/state/brain/snapshot-keys`)",
        example="~/.local/state/brain/snapshot-keys",
    )

    @property
    def indexed_types(self) -> tuple[str, ...]:
        """BRAIN_INDEX_TYPES (also when a caller's ``model_copy`` left it a comma-separated string)."""
        return tuple(document_types(self.index_types))


class KnowledgeFields(BaseModel):
    """Settings: knowledge base and persona."""

    chunk_window: int = knowledge_setting(
        "BRAIN_CHUNK_WINDOW",
        200,
        "knowledge-base chunk size in tokens of the embedder's tokenizer; must fit the embedder's input",
        ge=16,
        le=8192,
    )
    chunk_overlap: int = knowledge_setting(
        "BRAIN_CHUNK_OVERLAP", 40, "tokens shared by consecutive chunks; smaller than BRAIN_CHUNK_WINDOW", ge=0, le=4096
    )
    persona_path: Path = knowledge_setting(
        "BRAIN_PERSONA_PATH", Path("persona.md"), "the persona file `brain init` and start-up load"
    )


class EmbedderFields(BaseModel):
    """Settings: embedders."""

    embedder: str = embedding_setting(
        "BRAIN_EMBEDDER",
        default_embedder,
        "the embedding model as `provider/model`: `local/minilm-l6-v2` (in-process, English), "
        "`local/multilingual-e5-small` (in-process, about 100 languages), `local/use-multilingual-v3` (in-process, "
        "16 languages, a question found across languages), `ollama/<model>`, e.g. "
        "`ollama/nomic-embed-text`, or `openai/<model>` (on BRAIN_OPENAI_BASE_URL); `brain reindex` moves a store "
        "to another",
    )
    embed_batch_size: int = embedding_setting(
        "BRAIN_EMBED_BATCH_SIZE", DEFAULT_EMBED_BATCH_SIZE, "texts per embedding call (count)", ge=1, le=4096
    )
    query_cache_size: int = embedding_setting(
        "BRAIN_QUERY_CACHE_SIZE",
        DEFAULT_QUERY_CACHE_SIZE,
        "query embeddings kept in memory for repeated queries (entries; 0: off)",
        ge=0,
        le=1_000_000,
    )
    ollama_host: str = embedding_setting(
        "OLLAMA_HOST",
        DEFAULT_OLLAMA_HOST,
        "the Ollama server for ollama/ embedders, and for the summariser and formation with BRAIN_SUMMARIZER=ollama "
        "(URL)",
    )
    ollama_timeout: float = embedding_setting(
        "BRAIN_OLLAMA_TIMEOUT",
        DEFAULT_OLLAMA_EMBED_TIMEOUT,
        "time limit of one embedding request to Ollama (seconds)",
        gt=0.0,
        le=3600.0,
    )

    openai_base_url: str | None = embedding_setting(
        "BRAIN_OPENAI_BASE_URL",
        None,
        "an OpenAI-compatible API (llama.cpp's server, vLLM, LM Studio, Ollama's /v1, a hosted API): what "
        "BRAIN_SUMMARIZER=openai (summaries, formation) and openai/<model> embedders ask, and the proxy's "
        "BRAIN_CHAT_UPSTREAM unless that is set (URL ending in /v1)",
        example="http://127.0.0.1:8080/v1",
    )
    openai_api_key: pydantic.SecretStr | None = embedding_setting(
        "BRAIN_OPENAI_API_KEY",
        None,
        "the bearer key sent to BRAIN_OPENAI_BASE_URL (never logged, echoed or stored), and to the proxy's upstream "
        "when that is the same server and BRAIN_CHAT_UPSTREAM_KEY is unset; unset: none is sent",
        example="",
    )


class MirrorFields(BaseModel):
    """Settings: the Engram-compatible SQLite mirror."""

    mirror_enabled: bool = mirror_setting(
        "BRAIN_MIRROR_ENABLED", True, "keep the SQLite mirror in step with every write to the store"
    )
    mirror_path: Path | None = mirror_setting(
        "BRAIN_MIRROR_PATH", None, "the mirror's file; unset: `<BRAIN_DATA_DIR>/mirror.db`", example="data/mirror.db"
    )
    # memories and the conversations (turns, summaries) exist nowhere else; persona and FAQ come from files
    mirror_types: DocTypeList = mirror_setting(
        "BRAIN_MIRROR_TYPES",
        ("memory", "turn", "summary"),
        "document types the mirror keeps (comma-separated; memory is required)",
    )
    mirror_batch_size: int = mirror_setting(
        "BRAIN_MIRROR_BATCH_SIZE", 500, "rows per mirror transaction in sync and backfill (rows)", ge=100, le=1000
    )
    owner_id: str | None = mirror_setting(
        "BRAIN_OWNER_ID", None, "owner.id of PAM exports; unset: a UUID derived from the store's location", min_length=1
    )

    @property
    def mirrored_types(self) -> tuple[str, ...]:
        """BRAIN_MIRROR_TYPES (also when a caller's ``model_copy`` left it a comma-separated string)."""
        return tuple(document_types(self.mirror_types))


class SummaryFields(BaseModel):
    """Settings: summaries and consolidation."""

    summary_every_n: int = chat_setting(
        "BRAIN_SUMMARY_EVERY_N",
        5,
        "exchanges (user + assistant turns) per conversation summary (count)",
        also=("RAG_SUMMARY_EVERY_N",),
        ge=1,
        le=1000,
    )
    summarizer: SummarizerKind = chat_setting(
        "BRAIN_SUMMARIZER",
        "ollama",
        "who writes summaries and forms memories: ollama (the chat model BRAIN_SUMMARY_MODEL on OLLAMA_HOST), "
        "openai (that model on the OpenAI-compatible BRAIN_OPENAI_BASE_URL) or extractive (no model); the "
        "extractive summariser is always the fallback",
    )
    summary_model: str = chat_setting(
        "BRAIN_SUMMARY_MODEL",
        default_summary_model,
        "the chat model that writes summaries, on the server BRAIN_SUMMARIZER names (a model name)",
    )
    summary_retries: int = chat_setting(
        "BRAIN_SUMMARY_RETRIES", 3, "retries of a failed model summary (count)", ge=0, le=20
    )
    summary_backoff_seconds: float = chat_setting(
        "BRAIN_SUMMARY_BACKOFF_SECONDS",
        1.0,
        "first back-off between retries, doubled each retry (seconds)",
        ge=0.0,
        le=600.0,
    )
    summary_timeout: float = chat_setting(
        "BRAIN_SUMMARY_TIMEOUT", 120.0, "time limit of one request to the summary model (seconds)", gt=0.0, le=3600.0
    )
    summary_deadline_seconds: float = chat_setting(
        "BRAIN_SUMMARY_DEADLINE_SECONDS",
        60.0,
        "time limit of one model summary, every attempt, retry and back-off included; then the extractive "
        "fallback (seconds)",
        gt=0.0,
        le=3600.0,
    )
    summary_cooldown_seconds: float = chat_setting(
        "BRAIN_SUMMARY_COOLDOWN_SECONDS",
        30.0,
        "after a fallback summary, use the fallback at once for this long, and after a formation batch found "
        "the model unreachable, fail the next batches at once for this long, so no retries queue up while "
        "Ollama is down (seconds)",
        ge=0.0,
        le=86400.0,
    )
    formation: bool = chat_setting(
        "BRAIN_FORMATION",
        False,
        "form memories from conversations: after each summary, the model BRAIN_FORMATION_MODEL picks the durable "
        "facts of the summary's turns; off, with health saying why, when BRAIN_SUMMARIZER=extractive (no model)",
    )
    formation_model: str = chat_setting(
        "BRAIN_FORMATION_MODEL",
        default_summary_model,
        "the chat model that forms memories, on the server BRAIN_SUMMARIZER names (a model name)",
    )
    formation_retries: int = chat_setting(
        "BRAIN_FORMATION_RETRIES",
        3,
        "retries of a failed formation batch, the back-off doubling from BRAIN_SUMMARY_BACKOFF_SECONDS (count)",
        ge=0,
        le=20,
    )
    formation_timeout: float = chat_setting(
        "BRAIN_FORMATION_TIMEOUT",
        120.0,
        "time limit of one request to the formation model (seconds)",
        gt=0.0,
        le=3600.0,
    )
    formation_candidates: int = chat_setting(
        "BRAIN_FORMATION_CANDIDATES",
        8,
        "existing memories shown to the formation model, so it can say that a "
        "new fact is the same, an update or a contradiction (count)",
        ge=0,
        le=50,
    )
    consolidate_threshold: float = chat_setting(
        "BRAIN_CONSOLIDATE_THRESHOLD",
        0.92,
        "consolidation merges same-scope memories whose cosine similarity is above this",
        gt=0.0,
        le=1.0,
    )


class SpecialistFields(BaseModel):
    """Settings: the specialist registry (semantic discovery of tools)."""

    # score = w_c*canonical + w_p*predicates + w_o*objects + w_l*lexical
    #         - penalty * max(0, similarity to the closest `not` example - margin)
    specialists_path: Path = specialists_setting(
        "BRAIN_SPECIALISTS_PATH",
        Path("config/specialists.yaml"),
        "the YAML file of specialists that registration reads",
    )
    specialists_collection: str = specialists_setting(
        "BRAIN_SPECIALISTS_COLLECTION",
        "specialists",
        "the Chroma collection of the specialists' vectors",
        min_length=3,
        max_length=512,
    )
    specialist_weight_canonical: float = specialists_setting(
        "BRAIN_SPECIALIST_WEIGHT_CANONICAL",
        0.5,
        "w_c: weight of similarity to the canonical description",
        ge=0.0,
        le=1.0,
    )
    specialist_weight_predicates: float = specialists_setting(
        "BRAIN_SPECIALIST_WEIGHT_PREDICATES",
        0.3,
        "w_p: weight of similarity to the predicates (what it does)",
        ge=0.0,
        le=1.0,
    )
    specialist_weight_objects: float = specialists_setting(
        "BRAIN_SPECIALIST_WEIGHT_OBJECTS",
        0.2,
        "w_o: weight of similarity to the objects (what it acts on)",
        ge=0.0,
        le=1.0,
    )
    specialist_weight_lexical: float = specialists_setting(
        "BRAIN_SPECIALIST_WEIGHT_LEXICAL",
        0.2,
        "w_l: weight of the specialist's share of the request's BM25 evidence (0: the dense formula only)",
        ge=0.0,
        le=1.0,
    )
    specialist_not_penalty: float = specialists_setting(
        "BRAIN_SPECIALIST_NOT_PENALTY", 1.0, "penalty factor for similarity to a `not` example", ge=0.0, le=10.0
    )
    specialist_not_margin: float = specialists_setting(
        "BRAIN_SPECIALIST_NOT_MARGIN",
        0.5,
        "similarity to a `not` example below which no penalty applies (in local/minilm-l6-v2's units: another "
        "embedder's similarities are mapped into them first)",
        ge=-1.0,
        le=1.0,
    )
    # confidence = 1 / (1 + exp(-(intercept + c_s*score + c_l*ln(min(words, 40))))), a logistic fit on the
    # development sets; the bands are thresholds on it. Unset, each comes from the embedder's entry of
    # SPECIALIST_EMBEDDER_DEFAULTS (see bench/SPECIALISTS_RESULTS.md)
    specialist_confidence_intercept: float | None = specialists_setting(
        "BRAIN_SPECIALIST_CONFIDENCE_INTERCEPT",
        None,
        "intercept of a match's confidence (logistic in the score and the request's length); unset: the "
        f"embedder's (local/minilm-l6-v2: {SPECIALIST_CONFIDENCE_DEFAULTS['intercept']})",
        example=str(SPECIALIST_CONFIDENCE_DEFAULTS["intercept"]),
        ge=-100.0,
        le=100.0,
    )
    specialist_confidence_score: float | None = specialists_setting(
        "BRAIN_SPECIALIST_CONFIDENCE_SCORE",
        None,
        "c_s: coefficient of the match's score in its confidence; unset: the embedder's "
        f"(local/minilm-l6-v2: {SPECIALIST_CONFIDENCE_DEFAULTS['score']})",
        example=str(SPECIALIST_CONFIDENCE_DEFAULTS["score"]),
        ge=0.0,
        le=100.0,
    )
    specialist_confidence_length: float | None = specialists_setting(
        "BRAIN_SPECIALIST_CONFIDENCE_LENGTH",
        None,
        "c_l: coefficient of ln(words in the request, at most 40) in a match's confidence (0: length ignored); "
        f"unset: the embedder's (local/minilm-l6-v2: {SPECIALIST_CONFIDENCE_DEFAULTS['length']})",
        example=str(SPECIALIST_CONFIDENCE_DEFAULTS["length"]),
        ge=-100.0,
        le=100.0,
    )
    specialist_band_strong: float | None = specialists_setting(
        "BRAIN_SPECIALIST_BAND_STRONG",
        None,
        "confidence above which a match is strong (at least BRAIN_SPECIALIST_BAND_GOOD); unset: the embedder's "
        f"(local/minilm-l6-v2: {SPECIALIST_BAND_DEFAULTS['strong']})",
        example=str(SPECIALIST_BAND_DEFAULTS["strong"]),
        ge=0.0,
        le=1.0,
    )
    specialist_band_good: float | None = specialists_setting(
        "BRAIN_SPECIALIST_BAND_GOOD",
        None,
        "lowest confidence of a good match (at least BRAIN_SPECIALIST_BAND_POSSIBLE); unset: the embedder's "
        f"(local/minilm-l6-v2: {SPECIALIST_BAND_DEFAULTS['good']})",
        example=str(SPECIALIST_BAND_DEFAULTS["good"]),
        ge=0.0,
        le=1.0,
    )
    specialist_band_possible: float | None = specialists_setting(
        "BRAIN_SPECIALIST_BAND_POSSIBLE",
        None,
        "lowest confidence of a possible match; below it, weak (no specialist); unset: the embedder's "
        f"(local/minilm-l6-v2: {SPECIALIST_BAND_DEFAULTS['possible']})",
        example=str(SPECIALIST_BAND_DEFAULTS["possible"]),
        ge=0.0,
        le=1.0,
    )
    specialist_cache_ttl_seconds: float = specialists_setting(
        "BRAIN_SPECIALIST_CACHE_TTL_SECONDS",
        300.0,
        "how long a request's matches are cached (seconds; 0: off)",
        ge=0.0,
        le=86400.0,
    )
    specialist_cache_size: int = specialists_setting(
        "BRAIN_SPECIALIST_CACHE_SIZE", 1024, "requests whose matches are cached (entries; 0: off)", ge=0, le=1_000_000
    )


class ApiFields(BaseModel):
    """Settings: the HTTP API (brain serve)."""

    api_host: str = api_setting(
        "BRAIN_API_HOST", "127.0.0.1", "the address `brain serve` binds; a non-loopback address needs a token"
    )
    api_port: int = api_setting("BRAIN_API_PORT", 5000, "the port `brain serve` listens on", ge=1, le=65535)
    api_token: pydantic.SecretStr | None = api_setting(
        "BRAIN_API_TOKEN",
        None,
        "the admin token, at least 16 printable characters, e.g. from `python -c 'import secrets; "
        "print(secrets.token_urlsafe(32))'`; empty or unset: no admin token",
        example="",
    )
    api_tokens_file: Path | None = api_setting(
        "BRAIN_API_TOKENS_FILE",
        None,
        "a file of entity-bound (and further admin) tokens, one `<entity name or admin> <token>` per line",
        example="config/api-tokens",
    )
    api_max_body_bytes: int = api_setting(
        "BRAIN_API_MAX_BODY_BYTES", 1_000_000, "the largest request body accepted (bytes)", ge=1024, le=1_000_000_000
    )
    import_max_bytes: int = api_setting(
        "BRAIN_IMPORT_MAX_BYTES",
        512 << 20,
        "the largest import archive `POST /v1/import` takes (bytes; `brain import` beside the server sends one): "
        "streamed to a temporary file, not held in memory, so it has its own bound above BRAIN_API_MAX_BODY_BYTES",
        ge=1024,
        le=64 << 30,
    )
    api_mcp: bool = api_setting(
        "BRAIN_API_MCP", False, "also serve MCP (streamable HTTP) at `/mcp` of `brain serve`, behind the same tokens"
    )
    chat_upstream: str | None = api_setting(
        "BRAIN_CHAT_UPSTREAM",
        None,
        "the OpenAI-compatible chat API `brain serve` proxies with memory (`/v1/chat/completions`, `/v1/models`, "
        "Ollama's `/api/chat`), e.g. http://127.0.0.1:11434/v1 for Ollama; unset: BRAIN_OPENAI_BASE_URL, and "
        "with neither set the proxy routes answer 503",
        example="http://127.0.0.1:11434/v1",
    )
    chat_upstream_key: pydantic.SecretStr | None = api_setting(
        "BRAIN_CHAT_UPSTREAM_KEY",
        None,
        "the bearer key sent to BRAIN_CHAT_UPSTREAM (never logged, echoed or stored); unset: BRAIN_OPENAI_API_KEY "
        "when the upstream is BRAIN_OPENAI_BASE_URL, else none is sent",
        example="",
    )
    chat_upstream_timeout: float = api_setting(
        "BRAIN_CHAT_UPSTREAM_TIMEOUT",
        120.0,
        "how long the proxy waits for the upstream to connect, answer, or send the next chunk of a stream "
        "(seconds); past it: 504, or a stream ended with an error event",
        gt=0.0,
        le=3600.0,
    )
    chat_upstream_max_bytes: int = api_setting(
        "BRAIN_CHAT_UPSTREAM_MAX_BYTES",
        4_000_000,
        "the longest answer the proxy reads from the upstream (bytes, plain or streamed); past it: 502, or a stream "
        "ended with an error event, and nothing recorded",
        ge=1024,
        le=1_000_000_000,
    )
    api_workers: int = api_setting(
        "BRAIN_API_WORKERS",
        1,
        "processes `brain serve` runs (uvicorn workers); more than 1 needs BRAIN_CHROMA_URL (the embedded store is "
        "one process's)",
        ge=1,
        le=64,
    )


#: every section, in the order Settings lists their fields
SECTIONS: tuple[type[BaseModel], ...] = (
    ContextFields,
    RankingFields,
    StorageFields,
    KnowledgeFields,
    EmbedderFields,
    MirrorFields,
    SummaryFields,
    SpecialistFields,
    ApiFields,
)


@cache
def all_fields() -> dict[str, FieldInfo]:
    """Every setting's field, in the order :class:`~brain.config.Settings` lists them (shared: read only)."""
    return {name: info for section in SECTIONS for name, info in section.model_fields.items()}
