"""Serving the API under uvicorn, in one process or in several worker processes (see :mod:`brain.shells.api`).

One process (the default) opens the store, checks and prepares it, and serves it with threads.

Several workers (``workers > 1``, ``BRAIN_API_WORKERS``) need a Chroma server (``BRAIN_CHROMA_URL``):
the embedded store is one process's (:mod:`brain.store.locking`). The parent checks everything once, with
the same errors as one process (the tokens, the listen address, the store reachable, the mirror
caught up, the specialists registered), closes its store, and runs uvicorn's worker processes on one
port. Each worker builds its app with :func:`worker_app` from the parent's settings, which it finds in
the environment (:data:`WORKER_SETTINGS`: every setting as the parent resolved it, so options such as
``--mcp``, ``--host``, ``--port``, ``--data-dir`` and ``--project`` reach the workers too), and opens
its own store; the change feed keeps the workers' in-process state in line with one another.

The workers share the data directory and the mirror file: the mirror is SQLite in WAL mode, each
worker writes its own writes to it in ``BEGIN IMMEDIATE`` transactions held across the Chroma call
(so the workers' writes reach the mirror in the order they reach Chroma), waits for another's
transaction up to SQLite's busy timeout, and notices the others' commits before it recalls
(:mod:`brain.features.mirror.store`); write records are per write and locked by their writer
(:mod:`brain.store.write_intents`)."""

from __future__ import annotations

import json
import logging
import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from fastapi import FastAPI

from brain.config import Settings
from brain.model.errors import ConfigError
from brain.ops.serving import announce, open_brain, prepare_to_serve
from brain.shells.api.factory import create_app
from brain.shells.web.tokens import TokenTable, check_listen_address

log = logging.getLogger(__name__)

#: the environment variable that carries the parent's settings to its worker processes (JSON)
WORKER_SETTINGS = "BRAIN_SERVE_WORKER_SETTINGS"
#: the import string of the workers' app factory
WORKER_APP = "brain.shells.api.serving:worker_app"


def check_workers(settings: Settings, workers: int) -> None:
    """Refuse several workers on an embedded store, saying why and what to do instead."""
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ConfigError(f"workers must be a whole number >= 1, not {workers!r}")
    if workers > 1 and not settings.chroma_url:
        raise ConfigError(
            f"{workers} workers need a Chroma server: the embedded store in {settings.data_dir / 'chroma'} can be "
            f"opened by one process only. Run a Chroma server (e.g. `chroma run --path {settings.data_dir / 'chroma'} "
            f"--port 8000`) and set BRAIN_CHROMA_URL=http://127.0.0.1:8000, or serve one process "
            f"(--workers 1, BRAIN_API_WORKERS=1), which answers requests on threads"
        )


def serve(
    settings: Settings | None = None, *, host: str | None = None, port: int | None = None, workers: int | None = None
) -> None:
    """Run the API under uvicorn: one process, or ``workers`` processes (default ``BRAIN_API_WORKERS``)
    on one port, which needs ``BRAIN_CHROMA_URL`` (see the module docstring)."""
    import uvicorn

    settings = settings or Settings()
    workers = settings.api_workers if workers is None else workers
    check_workers(settings, workers)  # before anything opens
    host = host or settings.api_host
    port = port or settings.api_port
    tokens = TokenTable.from_settings(settings)  # a malformed tokens file stops here, before the store opens
    check_listen_address(host, tokens)
    if not settings.chroma_url:
        log.warning(
            "embedded Chroma store: serving from this one process (threads); for several processes "
            "run a Chroma server and set BRAIN_CHROMA_URL"
        )
    # opened here, before uvicorn starts, so that a locked or unreachable store is a clear error
    with _closing_on_sigterm(), open_brain(settings) as opened:
        prepare_to_serve(opened)  # a write the mirror missed is repaired before serving
        if not settings.chroma_url:  # the CLI run beside this server reaches the store through it
            announce(settings.data_dir, local_url(host, port))
        if workers == 1:
            uvicorn.run(
                create_app(settings, brain=opened, tokens=tokens, host=host),
                host=host,
                port=port,
                workers=1,
                log_level="info",
            )
            return
    # the parent serves nothing itself: each worker opens its own store
    served = settings.model_copy(update={"api_host": host, "api_port": port, "api_workers": workers})
    log.info("serving on %s:%d with %d worker processes", host, port, workers)
    with _settings_for_workers(served):
        uvicorn.run(WORKER_APP, factory=True, host=host, port=port, workers=workers, log_level="info")


@contextmanager
def _closing_on_sigterm() -> Iterator[None]:
    """SIGTERM (systemd, ``docker stop``) ends the server as Ctrl-C does: the store is closed, so queued
    summaries are written and the index snapshot saved. uvicorn shuts down gracefully on it and then raises the
    signal again, whose default action would end the process before the store is closed."""
    if threading.current_thread() is not threading.main_thread():  # signals reach the main thread only
        yield
        return

    def stop(signum: int, frame: object) -> None:
        raise SystemExit(0)

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def local_url(host: str, port: int) -> str:
    """The address a client on this machine reaches a server listening on ``host``:``port`` at."""
    wildcard = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}
    host = wildcard.get(host, host)
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def worker_app() -> FastAPI:
    """The app of one worker process (uvicorn's factory): the parent's settings, read from the
    environment; the store opens when the worker starts and closes when it stops."""
    carried = os.environ.get(WORKER_SETTINGS)
    if not carried:
        raise ConfigError(
            f"{WORKER_APP} is the app of `brain serve --workers N`'s worker processes; "
            f"run `brain serve --workers N` rather than uvicorn directly"
        )
    state = json.loads(carried)
    overrides = {"_project_dir": state["project"]} if state["project"] is not None else {}
    settings = Settings(**state["settings"], **overrides)
    return create_app(settings, host=settings.api_host)


@contextmanager
def _settings_for_workers(settings: Settings) -> Iterator[None]:
    """Put ``settings`` in this process's environment while the workers run (they inherit it)."""
    values = settings.model_dump(mode="json")
    if settings.api_token is not None:  # dumped masked; the workers need the token itself
        values["api_token"] = settings.api_token.get_secret_value()
    root = settings.layout.root
    before = os.environ.get(WORKER_SETTINGS)
    os.environ[WORKER_SETTINGS] = json.dumps({"project": None if root is None else str(root), "settings": values})
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(WORKER_SETTINGS, None)
        else:
            os.environ[WORKER_SETTINGS] = before
