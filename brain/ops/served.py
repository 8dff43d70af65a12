"""The operations of a ``brain serve`` that holds the data directory, over its HTTP API.

Embedded Chroma is single-process: while ``brain serve`` has the data directory open (:mod:`brain.store.locking`),
no other process may open it. The server records its address in the lock file, so a script, a CLI command or
``brain mcp`` started beside it finds it there (:class:`~brain.model.errors.StoreLocked` carries it) and gets
:class:`ServedOperations`: the same :class:`~brain.ops.protocol.Operations` as on an open store, derived from
the local nouns (:mod:`brain.ops.calls`): each call one request to ``POST /v1/ops/{noun}/{name}``, which runs the
same method there, answered with the same result types and the same errors (:mod:`brain.ops.error_table`).

The token sent is ``BRAIN_API_TOKEN`` (the admin's) unless another is given.
"""

from __future__ import annotations

import functools
import inspect
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, cast

import httpx
from pydantic import TypeAdapter

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
from brain.ops.calls import decode_result, encode_arguments, operations_of, spec_of
from brain.ops.error_table import error_for

if TYPE_CHECKING:
    from brain.features.pam.reports import ExportReport, ImportReport
    from brain.features.persona import PersonaLoad
    from brain.ops.local import (
        LocalConversations,
        LocalDocuments,
        LocalEntities,
        LocalKnowledge,
        LocalMaintenance,
        LocalMemories,
        LocalSpecialists,
    )

#: seconds a request to the server may take (a search embeds the query; a first request may load the model)
TIMEOUT = 120.0

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


#: the served client's route: one operation by name (:mod:`brain.ops.calls`)
OPERATION_PATH = "/v1/ops/{noun}/{name}"


class _Noun:
    """One noun of the server's operations, derived from its class in :mod:`brain.ops.local`: each operation
    a method of the same name and signature that sends the call (:mod:`brain.ops.calls`) and returns what the
    server's returned. The caller's rules are the server's: the call carries this side's caller, which the
    server narrows its token's to."""

    def __init__(self, link: ServerLink, caller: Caller, noun: str, local: type):
        self._link = link
        self._caller = caller
        for name, method in operations_of(local).items():
            setattr(self, name, self._remote(noun, name, method))

    def _remote(self, noun: str, name: str, method: Callable[..., object]) -> Callable[..., object]:
        path = OPERATION_PATH.format(noun=noun, name=name)
        spec = spec_of(method)
        slow = spec is not None and spec.slow

        @functools.wraps(method)
        def call(*args: object, **kwargs: object) -> object:
            body = {"args": encode_arguments(method, args, kwargs), "caller": _caller_sent(self._caller)}
            answer = self._link.request("POST", path, json=body, **({"timeout": None} if slow else {}))
            return decode_result(method, answer["result"])

        signature = inspect.signature(method)
        call.__signature__ = signature.replace(parameters=list(signature.parameters.values())[1:])  # type: ignore[attr-defined]
        return call


def _caller_sent(caller: Caller) -> dict[str, str] | None:
    return None if caller.is_admin else {"entity": str(caller.entity), "bound_by": caller.bound_by}


class _ServedKnowledge(_Noun):
    def load_persona(self, path: Path) -> PersonaLoad:
        from brain.features.persona import read_persona_file

        self._caller.require_admin("loading the persona")
        # read here, with the checks of a local load; the server loads the text (an operation this instance
        # was given, which the type checker does not see on the class)
        load: Callable[[str, str], PersonaLoad] = getattr(self, "load_persona_text")  # noqa: B009
        return load(read_persona_file(path), str(path))


