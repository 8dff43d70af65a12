"""The docs site (mkdocs.yml, docs/) and the README that points into it.

The site builds with ``mkdocs build --strict`` (every link, anchor and nav entry resolves; the references
are generated from the code); every command of the ``brain`` group and every setting is documented on its
pages; the README stays short, its links resolve and its Python quickstart runs as printed.
Everything read here is inside the repository.
"""

from __future__ import annotations

import re
from pathlib import Path

import click
import pytest
import yaml

from brain.config import Settings, env_names
from brain.shells.cli import cli

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
README = ROOT / "README.md"
MKDOCS_YML = ROOT / "mkdocs.yml"
MAX_README_LINES = 200


def docs_text() -> str:
    return "\n".join(p.read_text(encoding="utf-8") for p in sorted(DOCS.rglob("*.md")))


def command_paths(group: click.Group, prefix: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], click.Command]]:
    """Every command below ``group``, subgroups included, as (path of names, command)."""
    found = []
    for name, command in sorted(group.commands.items()):
        path = (*prefix, name)
        found.append((path, command))
        if isinstance(command, click.Group):
            found += command_paths(command, path)
    return found


def undocumented_commands(group: click.Group, text: str) -> list[str]:
    """The commands that no page names as ``brain <path>`` (global options may come first)."""
    missing = []
    for path, _ in command_paths(group):
        pattern = r"\bbrain(?:\s+--?[\w-]+(?:\s+\S+)?)*\s+" + r"\s+".join(map(re.escape, path)) + r"(?![\w-])"
        if not re.search(pattern, text):
            missing.append("brain " + " ".join(path))
    return missing


def undocumented_settings(text: str) -> list[str]:
    """The settings whose variable has no row of its own in a table of the docs."""
    return [env_names(name)[0] for name in Settings.model_fields
            if f"| `{env_names(name)[0]}` |" not in text]


def nav_files(nav) -> list[str]:
    files = []
    for entry in nav:
        value = next(iter(entry.values())) if isinstance(entry, dict) else entry
        files += nav_files(value) if isinstance(value, list) else [value]
    return files


