"""The README's main job: builds ./data, prints ranked memories with score parts, FAQ hits and persona."""

from __future__ import annotations

import re
import shutil

from brain.demo import main
from tests.conftest import ROOT


def test_demo_builds_the_store_and_is_idempotent(tmp_path, monkeypatch, capsys):
    shutil.copy(ROOT / "persona.md", tmp_path / "persona.md")
    shutil.copytree(ROOT / "config", tmp_path / "config")
    monkeypatch.chdir(tmp_path)
    assert main([]) == 0
    out = capsys.readouterr().out
    assert (tmp_path / "data" / "chroma").is_dir()
    assert "Persona: 4 sections, loaded" in out
    added = int(re.search(r"Knowledge base: \d+ files, (\d+) documents added", out).group(1))
    assert added >= 12  # every sample FAQ row, plus the Markdown sections
    lines = [l for l in out.splitlines() if re.match(r"\s+\d\.\d{3} = ", l)]
    assert len(lines) == 3  # RAG_MEMORY_TOP_K memories, each with its score parts
    for line in lines:
        total, sim, imp, rec = map(float, re.findall(r"-?\d\.\d{3}", line)[:4])
        assert abs(total - (sim + imp + rec)) < 0.0015
    faq = out.split("FAQ hits")[1].split("Recent turns")[0]
    assert "[ocr]" in faq.splitlines()[1]  # the sample question is about reading text in a photo
    specialists = out.split("Specialists for this question")[1].split("Prompt block")[0]
    assert specialists.splitlines()[1].split()[-1] == "ocr"
    prompt = out.split("Prompt block")[1]
    assert "## Persona" in prompt and "Tone" in prompt and "## What you remember" in prompt
    assert "Engram mirror: 4 memories" in out

    assert main([]) == 0
    again = capsys.readouterr().out
    assert "Persona: 4 sections, unchanged" in again
    assert f"0 documents added, {added} unchanged, 0 removed; conversation: 0 new turns" in again
    assert "'memory': 4" in again and "'turn': 2" in again


def test_demo_reports_bad_settings_as_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RAG_MEMORY_TOP_K", "99")
    assert main([]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "RAG_MEMORY_TOP_K='99'" in err and "1..20" in err
