"""The folders are the layers: import-linter's contracts ([tool.importlinter] in pyproject.toml) hold, and an
import that climbs a layer breaks them."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytest.importorskip("importlinter", reason="the test extra installs import-linter")


def lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    """lint-imports on the ``brain`` package under ``root`` (its pyproject.toml's contracts)."""
    env = {**os.environ, "PYTHONPATH": str(root)}  # this tree's brain, not an installed one
    code = "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"
    return subprocess.run([sys.executable, "-c", code, "--no-cache"], cwd=root, env=env,
                          capture_output=True, text=True, timeout=300)


def lint_with_an_added_line(tmp_path: Path, module: str, line: str) -> subprocess.CompletedProcess[str]:
    """lint-imports on a copy of the tree where ``line`` is appended to ``module`` (a path under brain/)."""
    shutil.copytree(ROOT / "brain", tmp_path / "brain", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    path = tmp_path / "brain" / module
    path.write_text(path.read_text() + line)
    return lint_imports(tmp_path)


def test_the_layer_contracts_hold():
    result = lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "brain's layers: each imports only the layers below it KEPT" in result.stdout
    assert "one provider never imports another KEPT" in result.stdout
    assert "no import circles: inside each package, its modules import one another one way KEPT" in result.stdout
    assert "the store builds no provider: its opener gives it the embedder KEPT" in result.stdout
    assert "0 broken" in result.stdout


def test_configuration_importing_the_token_table_breaks_the_contract(tmp_path):
    # configuration reaching up to the API's tokens
    result = lint_with_an_added_line(tmp_path, "config/values.py", "\n\ndef _check(token: str) -> None:\n"
                                     "    from brain.shells.web.tokens import TokenTable\n")

    assert result.returncode == 1, result.stdout + result.stderr
    assert "brain's layers: each imports only the layers below it BROKEN" in result.stdout
    assert "brain.config is not allowed to import brain.shells.web:" in result.stdout
    assert "brain.config.values -> brain.shells.web.tokens" in result.stdout


def test_a_part_of_the_store_naming_the_facade_even_for_types_only_breaks_the_contract(tmp_path):
    # the store's parts are typed by the narrow protocols they declare, never by the Store they serve
    added = "\n\nfrom typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from brain.store.facade import Store\n"
    result = lint_with_an_added_line(tmp_path, "store/history.py", added)

    assert result.returncode == 1, result.stdout + result.stderr
    assert "no import circles: inside each package, its modules import one another one way BROKEN" in result.stdout
    assert "No cycles are allowed in brain.store." in result.stdout
    assert ".history -> .facade" in result.stdout


def test_one_provider_importing_another_breaks_the_contract(tmp_path):
    result = lint_with_an_added_line(tmp_path, "providers/summarizers/ollama.py",
                                     "\nfrom brain.providers.embeddings.ollama import OllamaEmbedder  # noqa\n")

    assert result.returncode == 1, result.stdout + result.stderr
    assert "one provider never imports another BROKEN" in result.stdout
    assert "brain.providers.summarizers is not allowed to import brain.providers.embeddings" in result.stdout


def test_no_module_at_the_top_level_but_the_public_entry_points():
    top = sorted(p.name for p in (ROOT / "brain").iterdir() if p.name != "__pycache__")
    layers = {"model", "text", "config", "providers", "rules", "wiring", "store", "features", "app", "access", "ops",
              "shells"}
    public = {"__init__.py", "rag_store.py", "schemas.py", "errors.py", "embeddings", "integrations"}
    assert set(top) == layers | public


def test_a_shell_reaching_beneath_the_operation_layer_breaks_the_contract(tmp_path):
    # the CLI calling the store itself instead of brain.ops: allowed by the layers, refused by this contract
    result = lint_with_an_added_line(tmp_path, "shells/cli/memory_commands.py", "\n\ndef _peek() -> None:\n"
                                     "    from brain.store.memory_listing import list_memories  # noqa: F401\n")

    assert result.returncode == 1, result.stdout + result.stderr
    assert "the shells call the operation layer and nothing beneath it BROKEN" in result.stdout
    assert "brain.shells.cli.memory_commands -> brain.store.memory_listing" in result.stdout
    assert "brain's layers: each imports only the layers below it KEPT" in result.stdout
