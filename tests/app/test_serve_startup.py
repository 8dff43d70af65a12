"""Every way of starting brain brings the persona in line with persona.md the same way (:func:`brain.app.startup`):
`brain serve` and `brain mcp` on a fresh data directory serve it at once and say so; `brain.open()` reports it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

import brain
from brain.app.startup import startup
from tests.conftest import NOBODY, api_settings, free_port
from tests.mcp_client import project, stdio

ROOT = Path(__file__).resolve().parents[2]
PERSONA = "You are Juniper, the household's assistant.\n\n## Tone\nWarm and brief.\n"


class Served:
    """`brain serve` as a subprocess in the project ``workdir`` (a fresh data directory), stderr kept."""

    def __init__(self, workdir: Path):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = workdir / "serve.log"
        env = {**os.environ, "PYTHONPATH": str(ROOT), "OLLAMA_HOST": NOBODY, "BRAIN_SUMMARY_RETRIES": "0",
               "XDG_CONFIG_HOME": str(workdir / "xdg-config"), "XDG_DATA_HOME": str(workdir / "xdg-data")}
        env = {k: v for k, v in env.items() if not k.startswith(("BRAIN_PERSONA", "BRAIN_DATA", "RAG_"))}
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen([sys.executable, "-m", "brain.shells.cli", "serve", "--port", str(self.port)],
                                         cwd=workdir, env=env, stdout=log, stderr=subprocess.STDOUT)

    def __enter__(self) -> Served:
        deadline = time.monotonic() + 180
        while True:
            try:
                httpx.get(f"{self.url}/v1/health", timeout=5)  # any answer: serving (behind a token or not)
                return self
            except httpx.TransportError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.__exit__()
                raise AssertionError(f"brain serve did not start:\n{self.log.read_text()[-3000:]}")
            time.sleep(0.3)

    def __exit__(self, *exc: object) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=60)

    def output(self) -> str:
        return self.log.read_text()


@pytest.mark.subprocess
def test_brain_serve_on_a_fresh_data_directory_serves_the_persona_and_says_so(tmp_path):
    project(tmp_path)
    (tmp_path / "persona.md").write_text(PERSONA, encoding="utf-8")
    with Served(tmp_path) as served:
        persona = httpx.get(f"{served.url}/v1/persona", timeout=30).json()
        assert [s["topic"] for s in persona["sections"]] == ["core", "tone"]
        health = httpx.get(f"{served.url}/v1/health", timeout=30).json()
        assert health["persona"]["sections"] == 2 and health["persona"]["file_state"] == "loaded"
        assert health["persona"]["name"] == "Juniper"
    assert f"persona {tmp_path / 'persona.md'}: 2 sections, loaded version" in served.output()


@pytest.mark.subprocess
def test_brain_serve_without_a_persona_file_says_it_runs_without_one(tmp_path):
    project(tmp_path)
    with Served(tmp_path) as served:
        assert httpx.get(f"{served.url}/v1/persona", timeout=30).json()["sections"] == []
        assert httpx.get(f"{served.url}/v1/health", timeout=30).json()["persona"]["file_state"] == "missing"
    assert (f"persona file {tmp_path / 'persona.md'} not found; the assistant runs without a persona "
            "(set BRAIN_PERSONA_PATH)") in served.output()


@pytest.mark.subprocess
def test_brain_mcp_on_a_fresh_data_directory_serves_the_persona(tmp_path):
    project(tmp_path)
    (tmp_path / "persona.md").write_text(PERSONA, encoding="utf-8")
    with stdio(tmp_path) as client:
        assert client.read("brain://persona").startswith("You are Juniper")
        context = client.call("get_context", user_message="hello there")
        assert "Juniper" in context["prompt"]


def test_open_reports_the_persona_that_startup_loads(tmp_path, local_embedder):
    path = tmp_path / "persona.md"
    path.write_text(PERSONA, encoding="utf-8")
    settings = api_settings(tmp_path, persona_path=path, summarizer="extractive")
    with brain.open(settings, embedder=local_embedder, start_worker=False) as b:
        before = b.health(detail=True)["persona"]
        assert before == {"version": None, "sections": 0, "name": None, "file": str(path), "file_state": "not loaded"}
        report = startup(brain=b, warm=False)
        assert report.persona is not None and report.persona.changed
        after = b.health()["persona"]
        assert after["sections"] == 2 and after["file_state"] == "loaded" and "file" not in after
        path.write_text(PERSONA + "\n## Limits\nNo medical advice.\n", encoding="utf-8")
        assert b.health()["persona"]["file_state"] == "changed"
        again = startup(brain=b, warm=False)
        assert again.persona.sections == 3 and b.health()["persona"]["file_state"] == "loaded"
        assert json.dumps(b.health())  # plain JSON