class _ServedMaintenance(_Noun):
    """The operations that read or write this side's files: the export written here, the import read here,
    each moved as one archive streamed by the export and import routes."""

    def _exporting(self, entity: str | None) -> str | None:
        acting = self._caller.acting_as(entity)
        if acting is None:
            self._caller.require_admin("an export of every entity")
        return acting

    def export_archive(
        self,
        *,
        entity: str | None = None,
        embeddings: bool = True,
        conversations: bool = True,
        owner_id: str | None = None,
    ) -> bytes:
        params = {"embeddings": _flag(embeddings), "conversations": _flag(conversations)}
        params |= {k: v for k, v in (("entity", self._exporting(entity)), ("owner_id", owner_id)) if v is not None}
        return self._link.download("/v1/export", params=params)

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

        archive = self.export_archive(
            entity=entity, embeddings=embeddings, conversations=conversations, owner_id=owner_id
        )
        # written here, by this process, under the same rules as an export of an open store
        return write_export(read_export_archive(archive), out_dir, force=force)

    def import_archive(self, data: bytes | Path, *, include_forgotten: bool = False) -> ImportReport:
        self._caller.require_admin("an import")
        if isinstance(data, Path):
            with data.open("rb") as archive:
                return self._upload(archive, data.stat().st_size, include_forgotten)
        with tempfile.TemporaryFile(prefix="brain-import-") as archive:
            archive.write(data)
            size = archive.tell()
            archive.seek(0)
            report: ImportReport = self._upload(archive, size, include_forgotten)
            return report

    def import_pam(self, path: Path, *, include_forgotten: bool = False) -> ImportReport:
        from brain.features.pam.spec import EMBEDDINGS_FILE, MEMORY_STORE_FILE
        from brain.features.pam.transfer import write_import_archive

        self._caller.require_admin("an import")
        # the archive goes through a temporary file and out a chunk at a time: an export of any size costs this
        # side no more memory than a chunk
        with tempfile.TemporaryFile(prefix="brain-import-") as archive:
            write_import_archive(Path(path), archive)
            size = archive.tell()
            archive.seek(0)
            report = self._upload(archive, size, include_forgotten)
        # the files read are this side's, not the copies the server read
        local = Path(path) if Path(path).is_file() else Path(path) / MEMORY_STORE_FILE
        report.memory_store = local
        report.embeddings = local.with_name(EMBEDDINGS_FILE) if report.embeddings is not None else None
        return report

    def _upload(self, archive: BinaryIO, size: int, include_forgotten: bool) -> ImportReport:
        from brain.features.pam.reports import ImportReport

        answer = self._link.request(
            "POST",
            "/v1/import",
            content=iter(lambda: archive.read(UPLOAD_CHUNK), b""),
            params={"include_forgotten": _flag(True)} if include_forgotten else {},
            timeout=None,
            headers={"content-type": "application/octet-stream", "content-length": str(size)},
        )
        report: ImportReport = TypeAdapter(ImportReport).validate_python(answer)
        return report


def _flag(value: bool) -> str:
    return "true" if value else "false"


#: the served client's own class of a noun, where some of its operations move this side's files
_OWN: dict[str, type[_Noun]] = {"knowledge": _ServedKnowledge, "maintenance": _ServedMaintenance}


def _nouns() -> dict[str, tuple[type, type[_Noun]]]:
    from brain.ops.local import NOUNS

    return {name: (local, _OWN.get(name, _Noun)) for name, local in NOUNS.items()}


class ServedOperations:
    """:class:`~brain.ops.protocol.Operations` of the server at ``link``. Close it."""

    def __init__(self, link: ServerLink, caller: Caller = ADMIN):
        self.link = link
        self.caller = caller
        self._owns_link = True
        nouns = {name: served(link, caller, name, local) for name, (local, served) in _nouns().items()}
        # typed as the local classes: each noun here has their operations, by the same names and signatures
        self.memories = cast("LocalMemories", nouns["memories"])
        self.conversations = cast("LocalConversations", nouns["conversations"])
        self.knowledge = cast("LocalKnowledge", nouns["knowledge"])
        self.documents = cast("LocalDocuments", nouns["documents"])
        self.entities = cast("LocalEntities", nouns["entities"])
        self.maintenance = cast("LocalMaintenance", nouns["maintenance"])
        self.specialists = cast("LocalSpecialists", nouns["specialists"])

    @classmethod
    def beside(
        cls, locked: StoreLocked, *, token: str | None, data_dir: Path | None = None, caller: Caller = ADMIN
    ) -> ServedOperations:
        """The operations of the server ``locked`` names (the error that said it holds the data directory)."""
        if locked.server_url is None:
            raise locked
        return cls(ServerLink(locked.server_url, token=token, holder=locked.holder, data_dir=data_dir), caller)

    def bound_to(self, caller: Caller) -> ServedOperations:
        """The same server for another caller (sent with each call; the link and its token are shared,
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


__all__ = ["OPERATION_PATH", "ServedOperations", "ServerLink", "error_of"]
