"""Chroma access: the client, the guard that turns Chroma's failures into brain's errors, the
collection binding to one embedder, and :class:`ChromaAccess`, which pages reads and chunks writes to
Chroma's maximum batch size. Nothing here knows document types or brain's rules."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

import numpy as np

from brain.config import Settings
from brain.model.errors import (
    Backoff,
    BrainError,
    EmbeddingModelMismatch,
    StoreError,
    StoreNotFound,
    StoreUnavailable,
    retry,
)
from brain.providers.embeddings import Embedder

if TYPE_CHECKING:
    from chromadb.api import ClientAPI
    from chromadb.api.models.Collection import Collection

log = logging.getLogger(__name__)

#: the most documents one paged read asks for (below Chroma's max batch size when that is larger):
#: one unbounded get over tens of thousands of documents fails in Chroma's SQLite layer
PAGE = 2000


def open_client(settings: Settings, *, create: bool = True) -> ClientAPI:
    """An embedded ``PersistentClient`` under the data dir, or an ``HttpClient`` when ``BRAIN_CHROMA_URL`` is set.

    With ``create=False`` a data directory without a store raises :class:`StoreNotFound` instead of
    being created."""
    import chromadb

    chroma_settings = chromadb.config.Settings(anonymized_telemetry=False)
    if settings.chroma_url:
        url = urlparse(settings.chroma_url)
        port = url.port or (443 if url.scheme == "https" else 8000)
        assert url.hostname is not None  # Settings refuses a BRAIN_CHROMA_URL without a host
        try:
            return chromadb.HttpClient(
                host=url.hostname, port=port, ssl=url.scheme == "https", settings=chroma_settings
            )
        except Exception as exc:  # chromadb raises plain ValueError/ConnectionError/httpx errors here
            raise StoreUnavailable(
                f"cannot reach the Chroma server at {settings.chroma_url} ({exc}); start it with "
                f"`chroma run --path ./data/chroma --port {port}` or unset BRAIN_CHROMA_URL to use the embedded store"
            ) from exc
    # absolute: chromadb shares one client per path *string*, so "data/chroma" opened from two working
    # directories (or once relative, once absolute) would otherwise get the wrong store
    path = (settings.data_dir / "chroma").resolve()
    if not create and not settings.has_embedded_store():
        raise missing_store(settings)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreUnavailable(f"cannot create the data directory {path}: {exc}; set BRAIN_DATA_DIR") from exc
    return chromadb.PersistentClient(path=str(path), settings=chroma_settings)


def missing_store(settings: Settings) -> StoreNotFound:
    """The error for a store that does not exist: where brain looked and how to make one."""
    make = "create it with `brain init` (or `brain ingest PATH`)"
    if settings.chroma_url:
        return StoreNotFound(
            f"the Chroma server at {settings.chroma_url} has no collection {settings.collection!r}; "
            f"{make}, or set BRAIN_COLLECTION to an existing one"
        )
    return StoreNotFound(
        f"there is no brain store in {settings.data_dir} (the data directory, from {settings.origin('data_dir')}); "
        f"{make}, or point --data-dir or BRAIN_DATA_DIR at an existing store"
    )


try:  # the HTTP client's transport errors (chromadb's HttpClient uses httpx)
    import httpx

    _UNREACHABLE: tuple[type[BaseException], ...] = (ConnectionError, httpx.TransportError)
except ImportError:  # pragma: no cover - httpx comes with chromadb
    _UNREACHABLE = (ConnectionError,)


#: a Chroma server reading a vector segment while its first files are still being written fails with
#: this, and the same read a moment later succeeds (seen with several processes writing one new collection)
_TRANSIENT_READ_ERRORS = ("Nothing found on disk",)
_READS = frozenset({"get", "query", "count", "peek"})
#: a read that failed transiently is tried again after 0.05, 0.1, 0.2, 0.4 and 0.8 s
READ_RETRIES = Backoff(first=0.05, retries=5)
_NO_RETRY = Backoff(first=0.0, retries=0)


def _transient(exc: BaseException) -> bool:
    return any(m in str(exc) for m in _TRANSIENT_READ_ERRORS)


def embedding_function(embedder: Embedder) -> Any:
    """``embedder`` behind Chroma's ``EmbeddingFunction`` protocol: a collection opened with it embeds
    ``query_texts`` (as queries) and documents written without vectors (as documents) with the store's
    own model, so direct Chroma calls land in the same vector space as brain's writes."""
    from chromadb.api.types import Documents, EmbeddingFunction

    class StoreEmbeddingFunction(EmbeddingFunction[Documents]):
        def __init__(self, embedder: Embedder):  # noqa: D107 - Chroma inspects the signature
            self.embedder = embedder

        def __call__(self, input: Sequence[str]) -> list[np.ndarray]:
            return list(self.embedder.embed_documents(list(input)))

        def embed_query(self, input: Sequence[str]) -> list[np.ndarray]:
            return list(self.embedder.embed_queries(list(input)))

        @staticmethod
        def name() -> str:
            return "brain"

        def get_config(self) -> dict[str, object]:
            return {"embedder": self.embedder.name}

        @staticmethod
        def build_from_config(config: Mapping[str, object]) -> Any:
            raise NotImplementedError("brain's embedding function is bound by the store that opens the collection")

        def is_legacy(self) -> bool:
            return False

    return StoreEmbeddingFunction(embedder)


