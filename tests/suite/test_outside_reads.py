"""The guard that fails the session when a test reads beside the repository (tests/outside_reads.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest

from tests.outside_reads import REPOSITORY, python_roots, reads_beside_repository


def test_the_predicate(tmp_path):
    repo = tmp_path / "clone" / "repo"
    beside = tmp_path / "clone"
    venv = beside / "venv"
    assert reads_beside_repository(beside / "shared" / "specs" / "x.json", repo)
    assert reads_beside_repository(repo / ".." / "shared" / "x.json", repo)  # '..' does not hide it
    assert reads_beside_repository(str(beside / "other-checkout"), repo)
    assert reads_beside_repository(os.fsencode(beside / "shared"), repo)  # bytes paths too
    assert reads_beside_repository(beside, repo)  # listing the parent itself
    assert not reads_beside_repository(repo / "tests" / "fixtures" / "pam" / "x.json", repo)
    assert not reads_beside_repository(repo, repo)
    assert reads_beside_repository(beside / "repo-other" / "x", repo)  # sharing a prefix is not being inside
    assert not reads_beside_repository(venv / "lib" / "site.py", repo, [str(venv)])  # an allowed root
    assert not reads_beside_repository("/etc/hosts", repo)  # not beside the repository
    assert not reads_beside_repository(tmp_path / "elsewhere", repo)


def test_the_python_installation_is_allowed():
    roots = python_roots()
    assert os.path.normcase(os.path.abspath(sys.prefix)) in roots
    import pytest as installed

    assert any(os.path.abspath(installed.__file__).startswith(root + os.sep) for root in roots)


def _run_pytest(tmp_path: Path, body: str, *options: str) -> subprocess.CompletedProcess:
    test_file = tmp_path / "test_probe.py"
    test_file.write_text(textwrap.dedent(body))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPOSITORY), os.environ.get("PYTHONPATH")]))}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "tests.outside_reads", "-p", "no:cacheprovider", "-q", *options,
         str(test_file)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )


@pytest.mark.subprocess
def test_a_session_that_reads_beside_the_repository_fails_and_names_the_paths(tmp_path):
    probe = REPOSITORY.parent / f"brain-outside-read-probe-{uuid.uuid4().hex}"
    result = _run_pytest(tmp_path, f"""
        import os

        def test_reads_a_sibling_folder():
            try:
                open({str(probe / "specs.json")!r}).read()
            except FileNotFoundError:  # what a fresh clone would do; the attempt is what counts
                pass
            try:
                os.listdir({str(probe)!r})
            except FileNotFoundError:
                pass
    """)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "1 passed" in result.stdout  # the test itself passed: the guard failed the session
    assert "files read outside the repository" in result.stdout
    assert f"open: {probe / 'specs.json'}" in result.stdout
    assert f"os.listdir: {probe}" in result.stdout
    assert not probe.exists()


@pytest.mark.subprocess
def test_a_session_that_reads_only_its_own_files_passes(tmp_path):
    fixture = REPOSITORY / "tests" / "fixtures" / "pam" / "example-embeddings.json"
    result = _run_pytest(tmp_path, f"""
        import json

        def test_reads_a_fixture_and_a_temp_file(tmp_path):
            (tmp_path / "x.txt").write_text("ok")
            assert (tmp_path / "x.txt").read_text() == "ok"
            assert json.loads(open({str(fixture)!r}).read())
    """)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "files read outside the repository" not in result.stdout


@pytest.mark.subprocess
def test_a_read_in_an_xdist_worker_fails_the_session_too(tmp_path):
    """Under pytest-xdist the tests run in worker processes, whose own exit status the controller ignores."""
    probe = REPOSITORY.parent / f"brain-outside-read-probe-{uuid.uuid4().hex}"
    result = _run_pytest(tmp_path, f"""
        def test_reads_a_sibling_file():
            try:
                open({str(probe / "specs.json")!r}).read()
            except FileNotFoundError:
                pass

        def test_reads_nothing():
            pass
    """, "-p", "xdist", "-n", "2")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "2 passed" in result.stdout
    assert "files read outside the repository" in result.stdout
    assert f"open: {probe / 'specs.json'}" in result.stdout
