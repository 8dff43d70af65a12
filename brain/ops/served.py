"""The operations of a ``brain serve`` that holds the data directory, over its HTTP API.

Embedded Chroma is single-process: while ``brain serve`` has the data directory open (:mod:`brain.store.locking`),
no other process may open it. The server records its address in the lock file, so a script, a CLI command or
``brain mcp`` started beside it finds it there (:class:`~brain.model.errors.StoreLocked` carries it) and gets
:class:`ServedOperations`: the same :class:`~brain.ops.protocol.Operations` as on an open store, each call one
request to the route that makes the same library call, answered with the same result types and the same errors.

The token sent is ``BRAIN_API_TOKEN`` (the admin's) unless another is given.
"""

from __future__ import annotations

import builtins
import json
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import fields
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import httpx

from brain.access.policy import ADMIN, Caller
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
from brain.model.results import Document, Hit, MemoryHit, Supersession
from brain.ops.error_table import error_for
from brain.ops.protocol import JsonReport, Metadata, When

if TYPE_CHECKING:
    from brain.app.browse import ConversationInfo
    from brain.app.forget import ForgetReport
    from brain.features.chat import Context, Exchange
    from brain.features.chat.formation import FormationReport
    from brain.features.consolidate import ConsolidationReport
    from brain.features.mirror.protocol import BackfillReport
    from brain.features.mirror.sync import SyncReport, VerifyReport
    from brain.features.pam.reports import ExportReport, ImportReport
    from brain.features.persona import PersonaLoad
    from brain.features.specialists import Specialist, SpecialistMatch

#: seconds a request to the server may take (a search embeds the query; a first request may load the model)
TIMEOUT = 120.0

T = TypeVar("T")


#: bytes of an upload sent at a time
UPLOAD_CHUNK = 1 << 20


