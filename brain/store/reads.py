"""Reading documents by id and filter: Chroma's pages turned into :class:`~brain.model.results.Document`
lists, with the type and scope checks done here when Chroma would do them slowly."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from typing import Any

import numpy as np

from brain.model.results import Document
from brain.model.schemas import GLOBAL_SCOPE, DocType, from_chroma, model_for
from brain.rules.filters import to_chroma_where
from brain.store.chroma import ChromaAccess, merge_pages


def get_documents(
    chroma: ChromaAccess,
    ids: Sequence[str] | None,
    *,
    where: dict[str, object] | None,
    doc_type: str | None,
    limit: int | None,
    offset: int | None,
    include_embeddings: bool,
    scopes: Collection[str] | None,
) -> list[Document]:
    """Documents by id and/or filter (ids keep their order; missing ids are skipped); with ``scopes``,
    only documents in those scopes."""
    include = ["documents", "metadatas"] + (["embeddings"] if include_embeddings else [])
    pages: Iterable[dict[str, object]]
    if ids is not None:
        ids = list(ids)
        found = pages_of_ids(chroma, ids, where, doc_type, include)
        if scopes is not None:
            found = [keep_scopes(page, scopes) for page in found]
        if limit is not None or offset is not None:
            found = [_slice_page(merge_pages(found), offset or 0, limit)]
        pages = found
    else:
        pages = chroma.pages(to_chroma_where(where, type=doc_type, scope=scopes), include, limit, offset)
    docs = [doc for page in pages for doc in page_documents(page)]
    if ids is not None:
        order = {i: n for n, i in enumerate(ids)}
        docs.sort(key=lambda doc: order.get(doc.id, len(order)))
    return docs


def page_documents(page: dict[str, Any]) -> list[Document]:
    """One Chroma result page (with documents and metadatas; embeddings when included) as Documents."""
    vectors = page.get("embeddings")
    if vectors is None:
        vectors = [None] * len(page["ids"])
    return [
        Document(
            id=i,
            text=d or "",
            metadata=from_chroma(m),
            embedding=None if e is None else np.asarray(e, dtype=np.float32),
        )
        for i, d, m, e in zip(page["ids"], page["documents"], page["metadatas"], vectors)
    ]


def find_ids(
    chroma: ChromaAccess,
    ids: Sequence[str] | None,
    *,
    where: dict[str, object] | None,
    doc_type: str | None,
    scopes: Collection[str] | None,
) -> list[str]:
    """The stored ids among ``ids`` (or all) that match ``where``, ``doc_type`` and ``scopes``."""
    if ids is None:
        return chroma.ids(to_chroma_where(where, type=doc_type, scope=scopes))
    by_type = where is None and doc_type is not None
    include = ["metadatas"] if by_type or scopes is not None else []
    pages = pages_of_ids(chroma, list(ids), where, doc_type, include)
    if scopes is not None:
        pages = [keep_scopes(page, scopes) for page in pages]
    return [i for page in pages for i in page["ids"]]


def pages_of_ids(
    chroma: ChromaAccess, ids: list[str], where: dict[str, object] | None, doc_type: str | None, include: list[str]
) -> list[dict[str, Any]]:
    """Pages of the given ids. A type alone is checked here, not by Chroma: Chroma applies a
    ``where`` by scanning metadata, which costs about 100 ms at 100k documents even for one id."""
    by_type = where is None and doc_type is not None
    pages = chroma.get_ids(ids, include, where=None if by_type else to_chroma_where(where, type=doc_type))
    if by_type:
        pages = [_keep_rows(page, lambda m: m.get("type") == doc_type) for page in pages]
    return pages


def keep_scopes(page: dict[str, object], scopes: Collection[str]) -> dict[str, object]:
    """``page`` without the documents outside ``scopes`` (a document without a scope is global)."""
    return _keep_rows(page, lambda m: m.get("scope", GLOBAL_SCOPE) in scopes)


def _keep_rows(page: dict[str, Any], keep_meta: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    keep = [n for n, m in enumerate(page.get("metadatas") or []) if keep_meta(m or {})]
    out = dict(page)
    for key in ("ids", "documents", "metadatas", "embeddings"):
        value = page.get(key)
        if value is not None:
            out[key] = [value[n] for n in keep]
    return out


def _slice_page(page: dict[str, Any], offset: int, limit: int | None) -> dict[str, Any]:
    end = None if limit is None else offset + limit
    return {key: value[offset:end] for key, value in page.items()}


def type_value(doc_type: str | DocType | None) -> str | None:
    """A document type's name (None stays None); raises for unknown types."""
    if doc_type is None:
        return None
    model_for(doc_type)
    return doc_type.value if isinstance(doc_type, DocType) else doc_type


__all__ = ["find_ids", "get_documents", "keep_scopes", "page_documents", "pages_of_ids", "type_value"]
