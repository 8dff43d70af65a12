"""Listing memories for a browser: filtered by scope, tags, importance and status, in storage order or
newest first, one page at a time.

Storage order with filters Chroma can express (scope, tags, importance, a non-active status) is paged
by Chroma itself. Newest first, or the ``active`` status (which is also the *absence* of a status, and
Chroma's filters cannot match a missing key), need every matching memory's metadata: those are read
whole, filtered and sorted here, and the page is cut afterwards. Fine for the thousands of memories
one person's assistant holds; a store with millions would want a timestamp index in Chroma.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Literal

from brain.model.errors import ValidationError
from brain.model.schemas import INACTIVE_STATUSES, STATUSES, DocType, check_importance

if TYPE_CHECKING:
    from brain.model.results import Document
    from brain.store import Store

Order = Literal["stored", "newest"]
ORDERS: tuple[str, ...] = ("stored", "newest")
ACTIVE = "active"


def check_statuses(statuses: Iterable[str] | None) -> list[str]:
    """The distinct statuses asked for, each one of :data:`brain.model.schemas.STATUSES`."""
    wanted = list(dict.fromkeys(statuses or ()))
    bad = [s for s in wanted if s not in STATUSES]
    if bad:
        raise ValidationError.of("status", f"status must be one of {', '.join(STATUSES)}, got {bad[0]!r}")
    return wanted


def check_importances(values: Iterable[int] | None) -> list[int]:
    """The distinct importances asked for, each valid (:func:`brain.model.schemas.check_importance`)."""
    try:
        return list(dict.fromkeys(check_importance(v) for v in values or ()))
    except ValueError as exc:
        raise ValidationError.of("importance", str(exc)) from None


def check_order(order: str) -> str:
    if order not in ORDERS:
        raise ValidationError.of("order", f"order must be one of {', '.join(ORDERS)}, got {order!r}")
    return order


def status_of(metadata: Mapping[str, object]) -> str:
    """A memory's status as lists show it (no status at all is ``active``)."""
    return str(metadata.get("status") or ACTIVE)


def is_status(metadata: Mapping[str, object], statuses: Sequence[str]) -> bool:
    """Whether a memory's status is one of ``statuses``."""
    return status_of(metadata) in statuses


def newest_first(docs: Iterable[Document]) -> list[Document]:
    """Latest timestamp first; equal times by id, so that pages never overlap."""
    return sorted(docs, key=lambda d: (-float(d.metadata.get("ts_epoch") or 0.0), d.id))


def _filters(
    scopes: Sequence[str] | str | None,
    tags: Sequence[str],
    importance: Sequence[int],
    status: Sequence[str],
    history: bool,
) -> tuple[dict[str, object], list[str]]:
    """What Chroma matches (``where``) and the statuses wanted, checked; with no ``status``, the current ones."""
    importance, status = check_importances(importance), check_statuses(status)
    if not status and not history:
        status = [s for s in STATUSES if s not in INACTIVE_STATUSES]
    where: dict[str, object] = {}
    if scopes is not None:
        where["scope"] = scopes if isinstance(scopes, str) else list(scopes)
    if tags:
        where["tags"] = list(tags)
    if importance:
        where["importance"] = importance
    if status and ACTIVE not in status:
        where["status"] = status
    return where, status


def list_memories(
    store: Store,
    *,
    scopes: Sequence[str] | str | None = None,
    tags: Sequence[str] = (),
    importance: Sequence[int] = (),
    status: Sequence[str] = (),
    order: str = "stored",
    limit: int | None = None,
    offset: int | None = None,
    history: bool = False,
) -> list[Document]:
    """Memories in ``scopes`` (None: all) having every tag of ``tags``, an importance among ``importance``
    and a status among ``status``, in ``order``, from ``offset``, at most ``limit``. With no ``status``,
    the current ones: every status but those that retire a memory (superseded, retracted, archived), so a
    list never shows a replaced fact as if it held; ``history`` lists those too."""
    where, status = _filters(scopes, tags, importance, status, history)
    order = check_order(order)
    if order == "stored" and (not status or ACTIVE not in status):
        return store.get(type=DocType.MEMORY, where=where or None, limit=limit, offset=offset)
    docs = store.get(type=DocType.MEMORY, where=where or None)
    if status:
        docs = [d for d in docs if is_status(d.metadata, status)]
    if order == "newest":
        docs = newest_first(docs)
    start = offset or 0
    return docs[start:] if limit is None else docs[start : start + limit]


def count_memories(
    store: Store,
    *,
    scopes: Sequence[str] | str | None = None,
    tags: Sequence[str] = (),
    importance: Sequence[int] = (),
    status: Sequence[str] = (),
    history: bool = False,
) -> int:
    """How many memories :func:`list_memories` lists with the same filters, all pages together; counted by
    Chroma where its filters say it all, without reading a memory's text."""
    where, status = _filters(scopes, tags, importance, status, history)
    if not status or ACTIVE not in status:
        return store.count(DocType.MEMORY, where=where or None)
    return sum(is_status(d.metadata, status) for d in store.get(type=DocType.MEMORY, where=where or None))


__all__ = [
    "ORDERS",
    "Order",
    "check_importances",
    "check_order",
    "check_statuses",
    "count_memories",
    "list_memories",
    "newest_first",
    "status_of",
]