class ServerLink:
    """The HTTP client of one server, with its answers as the library's values and its errors as the
    :class:`~brain.model.errors.BrainError` they were."""

    def __init__(self, url: str, *, token: str | None = None, holder: int | None = None, data_dir: Path | None = None):
        self.url = url
        self.holder = holder
        self.data_dir = data_dir
        self.token_sent = bool(token)
        self._http = httpx.Client(
            base_url=url, timeout=TIMEOUT, headers={"Authorization": f"Bearer {token}"} if token else {}
        )

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        """The JSON answer of one request."""
        response = self.send(method, path, **kwargs)
        if response.status_code < 400:
            return response.json()
        raise error_of(response, self.url, token_sent=self.token_sent)

    def send(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            return self._http.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            held = f"the data directory {self.data_dir} is held by `brain serve`" if self.data_dir else "`brain serve`"
            process = f" (process {self.holder})" if self.holder is not None else ""
            raise StoreUnavailable(
                f"{held}{process}, which does not answer at {self.url} ({exc}); wait for it to start, or stop it"
            ) from None

    def download(self, path: str, *, params: Mapping[str, Any]) -> bytes:
        """The body of a streamed answer, read as it comes, with no time limit (an export of a large store)."""
        chunks: list[bytes] = []
        try:
            with self._http.stream("GET", path, params=params, timeout=None) as response:
                if response.status_code >= 400:
                    response.read()
                    raise error_of(response, self.url, token_sent=self.token_sent)
                chunks.extend(response.iter_bytes())
        except httpx.TransportError as exc:
            raise StoreUnavailable(f"the server at {self.url} stopped answering during a download ({exc})") from None
        return b"".join(chunks)

    def needs_the_store(self, what: str, why: str) -> StoreLocked:
        """The error for what only a process that holds the store can do, and why."""
        process = f" (process {self.holder})" if self.holder is not None else ""
        return StoreLocked(
            f"{what} needs the store itself ({why}), and `brain serve`{process} holds it, serving {self.url}: "
            "stop the server first",
            holder=self.holder,
            server_url=self.url,
        )

    def close(self) -> None:
        self._http.close()


def _sent(value: object) -> object:
    """A value as JSON or a query carries it: a datetime as ISO 8601 text."""
    return value.isoformat() if isinstance(value, datetime) else value


def _params(**given: Any) -> dict[str, Any]:
    """Query parameters: the given ones, None left out, booleans as the API spells them."""
    return {
        key: ("true" if value else "false") if isinstance(value, bool) else _sent(value)
        for key, value in given.items()
        if value is not None
    }


def _body(**given: Any) -> dict[str, Any]:
    """A JSON body: the given fields, None left out."""
    return {key: _sent(value) for key, value in given.items() if value is not None}


def document_of(data: Mapping[str, Any]) -> Document:
    return Document(data["id"], data["text"], dict(data["metadata"]))


def hit_of(data: Mapping[str, Any]) -> Hit | MemoryHit:
    base = {key: data[key] for key in ("id", "text", "metadata")}
    if "similarity_part" in data:
        optional = {key: data[key] for key in ("lexical_part", "floor") if data.get(key) is not None}
        parts = ("score", "similarity", "similarity_part", "importance_part", "recency_part")
        return MemoryHit(**base, **{key: data[key] for key in parts}, **optional)
    return Hit(**base, similarity=data["similarity"])


def report_of(cls: type[T], data: Mapping[str, Any]) -> T:
    """A report dataclass from its ``to_dict()``: the fields it has (derived values such as ``ok`` are
    properties, recomputed)."""
    names = {f.name for f in fields(cls)}  # type: ignore[arg-type]
    return cls(**{key: value for key, value in data.items() if key in names})


class _Part:
    """One noun of the operations: the server and the caller they share. A bound caller's rules are kept here
    as well as by the server, since the token sent may be the admin's."""

    def __init__(self, link: ServerLink, caller: Caller):
        self._link = link
        self._caller = caller

    def _as(self, entity: str | None) -> str | None:
        return self._caller.acting_as(entity)

    def _admin(self, what: str) -> None:
        self._caller.require_admin(what)


class ServedMemories(_Part):
    def add(
        self,
        text: str,
        *,
        entity: str | None = None,
        scope: str | None = None,
        importance: int = 3,
        tags: Sequence[str] | None = None,
        conversation_id: str | None = None,
        timestamp: When | None = None,
        metadata: Metadata | None = None,
        expires_at: str | datetime | None = None,
        source: str = "system",
    ) -> Document:
        body = _body(
            text=text,
            entity=self._as(entity),
            scope=scope,
            importance=importance,
            tags=list(tags) if tags is not None else None,
            conversation_id=conversation_id,
            timestamp=timestamp,
            metadata=dict(metadata) if metadata is not None else None,
            expires_at=expires_at,
            source=source,
        )
        return document_of(self._link.request("POST", "/v1/memories", json=body))

    def search(
        self,
        query: str,
        *,
        k: int | None = None,
        entity: str | None = None,
        tags: Sequence[str] | None = None,
        as_of: When | None = None,
    ) -> builtins.list[MemoryHit]:
        params = _params(q=query, k=k, entity=self._as(entity), as_of=as_of, tags=list(tags) if tags else None)
        answer = self._link.request("GET", "/v1/memories/search", params=params)
        return [hit for hit in map(hit_of, answer["results"]) if isinstance(hit, MemoryHit)]

    def get(self, memory_id: str, *, entity: str | None = None) -> Document:
        return document_of(
            self._link.request("GET", f"/v1/memories/{memory_id}", params=_params(entity=self._as(entity)))
        )

    def list(
        self,
        *,
        entity: str | None = None,
        scope: str | None = None,
        tags: Sequence[str] | None = None,
        importance: Sequence[int] = (),
        status: Sequence[str] = (),
        order: str = "stored",
        limit: int | None = None,
        offset: int | None = None,
        history: bool = False,
    ) -> builtins.list[Document]:
        # the route pages by at most 1,000: a listing without a limit reads every page
        docs: builtins.list[Document] = []
        start = offset or 0
        while True:
            page = 1000 if limit is None else min(1000, limit - len(docs))
            params = _params(
                entity=self._as(entity),
                scope=scope,
                tags=list(tags) if tags else None,
                importance=list(importance) or None,
                status=list(status) or None,
                order=order,
                limit=page,
                offset=start + len(docs),
                history=history or None,
            )
            got = self._link.request("GET", "/v1/memories", params=params)["memories"]
            docs += map(document_of, got)
            if len(got) < page or (limit is not None and len(docs) >= limit):
                return docs

    def update(
        self,
        memory_id: str,
        text: str | None = None,
        *,
        entity: str | None = None,
        importance: int | None = None,
        tags: Sequence[str] | None = None,
        metadata: Metadata | None = None,
        replace_metadata: bool = False,
        status: str | None = None,
    ) -> Document:
        body = _body(
            text=text,
            importance=importance,
            tags=list(tags) if tags is not None else None,
            metadata=dict(metadata) if metadata is not None else None,
            replace_metadata=replace_metadata or None,
            status=status,
        )
        answer = self._link.request(
            "PATCH", f"/v1/memories/{memory_id}", params=_params(entity=self._as(entity)), json=body
        )
        return document_of(answer)

    def supersede(
        self,
        memory_id: str,
        text: str,
        *,
        entity: str | None = None,
        kind: str = "update",
        at: When | None = None,
        importance: int | None = None,
        tags: Sequence[str] | None = None,
        expires_at: str | datetime | None = None,
        conversation_id: str | None = None,
        metadata: Metadata | None = None,
        source: str = "system",
    ) -> Supersession:
        body = _body(
            text=text,
            kind=kind,
            at=at,
            importance=importance,
            tags=list(tags) if tags is not None else None,
            expires_at=expires_at,
            conversation_id=conversation_id,
            metadata=dict(metadata) if metadata is not None else None,
            source=source,
        )
        answer = self._link.request(
            "POST", f"/v1/memories/{memory_id}/supersede", params=_params(entity=self._as(entity)), json=body
        )
        return Supersession(document_of(answer["old"]), document_of(answer["new"]), answer["kind"])

    def history(self, memory_id: str, *, entity: str | None = None) -> builtins.list[Document]:
        answer = self._link.request("GET", f"/v1/memories/{memory_id}/history", params=_params(entity=self._as(entity)))
        return [document_of(d) for d in answer["history"]]

    def delete(self, memory_ids: Sequence[str], *, entity: str | None = None) -> builtins.list[str]:
        params = _params(ids=list(memory_ids), entity=self._as(entity))
        return list(self._link.request("DELETE", "/v1/memories", params=params)["deleted"])


class ServedConversations(_Part):
    def context(self, conversation_id: str | None, message: str, *, entity: str | None = None) -> Context:
        from brain.features.chat import Context

        body = _body(user_message=message, conversation_id=conversation_id, entity=self._as(entity))
        return Context.from_dict(self._link.request("POST", "/v1/context", json=body))

    def record(
        self,
        conversation_id: str | None,
        user_text: str,
        assistant_text: str,
        *,
        entity: str | None = None,
        timestamp: When | None = None,
        metadata: Metadata | None = None,
        user_name: str | None = None,
        assistant_name: str | None = None,
        idempotency_key: str | None = None,
    ) -> Exchange:
        from brain.features.chat import Exchange

        body = _body(
            conversation_id=conversation_id,
            user_text=user_text,
            assistant_text=assistant_text,
            entity=self._as(entity),
            timestamp=timestamp,
            metadata=dict(metadata) if metadata is not None else None,
            user_name=user_name,
            assistant_name=assistant_name,
        )
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key is not None else {}
        return report_of(Exchange, self._link.request("POST", "/v1/exchanges", json=body, headers=headers))

    def turns(
        self, conversation_id: str, *, k: int | None = None, entity: str | None = None
    ) -> builtins.list[Document]:
        answer = self._link.request(
            "GET", f"/v1/conversations/{conversation_id}/turns", params=_params(k=k, entity=self._as(entity))
        )
        return [document_of(d) for d in answer["turns"]]

    def summaries(self, conversation_id: str, *, entity: str | None = None) -> builtins.list[Document]:
        answer = self._link.request(
            "GET", f"/v1/conversations/{conversation_id}/summaries", params=_params(entity=self._as(entity))
        )
        return [document_of(d) for d in answer["summaries"]]

    def list(
        self, *, entity: str | None = None, limit: int | None = None, offset: int = 0
    ) -> builtins.list[ConversationInfo]:
        from brain.app.browse import ConversationInfo

        infos: builtins.list[ConversationInfo] = []
        while True:
            page = 1000 if limit is None else min(1000, limit - len(infos))
            params = _params(entity=self._as(entity), limit=page, offset=offset + len(infos))
            got = self._link.request("GET", "/v1/conversations", params=params)["conversations"]
            infos += [ConversationInfo.from_dict(c) for c in got]
            if len(got) < page or (limit is not None and len(infos) >= limit):
                return infos

    def extract(
        self, conversation_id: str | None = None, *, again: bool = False, entity: str | None = None
    ) -> FormationReport:
        from brain.features.chat.formation import FormationBatch, FormationReport

        if conversation_id is None:
            self._admin("forming memories of every conversation")
        ids = [conversation_id] if conversation_id is not None else [c.conversation_id for c in self.list()]
        total = FormationReport()
        for conversation in ids:
            # no client time limit: the server's model calls have theirs (BRAIN_FORMATION_TIMEOUT, retries)
            body = self._link.request(
                "POST",
                f"/v1/conversations/{conversation}/extract",
                params=_params(again=again or None, entity=self._as(entity)),
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


class ServedKnowledge(_Part):
    def search(
        self, query: str, *, k: int | None = None, topic: str | None = None, entity: str | None = None
    ) -> builtins.list[Hit]:
        params = _params(q=query, k=k, topic=topic, entity=self._as(entity))
        found = self._link.request("GET", "/v1/knowledge/search", params=params)["results"]
        return [hit for hit in map(hit_of, found) if isinstance(hit, Hit)]

    def persona(self, *, entity: str | None = None) -> JsonReport:
        return dict(self._link.request("GET", "/v1/persona", params=_params(entity=self._as(entity))))

    def by_file(self, *, entity: str | None = None) -> builtins.list[JsonReport]:
        return list(self._link.request("GET", "/v1/knowledge", params=_params(entity=self._as(entity)))["files"])

    def load_persona(self, path: Path) -> PersonaLoad:
        from brain.features.persona import PersonaLoad, read_persona_file

        self._admin("loading the persona")
        # read here, with the checks of a local load; the server loads the text
        body = {"markdown": read_persona_file(path), "source": str(path)}
        return report_of(PersonaLoad, self._link.request("PUT", "/v1/persona", json=body, timeout=None))

    def persona_block(self, *, max_chars: int | None = None) -> str:
        return str(self._link.request("GET", "/v1/persona/block", params=_params(max_chars=max_chars))["block"])


class ServedDocuments(_Part):
    def write(self, docs: Sequence[Mapping[str, object]]) -> builtins.list[str]:
        self._admin("writing documents of any type")
        # the route takes each document as text, type, id and its metadata apart
        body = [
            {
                "text": d["text"],
                "type": d["type"],
                "id": d.get("id"),
                "metadata": {k: v for k, v in d.items() if k not in ("text", "type", "id")},
            }
            for d in docs
        ]
        return list(self._link.request("POST", "/v1/docs", json={"docs": body})["ids"])

    def get(
        self,
        ids: Sequence[str] | None = None,
        *,
        type: str | None = None,
        where: Mapping[str, object] | None = None,
        limit: int | None = None,
        offset: int | None = None,
        entity: str | None = None,
    ) -> builtins.list[Document]:
        self._admin("reading documents of any type")
        params = _params(
            ids=list(ids) if ids else None,
            type=type,
            where=json.dumps(dict(where)) if where else None,
            limit=limit,
            offset=offset or None,
            entity=self._as(entity),
        )
        return [document_of(d) for d in self._link.request("GET", "/v1/docs", params=params)["docs"]]

    def search(
        self,
        query: str,
        *,
        type: str | None = None,
        k: int | None = None,
        entity: str | None = None,
        as_of: When | None = None,
    ) -> builtins.list[Hit | MemoryHit]:
        if as_of is not None:  # what was held true then is the memory search's to answer
            memories = ServedMemories(self._link, self._caller)
            return [*memories.search(query, k=k, entity=self._as(entity), as_of=as_of)]
        self._admin("searching documents of any type")
        params = _params(q=query, type=type, k=k, entity=self._as(entity))
        return [hit_of(h) for h in self._link.request("GET", "/v1/search", params=params)["results"]]


class ServedEntities(_Part):
    def forget(self, entity: str) -> ForgetReport:
        from brain.app.forget import ForgetReport

        name = self._as(entity)
        return report_of(ForgetReport, self._link.request("DELETE", f"/v1/entities/{name}", timeout=None))

    def forget_preview(self, entity: str) -> dict[str, int]:
        answer = self._link.request("GET", f"/v1/entities/{self._as(entity)}")
        return {str(key): int(value) for key, value in answer["documents"].items()}


class ServedMaintenance(_Part):
    def export(
        self,
        out_dir: Path,
        *,
        entity: str | None = None,
        embeddings: bool = True,
        conversations: bool = True,
        owner_id: str | None = None,
        force: bool = False,
    ) -> ExportReport:
        from brain.features.pam.export import write_export
        from brain.features.pam.transfer import read_export_archive

        if self._as(entity) is None:
            self._admin("an export of every entity")
        params = _params(entity=self._as(entity), embeddings=embeddings, conversations=conversations, owner_id=owner_id)
        archive = self._link.download("/v1/export", params=params)
        # written here, by this process, under the same rules as an export of an open store
        return write_export(read_export_archive(archive), out_dir, force=force)

    def import_pam(self, path: Path, *, include_forgotten: bool = False) -> ImportReport:
        self._admin("an import")
        from brain.features.pam.reports import ImportReport
        from brain.features.pam.spec import EMBEDDINGS_FILE, MEMORY_STORE_FILE
        from brain.features.pam.transfer import write_import_archive

        # the archive goes through a temporary file and out a chunk at a time: an export of any size costs this
        # side no more memory than a chunk
        with tempfile.TemporaryFile(prefix="brain-import-") as archive:
            write_import_archive(Path(path), archive)
            size = archive.tell()
            archive.seek(0)
            answer = self._link.request(
                "POST",
                "/v1/import",
                content=iter(lambda: archive.read(UPLOAD_CHUNK), b""),
                params=_params(include_forgotten=include_forgotten),
                timeout=None,
                headers={"content-type": "application/octet-stream", "content-length": str(size)},
            )
        report = report_of(ImportReport, answer)
        # the files read are this side's, not the copies the server read
        local = Path(path) if Path(path).is_file() else Path(path) / MEMORY_STORE_FILE
        report.memory_store = local
        report.embeddings = local.with_name(EMBEDDINGS_FILE) if answer.get("embeddings") else None
        return report

    def consolidate(self, *, dry_run: bool = False, threshold: float | None = None) -> ConsolidationReport:
        self._admin("consolidating memories")
        from brain.features.consolidate import ConsolidationReport, Merge

        answer = self._link.request(
            "POST", "/v1/consolidate", json=_body(dry_run=dry_run, threshold=threshold), timeout=None
        )
        report = report_of(ConsolidationReport, answer)
        report.merges = [report_of(Merge, m) for m in answer["merges"]]
        return report

    def verify_mirror(self) -> VerifyReport:
        self._admin("verifying the mirror")
        from brain.features.mirror.sync import VerifyReport

        return report_of(VerifyReport, self._link.request("GET", "/v1/mirror/verify", timeout=None))

    def sync_mirror(self, *, force: bool = False) -> SyncReport:
        self._admin("syncing the mirror")
        from brain.features.mirror.sync import SyncReport

        answer = self._link.request("POST", "/v1/mirror/sync", json={"force": force}, timeout=None)
        return report_of(SyncReport, answer)

    def backfill_mirror(self) -> BackfillReport:
        from brain.features.mirror.protocol import BackfillReport, Coverage

        self._admin("backfilling the mirror")
        answer = self._link.request("POST", "/v1/mirror/backfill", timeout=None)
        return BackfillReport(answer["embedded"], report_of(Coverage, answer["coverage"]))

    def stats(self) -> JsonReport:
        self._admin("the store's figures")
        report = self._link.request("GET", "/v1/health", params={"stats": "true"})
        if "stats" not in report:  # the store is down, or the token is not the admin's
            raise StoreUnavailable(
                f"the server at {self._link.url} gave no figures: health says {report.get('status')!r}; "
                "the store's figures need BRAIN_API_TOKEN, the admin token"
            )
        return dict(report["stats"])

    def health(self, *, detail: bool = False, verify: bool = False) -> JsonReport:
        response = self._link.send("GET", "/v1/health", params=_params(verify=verify or None))
        if response.status_code not in (200, 503):  # 503: the report says the store is unavailable
            raise error_of(response, self._link.url, token_sent=self._link.token_sent)
        report = dict(response.json())
        report.pop("version", None)
        return report


class ServedSpecialists(_Part):
    def list(self) -> builtins.list[Specialist]:
        from brain.features.specialists import Specialist

        return [Specialist.model_validate(s) for s in self._link.request("GET", "/v1/specialists")["specialists"]]

    def find(self, request: str, *, k: int = 3) -> builtins.list[SpecialistMatch]:
        from brain.features.specialists import SpecialistMatch

        answer = self._link.request("GET", "/v1/specialists", params={"q": request, "k": k})
        return [report_of(SpecialistMatch, m) for m in answer["results"]]


class ServedOperations:
    """:class:`~brain.ops.protocol.Operations` of the server at ``link``. Close it."""

    def __init__(self, link: ServerLink, caller: Caller = ADMIN):
        self.link = link
        self.caller = caller
        self._owns_link = True
        self.memories = ServedMemories(link, caller)
        self.conversations = ServedConversations(link, caller)
        self.knowledge = ServedKnowledge(link, caller)
        self.documents = ServedDocuments(link, caller)
        self.entities = ServedEntities(link, caller)
        self.maintenance = ServedMaintenance(link, caller)
        self.specialists = ServedSpecialists(link, caller)

    @classmethod
    def beside(
        cls, locked: StoreLocked, *, token: str | None, data_dir: Path | None = None, caller: Caller = ADMIN
    ) -> ServedOperations:
        """The operations of the server ``locked`` names (the error that said it holds the data directory)."""
        if locked.server_url is None:
            raise locked
        return cls(ServerLink(locked.server_url, token=token, holder=locked.holder, data_dir=data_dir), caller)

    def bound_to(self, caller: Caller) -> ServedOperations:
        """The same server for another caller (its rules kept on this side; the link and its token are shared,
        and closing the bound one leaves the link open)."""
        bound = ServedOperations(self.link, caller)
        bound._owns_link = False
        return bound

    def close(self) -> None:
        if self._owns_link:
            self.link.close()

    def __enter__(self) -> ServedOperations:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def error_of(response: httpx.Response, url: str, *, token_sent: bool) -> BrainError:
    """The library error a server's error response stands for; ``token_sent``: whether the request carried
    a token (BRAIN_API_TOKEN), which a refusal names as the cause or as what is missing."""
    try:
        body = response.json()
        message = str(body["message"])
    except (ValueError, KeyError, TypeError):
        return StoreError(f"the server at {url} answered {response.status_code}: {response.text[:200]}")
    status = response.status_code
    if status == 401:
        if not token_sent:
            return ConfigError(
                f"the server at {url} needs a token ({message}), and BRAIN_API_TOKEN is not set here: set it, in "
                f".env or the environment, to the server's admin token"
            )
        return ConfigError(
            f"the server at {url} refused the token: {message} (the BRAIN_API_TOKEN set here was sent: make it "
            f"the server's admin token)"
        )
    known = error_for(status, str(body.get("error")), message, body.get("problems") or [])
    if known is not None:
        return known
    # what the HTTP layer refuses before brain's code runs (an unknown route, a body too large), or a server
    # of another version: by the status alone
    if status in (400, 413, 422):
        problems = [Problem.of(p) for p in body.get("problems") or [] if isinstance(p, dict)]
        return ValidationError(message, problems)
    if status == 403:
        return Forbidden(message)
    if status == 404:
        return NotFound(message)
    if status == 503:
        return StoreUnavailable(message)
    return StoreError(f"the server at {url} answered {status}: {message}")


__all__ = ["ServedOperations", "ServerLink", "document_of", "error_of", "hit_of", "report_of"]