class GuardedCollection:
    """The Chroma collection, except that its failures are brain's errors: losing the server raises
    :class:`StoreUnavailable`, anything else Chroma raises :class:`StoreError` naming the call. A read
    that fails with one of Chroma's transient internal errors is tried again a few times first.

    With ``friendly_where`` a ``where`` may be written as :func:`brain.rules.filters.to_chroma_where` reads it
    (several keys and-ed, ``tags`` as ``$contains``, ISO times): the reference's filters, such as
    ``{"type": "faq", "topic": "specialists"}``, which Chroma itself refuses."""

    def __init__(self, collection: Any, where: str, *, friendly_where: bool = False):
        from chromadb.errors import InternalError, NotFoundError

        self._collection = collection
        self._where = where
        self._internal, self._gone = InternalError, NotFoundError
        self._friendly_where = friendly_where

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._collection, name)
        if not callable(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            if self._friendly_where and isinstance(kwargs.get("where"), dict):
                from brain.rules.filters import to_chroma_where

                kwargs["where"] = to_chroma_where(kwargs["where"])

            def noted(exc: BaseException, _: int, wait: float) -> None:
                log.info("collection.%s() on %s: %s; trying again in %.2f s", name, self._where, exc, wait)

            try:
                return retry(
                    lambda: attr(*args, **kwargs),
                    READ_RETRIES if name in _READS else _NO_RETRY,
                    on=self._internal,
                    when=_transient,
                    before_wait=noted,
                )
            except self._internal as exc:
                raise self._translate(name, exc) from exc
            except _UNREACHABLE as exc:
                raise StoreUnavailable(
                    f"the Chroma store at {self._where} is unreachable ({exc}); check that `chroma run` is up"
                ) from exc
            except BrainError:
                raise
            except Exception as exc:  # chromadb's own classes, and the ValueErrors of its client-side checks
                raise self._translate(name, exc) from exc

        return call

    def _translate(self, name: str, exc: Exception) -> StoreError:
        what = f"collection.{name}() on the Chroma store at {self._where}"
        if isinstance(exc, self._internal):
            return StoreError(
                f"Chroma failed internally in {what}: {exc}. Check the disk space and the Chroma server's log; "
                f"if every call fails, the collection is damaged: move its directory aside and rebuild it with "
                f"`brain restore --from-mirror`"
            )
        if isinstance(exc, self._gone):
            return StoreError(
                f"{what}: the collection no longer exists ({exc}); was it deleted by another "
                f"process? Restart to create it again"
            )
        return StoreError(f"Chroma refused {what}: {type(exc).__name__}: {exc}")


def open_cosine_collection(
    client: ClientAPI,
    name: str,
    embedder: Embedder,
    *,
    switch: str | Callable[[dict[str, object], int], str],
    rename: str,
    **meta_on_create: object,
) -> Collection:
    """Open (or create) collection ``name`` for ``embedder``'s vectors, in the cosine space.

    A new collection records the embedder's name and dimension; an existing one must record the same
    embedder, since vectors of two models never mix. ``switch`` and ``rename`` finish the error
    messages (what to change when the embedder differs, or a function of the collection's metadata
    and document count that says it; how to pick another collection)."""
    try:
        col = client.get_or_create_collection(
            name, configuration={"hnsw": {"space": "cosine"}}, embedding_function=None
        )
    except Exception as exc:  # connection or server errors from chromadb
        raise StoreUnavailable(f"cannot open Chroma collection {name!r}: {exc}") from exc
    meta = dict(col.metadata or {})
    space = ((getattr(col, "configuration", None) or {}).get("hnsw") or {}).get("space", "cosine")
    if space != "cosine":
        raise EmbeddingModelMismatch(f"collection {name!r} uses the {space!r} distance; brain needs 'cosine': {rename}")
    recorded = meta.get("embedder")
    if recorded is None:
        if col.count() > 0:
            raise EmbeddingModelMismatch(
                f"collection {name!r} already holds records but names no embedder, so their vector space is "
                f"unknown; {rename}"
            )
        meta.update(embedder=embedder.name, dimension=int(embedder.dimension), **meta_on_create)
        col.modify(metadata=meta)
    elif recorded != embedder.name:
        if col.count() == 0 and _fixed_dimension(col) in (None, int(embedder.dimension)):
            # nothing was ever stored with the recorded embedder (e.g. its first write failed because
            # Ollama was down): the empty collection takes the current one
            log.info("collection %r is empty: re-bound from embedder %s to %s", name, recorded, embedder.name)
            meta.update(embedder=embedder.name, dimension=int(embedder.dimension))
            col.modify(metadata=meta)
            return col
        advice = switch(meta, col.count()) if callable(switch) else switch
        raise EmbeddingModelMismatch(
            f"collection {name!r} was built with embedder {recorded} ({meta.get('dimension')}-d) but BRAIN_EMBEDDER "
            f"is {embedder.name}; vectors from different models cannot be mixed. {advice}"
        )
    return col


def switch_advice(settings: Settings, recorded: Mapping[str, object], embedder: Embedder, count: int) -> str:
    """What to do when the store's collection records another embedder than the configured one: keep
    the recorded one, or re-index for the configured one, with the command. No time is promised here: a
    model's pace depends on the machine and the texts, so the run measures it on its first batch."""
    return (
        f"Set BRAIN_EMBEDDER={recorded.get('embedder')} to keep the store as it is, or re-index it for "
        f"{embedder.name} with `brain reindex --embedder {embedder.name}` ({count} documents to embed, fewer "
        f"for memories whose {embedder.name} vectors the mirror keeps; the run times its first batch and says "
        f"how long the rest takes; the store keeps serving meanwhile)"
    )


def _fixed_dimension(col: object) -> int | None:
    """The vector dimension Chroma fixed for a collection with its first record (it stays after every
    record is deleted), or None while it has never held one."""
    dimension = getattr(getattr(col, "_model", None), "dimension", None)
    return int(dimension) if isinstance(dimension, int) else None


class ChromaAccess:
    """One Chroma collection, read in pages and written in chunks of at most ``max_batch_size``.

    ``client`` is the Chroma client, for opening sibling collections (:meth:`sibling`);
    ``collection`` is the guarded collection, for single calls."""

    def __init__(self, client: ClientAPI, collection: Any, where: str):
        self.client = client
        self.collection = collection
        self.where = where
        self.max_batch_size = int(client.get_max_batch_size())

    def sibling(
        self, name: str, embedder: Embedder, *, switch: str, rename: str, **meta_on_create: object
    ) -> ChromaAccess:
        """Another collection of the same client (opened or created, bound to ``embedder``; see
        :func:`open_cosine_collection`), guarded and paged like this one."""
        col = open_cosine_collection(self.client, name, embedder, switch=switch, rename=rename, **meta_on_create)
        return ChromaAccess(self.client, GuardedCollection(col, self.where), self.where)

    def pages(
        self,
        where: Mapping[str, object] | None = None,
        include: Sequence[str] = (),
        limit: int | None = None,
        offset: int | None = None,
        *,
        page_size: int = PAGE,
    ) -> Iterator[dict[str, Any]]:
        """Every document matching ``where`` (all when None), as Chroma result dicts of one page each
        (of at most ``page_size`` documents and Chroma's max batch size)."""
        page_size = max(1, min(self.max_batch_size, page_size))
        start = offset or 0
        remaining = limit
        while remaining is None or remaining > 0:
            size = page_size if remaining is None else min(page_size, remaining)
            page = self.collection.get(where=where, include=list(include), limit=size, offset=start)
            got = len(page["ids"])
            if got:
                yield page
            if got < size:
                return
            start += got
            if remaining is not None:
                remaining -= got

    def get_all(self, where: Mapping[str, object] | None = None, include: Sequence[str] = ()) -> dict[str, list[Any]]:
        """:meth:`pages` joined into one result dict (``ids`` and each included field)."""
        return merge_pages(list(self.pages(where, include)), ["ids", *include])

    def ids(self, where: Mapping[str, object] | None = None) -> list[str]:
        return [i for page in self.pages(where) for i in page["ids"]]

    def get_ids(
        self, ids: Sequence[str], include: Sequence[str], where: dict[str, object] | None = None
    ) -> list[dict[str, Any]]:
        """Pages of the given ids (missing ids are absent), one Chroma get per max batch."""
        ids = list(ids)
        return [
            self.collection.get(ids=ids[s : s + self.max_batch_size], where=where, include=list(include))
            for s in range(0, len(ids), self.max_batch_size)
        ]

    def upsert(
        self,
        ids: Sequence[str],
        documents: Sequence[str | None],
        metadatas: Sequence[dict[str, object]],
        embeddings: np.ndarray | Sequence[object],
    ) -> None:
        """Chroma's upserts, one per max batch (a None document: a row stored without one, written back
        as it was). Not atomic: a failure leaves the chunks before it
        written (the store's write pipeline undoes them from its intent)."""
        for s in range(0, len(ids), self.max_batch_size):
            e = s + self.max_batch_size
            self.collection.upsert(
                ids=list(ids[s:e]),
                documents=list(documents[s:e]),
                metadatas=list(metadatas[s:e]),
                embeddings=embeddings[s:e],
            )

    def update_metadata(self, ids: Sequence[str], metadatas: Sequence[dict[str, object]]) -> None:
        """Chroma's metadata updates (merged into what is stored), one per max batch."""
        for s in range(0, len(ids), self.max_batch_size):
            e = s + self.max_batch_size
            self.collection.update(ids=list(ids[s:e]), metadatas=list(metadatas[s:e]))

    def delete(self, ids: Sequence[str]) -> None:
        """Chroma's deletes, one per max batch (not atomic, like :meth:`upsert`)."""
        for s in range(0, len(ids), self.max_batch_size):
            self.collection.delete(ids=list(ids[s : s + self.max_batch_size]))

    def count(self) -> int:
        return int(self.collection.count())


def merge_pages(
    pages: list[dict[str, Any]], keys: Sequence[str] = ("ids", "documents", "metadatas", "embeddings")
) -> dict[str, list[Any]]:
    merged: dict[str, list[object]] = {}
    for key in keys:
        parts = (page.get(key) for page in pages)
        merged[key] = [x for part in parts if part is not None for x in part]  # embeddings are arrays: no `or []`
    return merged


__all__ = [
    "PAGE",
    "ChromaAccess",
    "GuardedCollection",
    "merge_pages",
    "missing_store",
    "open_client",
    "open_cosine_collection",
    "switch_advice",
]