def heading_anchors(markdown: str) -> set[str]:
    """The anchors mkdocs gives the headings of a page (the toc extension's default slugs, explicit ids)."""
    anchors = set()
    in_fence = False
    for line in markdown.splitlines():
        if line.startswith("```"):
            in_fence = not in_fence
        if in_fence or not line.startswith("#"):
            continue
        title = line.lstrip("#").strip()
        explicit = re.search(r"\{\s*#([\w-]+)\s*\}$", title)
        if explicit:
            anchors.add(explicit.group(1))
            continue
        title = re.sub(r"[`*]", "", re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", title))
        slug = re.sub(r"[^\w\s-]", "", title).strip().lower()
        anchors.add(re.sub(r"[-\s]+", "-", slug))
    return anchors


def relative_links(markdown: str) -> list[str]:
    text = re.sub(r"```.*?```", "", markdown, flags=re.S)
    return [link for link in re.findall(r"\]\(([^)\s]+)\)", text) if not re.match(r"^[a-z]+:", link)]


# ---- commands and settings --------------------------------------------------------------------------------


def test_every_command_of_the_brain_group_is_documented_and_has_help():
    paths = command_paths(cli)
    assert len(paths) > 20 and ("mirror", "sync") in [p for p, _ in paths]  # the walk reaches the subgroups
    assert undocumented_commands(cli, docs_text()) == []
    # the CLI reference is generated from the help texts: a command without one would be a bare row
    assert [" ".join(p) for p, c in paths if not (c.help or c.short_help or "").strip()] == []


def test_a_command_added_without_docs_is_reported():
    @click.group(name="brain")
    def group():
        pass

    memory = click.Group(name="memory")
    group.add_command(memory)
    memory.add_command(click.Command(name="add", callback=lambda: None))
    memory.add_command(click.Command(name="squash", callback=lambda: None))
    text = "Run `brain memory add TEXT`, or `brain --json memory list`."
    assert undocumented_commands(group, text) == ["brain memory squash"]


def test_every_setting_has_a_row_in_the_docs():
    assert undocumented_settings(docs_text()) == []


def test_a_setting_without_a_row_is_reported():
    page = (DOCS / "reference" / "settings.md").read_text(encoding="utf-8")
    var = env_names("memory_top_k")[0]
    without = "\n".join(line for line in page.splitlines() if not line.startswith(f"| `{var}` |"))
    assert undocumented_settings(without) == [var]


# ---- the site's shape and the README ---------------------------------------------------------------------


def test_every_docs_page_is_in_the_nav_and_every_nav_entry_exists():
    config = yaml.load(MKDOCS_YML.read_text(encoding="utf-8"), Loader=yaml.BaseLoader)  # no !!python tags run
    listed = nav_files(config["nav"])
    pages = sorted(p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md"))
    assert sorted(listed) == pages


def test_the_readme_is_short_and_its_links_resolve():
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= MAX_README_LINES
    links = relative_links(text)
    assert any(link.startswith("docs/") for link in links)
    for link in links:
        path, _, anchor = link.partition("#")
        target = (ROOT / path).resolve() if path else README
        assert target.is_relative_to(ROOT) and target.exists(), f"README links to {link}, which does not exist"
        if anchor:
            anchors = heading_anchors(target.read_text(encoding="utf-8"))
            assert anchor in anchors, f"README links to {link}: no such heading"


def test_the_readme_python_quickstart_runs_as_printed(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("BRAIN_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("BRAIN_SUMMARIZER", "extractive")
    block = re.search(r"## A chat backend in Python\n+```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
    assert block is not None, "the README has no Python quickstart"
    namespace: dict = {"__name__": "readme"}
    exec(compile(block.group(1), "<README quickstart>", "exec"), namespace)  # noqa: S102 - the example is the test
    printed = capsys.readouterr().out
    assert "Alice is allergic to peanuts" in printed and "'importance_part'" in printed  # the prompt, the scores
    assert [hit.text for hit in namespace["hits"]] == ["Alice is allergic to peanuts"]
    assert namespace["ex"].conversation_id.startswith("conv-")


def test_the_getting_started_python_session_runs_as_printed(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("BRAIN_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("BRAIN_SUMMARIZER", "extractive")
    page = (DOCS / "getting-started.md").read_text(encoding="utf-8")
    block = re.search(r"## A first session from Python\n.*?```python\n(.*?)```", page, re.S)
    assert block is not None, "getting-started.md has no Python session"
    exec(compile(block.group(1), "<getting started>", "exec"), {"__name__": "getting_started"})  # noqa: S102
    printed = capsys.readouterr().out
    assert re.search(r"^\d\.\d{3} Alice is vegetarian$", printed, re.M)  # the ranked hit
    assert "- Alice is vegetarian" in printed  # and the memory in the prompt


def test_every_benchmark_results_file_has_a_page_that_includes_it():
    included = set()
    for page in (DOCS / "benchmarks").glob("*.md"):
        text = page.read_text(encoding="utf-8")
        for name in re.findall(r'^--8<-- "(bench/[^"]+)"$', text, re.M):
            assert (ROOT / name).is_file(), f"{page.name} includes {name}, which does not exist"
            assert "## Reproduce" in text and "bench/" in text.split("## Reproduce", 1)[1], page.name
            included.add(name)
    results = {p.relative_to(ROOT).as_posix() for p in (ROOT / "bench").glob("*RESULTS.md")}
    assert results <= included, f"no page includes {sorted(results - included)}"


# ---- the build ---------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_mkdocs_build_strict_passes_and_the_references_cover_the_code(tmp_path, monkeypatch):
    from mkdocs.commands.build import build
    from mkdocs.config import load_config

    from brain.shells.api import create_app

    monkeypatch.chdir(ROOT)  # the benchmark pages include bench/*.md by paths relative to the project
    site = tmp_path / "site"
    build(load_config(config_file=str(MKDOCS_YML), site_dir=str(site), strict=True))

    def page(name: str) -> str:
        return (site / name / "index.html").read_text(encoding="utf-8")

    cli_page = page("reference/cli")
    for path, _ in command_paths(cli):
        assert "brain " + " ".join(path) in cli_page, path
    http_page = page("reference/http")
    for route in create_app(Settings(data_dir=tmp_path / "data")).openapi()["paths"]:
        assert f"{route}</code>" in http_page, route
    settings_page = page("reference/settings")
    for name in Settings.model_fields:
        assert f"<code>{env_names(name)[0]}</code>" in settings_page, name
    assert 'class="doc doc-object doc-class"' in page("reference/python")  # mkdocstrings rendered the classes
    assert "retrieve_memories" in page("reference/python")
