"""A store that a running ``brain serve`` holds, reached through its HTTP API.

Embedded Chroma is single-process: while ``brain serve`` has the data directory open (:mod:`brain.store.locking`),
a second process must not open it. The server records its address in the lock file, so a command run
beside it finds it there (:class:`~brain.model.errors.StoreLocked` carries it) and sends its reads and memory
writes to the server instead: :class:`ServedBrain`, :class:`ServedStore` and :class:`ServedChat` answer the
calls the CLI's read commands, ``health``, ``memory add``/``rm`` and ``memory extract`` make, each one request
to a route that makes the same library call (:mod:`brain.shells.api.routes.operator`, ``/v1/docs``,
``/v1/memories``, the conversation routes and their ``extract``, health and its ``?stats=true``), and hand back
the same result types. Anything else is :class:`~brain.model.errors.StoreLocked` naming the server,
never a second opening of the directory.

The admin token (``BRAIN_API_TOKEN``), when the server has one, comes from the same settings.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import httpx

from brain.config import Settings
from brain.model.errors import (
    BrainError,
    ConfigError,
    Forbidden,
    NotFound,
    Problem,
    StoreError,
    StoreLocked,
    StoreUnavailable,
    ValidationError,
)
from brain.model.results import Document, Hit, MemoryHit
from brain.model.schemas import DocType
from brain.rules.memories import check_as_of_search

if TYPE_CHECKING:
    from brain.features.chat.formation import FormationReport

#: seconds a request to the server may take (a search embeds the query; a first request may load the model)
TIMEOUT = 120.0


class ServedStore:
    """The part of :class:`~brain.store.RagStore` the CLI's forwarded commands use, over HTTP."""

    def __init__(self, brain: ServedBrain):
        self._brain = brain
        self.settings = brain.settings

    def get(
        self,
        ids: str | Sequence[str] | None = None,
        *,
        where: dict[str, Any] | None = None,
        type: str | DocType | None = None,
        limit: int | None = None,
        offset: int | None = None,
        entity: str | None = None,
    ) -> list[Document]:
        params: dict[str, Any] = {"ids": [ids] if isinstance(ids, str) else list(ids or [])}
        if entity is not None:
            params["entity"] = entity
        if where:
            params["where"] = json.dumps(where)
        if type is not None:
            params["type"] = DocType(type).value
        if limit is not None:
            params["limit"] = limit
        if offset:
            params["offset"] = offset
        body = self._brain.request("GET", "/v1/docs", params=params)
        return [_document(d) for d in body["docs"]]

    def get_one(self, doc_id: str) -> Document:
        docs = self.get([doc_id])
        if not docs:
            raise NotFound(f"no document with id {doc_id!r}")
        return docs[0]

    def upsert_memory(
        self, text: str, scope: str | None = None, importance: int = 3, tags: Iterable[str] | None = None
    ) -> str:
        metadata: dict[str, Any] = {"importance": importance, "tags": list(tags or [])}
        if scope is not None:
            metadata["scope"] = scope
        body = self._brain.request("POST", "/v1/docs", json={"text": text, "type": "memory", "metadata": metadata})
        return body["ids"][0]

    def delete(self, ids: Sequence[str], *, type: str | DocType | None = None) -> int:
        if type is None or DocType(type) is not DocType.MEMORY:
            raise self._brain.needs_the_store("deleting documents other than memories")
        for doc_id in ids:
            self._brain.request("DELETE", f"/v1/memories/{doc_id}")
        return len(ids)

    def recent_turns(self, conversation_id: str, k: int | None = None) -> list[Document]:
        params = {"k": k} if k is not None else {}
        try:
            body = self._brain.request("GET", f"/v1/conversations/{conversation_id}/turns", params=params)
        except NotFound:  # the admin sees every conversation: not found is none recorded
            return []
        return [_document(d) for d in body["turns"]]

    def stats(self) -> dict[str, Any]:
        return self._brain.stats()

    def __getattr__(self, name: str) -> Any:
        raise self._brain.needs_the_store(f"RagStore.{name}")


class ServedChat:
    """The part of :class:`~brain.features.chat.ChatMemory` the CLI's forwarded commands use: memory formation
    run by the server (``POST /v1/conversations/{id}/extract``), so it writes with the server's own model."""

    def __init__(self, brain: ServedBrain):
        self._brain = brain

    def extract_memories(self, conversation_id: str | None = None, *, again: bool = False) -> FormationReport:
        """One conversation's, or each conversation's in turn, as the server reports them, summed."""
        from brain.features.chat.formation import FormationBatch, FormationReport

        ids = [conversation_id] if conversation_id is not None else self._conversations()
        total = FormationReport()
        for conversation in ids:
            # no client time limit: the server's model calls have theirs (BRAIN_FORMATION_TIMEOUT, retries)
            body = self._brain.request(
                "POST",
                f"/v1/conversations/{conversation}/extract",
                params={"again": "true"} if again else {},
                timeout=None,
            )
            total.batches += [FormationBatch(**batch) for batch in body["batches"]]
            for key in (
                "done",
                "failed",
                "waiting",
                "added",
                "merged",
                "updated",
                "contradicted",
                "prompt_tokens",
                "eval_tokens",
                "seconds",
            ):
                setattr(total, key, getattr(total, key) + body[key])
        return total

    def _conversations(self) -> list[str]:
        ids: list[str] = []
        while True:
            page = self._brain.request("GET", "/v1/conversations", params={"limit": 1000, "offset": len(ids)})
            ids += [c["conversation_id"] for c in page["conversations"]]
            if len(page["conversations"]) < 1000:
                return ids

    def __getattr__(self, name: str) -> Any:
        raise self._brain.needs_the_store(f"ChatMemory.{name}")


