"""A pytest plugin that fails the session when a test reads a file beside the repository.

The suite must pass from a fresh clone, so nothing under the repository's parent directory may be
read: no sibling folder, no sibling checkout. An audit hook (PEP 578) sees every file
this process opens and every directory it lists; a path under the parent but outside the repository
is recorded, unless it lies in the Python installation (a virtualenv may sit beside the clone) or in
the session's temporary directory (with pytest's folder of runs around it). At the end the session fails and
the paths are listed.

Under pytest-xdist each worker records its own reads and hands them to the controller, which fails
the session. Subprocesses (the ``brain`` CLI, ``chroma run``) are not watched: they run the library code the
in-process tests already cover. ``tests/conftest.py`` loads this plugin; ``-p tests.outside_reads``
loads it into any other pytest run.
"""

from __future__ import annotations

import os
import site
import sys
import sysconfig
from pathlib import Path

import pytest

REPOSITORY = Path(__file__).resolve().parent.parent
#: audit events that read the file system, and the position of the path in their arguments
_READ_EVENTS = {"open": 0, "os.listdir": 0, "os.scandir": 0}
_MAX_LISTED = 50


def _norm(path: str | os.PathLike) -> str:
    return os.path.normcase(os.path.abspath(os.fspath(path)))


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def python_roots() -> list[str]:
    """Where the interpreter and the installed packages live (read by every import)."""
    roots = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    roots.update(p for p in sysconfig.get_paths().values() if p)
    roots.update(site.getsitepackages())
    roots.add(site.getusersitepackages())
    return sorted(_norm(r) for r in roots if r)


def reads_beside_repository(
    path: str | bytes | os.PathLike,
    repository: str | os.PathLike = REPOSITORY,
    allowed: list[str] | tuple[str, ...] = (),
) -> bool:
    """Whether ``path`` is under the repository's parent directory but outside the repository and
    outside every ``allowed`` root (the Python installation, the temporary directory of the run)."""
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    target, repo = _norm(path), _norm(repository)
    if not _inside(target, os.path.dirname(repo)) or _inside(target, repo):
        return False
    return not any(_inside(target, root) for root in allowed)


class OutsideReads:
    """Records the paths read beside the repository; one instance per process (audit hooks stay)."""

    def __init__(self, repository: Path = REPOSITORY):
        self.repository = repository
        self.allowed: list[str] = python_roots()
        self.paths: dict[str, str] = {}  # path -> the event that read it
        self._active = False

    def allow(self, root: str | os.PathLike) -> None:
        self.allowed.append(_norm(root))

    def hook(self, event: str, args: tuple) -> None:
        position = _READ_EVENTS.get(event)
        if position is None or not self._active or len(args) <= position:
            return
        path = args[position]
        if not isinstance(path, (str, bytes, os.PathLike)):  # a file descriptor, or None (the cwd)
            return
        self._active = False  # the check itself must not re-enter the hook
        try:
            if reads_beside_repository(path, self.repository, self.allowed):
                self.paths.setdefault(_norm(path), event)
        finally:
            self._active = True

    def start(self) -> None:
        if not self._active:
            self._active = True
            sys.addaudithook(self.hook)


_RECORDER = OutsideReads()


def pytest_sessionstart(session: pytest.Session) -> None:
    factory = getattr(session.config, "_tmp_path_factory", None)
    if factory is not None:
        # pytest's own folder of runs (pytest-of-<user>): it lists and cleans up older runs there, which is
        # beside the repository when the clone sits in the temporary directory itself (/tmp/brain)
        basetemp = factory.getbasetemp()
        _RECORDER.allow(basetemp.parent if basetemp.parent.name.startswith("pytest-of-") else basetemp)
    _RECORDER.start()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:  # a pytest-xdist worker: its exit status is ignored, the controller reports
        workeroutput["outside_reads"] = dict(_RECORDER.paths)
        return
    if _RECORDER.paths and exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error) -> None:
    """The xdist controller gathers what each worker recorded (its own process runs no test)."""
    _RECORDER.paths.update(getattr(node, "workeroutput", {}).get("outside_reads", {}))


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    if not _RECORDER.paths:
        return
    terminalreporter.section("files read outside the repository", sep="=", red=True, bold=True)
    terminalreporter.line(
        f"the suite must need nothing beside {_RECORDER.repository}; ship what these tests need under tests/:"
    )
    for path, event in sorted(_RECORDER.paths.items())[:_MAX_LISTED]:
        terminalreporter.line(f"  {event}: {path}")
    if len(_RECORDER.paths) > _MAX_LISTED:
        terminalreporter.line(f"  ... and {len(_RECORDER.paths) - _MAX_LISTED} more")
