"""Every :class:`~brain.model.errors.BrainError` as the HTTP API sends it, and back: one table, read by the
server's handlers (:mod:`brain.shells.web.error_responses`, the proxy) and by the served client
(:func:`brain.ops.served.error_of`), so that a caller beside a server gets the very class a caller on the store
itself gets.

Each class has its own (status, kind); the status is what a plain HTTP client acts on (422: fix the input, 503:
try again or fix what the message names), the kind says which of brain's errors it was. A class the table does
not name is sent as its nearest ancestor that it does name.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from brain.model.errors import (
    BrainError,
    CalibrationError,
    ConfigError,
    Conflict,
    ConversationOwned,
    DiskSpaceLow,
    EmbedderError,
    EmbedderUnavailable,
    EmbeddingModelMismatch,
    EmbeddingProtocolError,
    ExtractorError,
    ExtractorUnavailable,
    FilterError,
    Forbidden,
    FormationAnswerError,
    MirrorCorrupt,
    NotFound,
    Problem,
    ReindexError,
    RestoreUnfinished,
    StoreError,
    StoreLocked,
    StoreLooksLost,
    StoreNotFound,
    StoreUnavailable,
    SummarizerError,
    SummarizerUnavailable,
    UnsupportedModality,
    UpstreamError,
    UpstreamRefused,
    UpstreamTimeout,
    UpstreamTooLarge,
    UpstreamUnreachable,
    ValidationError,
)


@dataclass(frozen=True)
class WireError:
    """How one error class travels: its HTTP ``status`` and its ``kind`` (the body's ``"error"``)."""

    error: type[BrainError]
    status: int
    kind: str


#: every class the API may send; the statuses stay within those the routes document (400, 403, 404, 409,
#: 422, 502, 503, 504), so a new class needs no route's documentation changed
WIRE_ERRORS: tuple[WireError, ...] = (
    WireError(BrainError, 400, "bad_request"),
    WireError(ConfigError, 503, "not_configured"),
    WireError(ValidationError, 422, "validation_error"),
    WireError(FilterError, 422, "invalid_filter"),
    WireError(FormationAnswerError, 422, "invalid_formation_answer"),
    WireError(Conflict, 409, "conflict"),
    WireError(EmbeddingProtocolError, 422, "embedding_protocol_error"),
    WireError(EmbedderError, 503, "embedder_error"),
    WireError(EmbedderUnavailable, 503, "embedder_unavailable"),
    WireError(UnsupportedModality, 422, "unsupported_modality"),
    WireError(EmbeddingModelMismatch, 503, "embedding_model_mismatch"),
    WireError(CalibrationError, 503, "calibration_unreadable"),
    WireError(ReindexError, 400, "reindex_refused"),
    WireError(SummarizerError, 503, "summarizer_error"),
    WireError(SummarizerUnavailable, 503, "summarizer_unavailable"),
    WireError(ExtractorError, 503, "extractor_error"),
    WireError(ExtractorUnavailable, 503, "extractor_unavailable"),
    WireError(UpstreamError, 502, "upstream_error"),
    WireError(UpstreamUnreachable, 502, "upstream_unreachable"),
    WireError(UpstreamTimeout, 504, "upstream_timeout"),
    WireError(UpstreamRefused, 502, "upstream_refused"),
    WireError(UpstreamTooLarge, 502, "upstream_too_large"),
    WireError(StoreUnavailable, 503, "store_unavailable"),
    WireError(StoreNotFound, 503, "store_not_found"),
    WireError(StoreLocked, 503, "store_locked"),
    WireError(StoreError, 503, "store_error"),
    WireError(DiskSpaceLow, 503, "insufficient_storage"),  # a refused write: nothing was written, reads go on
    WireError(MirrorCorrupt, 503, "mirror_corrupt"),
    WireError(StoreLooksLost, 409, "store_looks_lost"),
    WireError(RestoreUnfinished, 409, "restore_unfinished"),
    WireError(Forbidden, 403, "forbidden"),
    WireError(ConversationOwned, 403, "conversation_owned"),
    WireError(NotFound, 404, "not_found"),
)

_BY_CLASS = {w.error: w for w in WIRE_ERRORS}
_BY_KIND = {w.kind: w for w in WIRE_ERRORS}

#: the kinds of what the HTTP layer itself refuses, before any of brain's code runs
HTTP_KINDS = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    413: "too_large",
}


def wire_of(error: BrainError | type[BrainError]) -> WireError:
    """The table's row for ``error``'s class, or for its nearest ancestor the table names."""
    cls = error if isinstance(error, type) else type(error)
    for klass in cls.__mro__:
        if klass in _BY_CLASS:
            return _BY_CLASS[klass]
    return _BY_CLASS[BrainError]


def body_of(error: BrainError) -> dict[str, object]:
    """The JSON body an error is sent as: ``error`` (its kind), ``message`` and, for invalid input, ``problems``."""
    body: dict[str, object] = {"error": wire_of(error).kind, "message": str(error)}
    if isinstance(error, ValidationError) and error.problems:
        body["problems"] = [p.to_dict() for p in error.problems]
    return body


def error_for(status: int, kind: str, message: str, problems: Iterable[Mapping[str, object]] = ()) -> BrainError | None:
    """The error a response of ``status`` with ``kind`` stands for, built from its message (and problems);
    None when the table has no such kind at that status."""
    wire = _BY_KIND.get(kind)
    if wire is None or wire.status != status:
        return None
    return rebuilt(wire.error, message, [Problem.of(p) for p in problems if isinstance(p, Mapping)])


def rebuilt(error: type[BrainError], message: str, problems: Iterable[Problem] = ()) -> BrainError:
    """An instance of ``error`` carrying ``message`` as sent: built without its constructor, which for some
    classes (DiskSpaceLow, MirrorCorrupt) writes the message from fields a response does not carry; those
    fields keep their class defaults."""
    exc = error.__new__(error)
    Exception.__init__(exc, message)
    if isinstance(exc, ValidationError):
        exc.problems = list(problems)
    return exc


__all__ = ["HTTP_KINDS", "WIRE_ERRORS", "WireError", "body_of", "error_for", "rebuilt", "wire_of"]
