"""Start-up loads only what is used: the modules each entry point imports (timings are bench_startup's)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.subprocess

ROOT = Path(__file__).resolve().parents[2]

HEAVY = ("chromadb", "pydantic", "numpy", "onnxruntime", "ollama", "httpx", "fastapi", "mcp")


def loaded_after(code: str) -> set[str]:
    probe = f"""
import sys, json, contextlib, io
with contextlib.redirect_stdout(io.StringIO()):
{chr(10).join('    ' + line for line in code.strip().splitlines())}
print(json.dumps(sorted(sys.modules)))
"""
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True)
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def heavy(modules: set[str]) -> set[str]:
    return {name for name in modules if name.split(".")[0] in HEAVY}


def test_brain_help_loads_no_store_model_or_server_library():
    modules = loaded_after("""
from brain.shells.cli import cli
try:
    cli.main(["--help"], prog_name="brain", standalone_mode=False)
except SystemExit:
    pass
""")
    assert "brain.shells.cli.memory_commands" in modules  # every command was defined...
    assert heavy(modules) == set()  # ...without loading the library behind it


def test_a_commands_help_loads_no_store_either():
    modules = loaded_after("""
from brain.shells.cli import cli
for args in (["search", "--help"], ["memory", "list", "--help"], ["schema", "--help"]):
    try:
        cli.main(args, prog_name="brain", standalone_mode=False)
    except SystemExit:
        pass
""")
    assert not any(name.split(".")[0] == "chromadb" for name in modules)


def test_import_brain_and_its_errors_load_nothing_heavy():
    assert heavy(loaded_after("import brain")) == set()
    assert heavy(loaded_after("import brain.model.errors")) == set()
    # a public name is there on first use
    assert "brain.app.rag_store" in loaded_after("import brain\nbrain.RagStore")