class ServedBrain:
    """The part of :class:`~brain.app.core.Brain` the CLI's forwarded commands use, over the HTTP API of the
    ``brain serve`` that holds the data directory (``locked``: the error that said so). Close it."""

    def __init__(self, settings: Settings, locked: StoreLocked):
        if locked.server_url is None:
            raise locked
        self.settings = settings
        self.url = locked.server_url
        self.locked = locked
        token = settings.api_token.get_secret_value() if settings.api_token is not None else None
        self._http = httpx.Client(
            base_url=self.url, timeout=TIMEOUT, headers={"Authorization": f"Bearer {token}"} if token else {}
        )
        self.store = ServedStore(self)
        self.chat = ServedChat(self)

    def search(
        self,
        query: str,
        *,
        type: str | DocType | None = None,
        k: int | None = None,
        entity: str | None = None,
        as_of: str | None = None,
    ) -> list[Hit | MemoryHit]:
        doc_type = None if type is None else DocType(type).value
        check_as_of_search(doc_type, as_of)
        # what was held true then is the memory search's to answer; everything else is /v1/search's
        path, params = (
            ("/v1/search", {"type": doc_type}) if as_of is None else ("/v1/memories/search", {"as_of": as_of})
        )
        params.update(q=query, k=k, entity=entity)
        params = {key: value for key, value in params.items() if value is not None}
        return [_hit(h) for h in self.request("GET", path, params=params)["results"]]

    def stats(self) -> dict[str, Any]:
        """The server's figures (:meth:`Brain.stats <brain.app.core.Brain.stats>`), from health's ``?stats=true``."""
        report = self.request("GET", "/v1/health", params={"stats": "true"})
        if "stats" not in report:  # the store is down, or the token is not the admin's
            raise StoreUnavailable(
                f"the server at {self.url} gave no figures: health says "
                f"{report.get('status')!r}; `brain stats` needs BRAIN_API_TOKEN, the admin token"
            )
        return report["stats"]

    def health(self, *, detail: bool = False, verify: bool = False) -> dict[str, Any]:
        """The server's ``GET /v1/health`` (its figures need the admin token): the report of
        :meth:`Brain.health <brain.app.core.Brain.health>`, also when it says the store is unavailable (503)."""
        response = self._send("GET", "/v1/health", params={"verify": "true"} if verify else {})
        if response.status_code not in (200, 503):
            raise _error(response, self.url)
        report = response.json()
        report.pop("version", None)
        return report

    def needs_the_store(self, what: str) -> StoreLocked:
        return StoreLocked(
            f"{what} needs the store itself, and `brain serve` (process {self.locked.holder}) holds "
            f"it, serving {self.url}: stop the server first, or use its HTTP API ({self.url}/docs)",
            holder=self.locked.holder,
            server_url=self.url,
        )

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        """The JSON answer of one request; the server's error as the BrainError it was."""
        response = self._send(method, path, **kwargs)
        if response.status_code < 400:
            return response.json()
        raise _error(response, self.url)

    def _send(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            return self._http.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            raise StoreUnavailable(
                f"the data directory {self.settings.data_dir} is held by `brain serve` (process "
                f"{self.locked.holder}), which does not answer at {self.url} ({exc}); wait for "
                "it to start, or stop it"
            ) from None

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> ServedBrain:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _document(data: dict[str, Any]) -> Document:
    return Document(data["id"], data["text"], data["metadata"])


def _hit(data: dict[str, Any]) -> Hit | MemoryHit:
    fields = {key: data[key] for key in ("id", "text", "metadata")}
    if "similarity_part" in data:
        optional = {key: data[key] for key in ("lexical_part", "floor") if data.get(key) is not None}
        return MemoryHit(
            **fields,
            **{key: data[key] for key in ("score", "similarity", "similarity_part", "importance_part", "recency_part")},
            **optional,
        )
    return Hit(**fields, similarity=data["similarity"])


def _error(response: httpx.Response, url: str) -> BrainError:
    try:
        body = response.json()
        message = str(body["message"])
    except (ValueError, KeyError, TypeError):
        return StoreError(f"the server at {url} answered {response.status_code}: {response.text[:200]}")
    status = response.status_code
    if status == 401:
        return ConfigError(f"the server at {url} refused the token: {message} (the CLI sends BRAIN_API_TOKEN)")
    if status == 403:
        return Forbidden(message)
    if status == 404:
        return NotFound(message)
    if status in (400, 413, 422):
        problems = [Problem.of(p) for p in body.get("problems") or [] if isinstance(p, dict)]
        return ValidationError(message, problems)
    if status == 503 and body.get("error") == "not_configured":
        return ConfigError(message)
    if status == 503:
        return StoreUnavailable(message)
    return StoreError(f"the server at {url} answered {status}: {message}")


__all__ = ["ServedBrain", "ServedStore"]
