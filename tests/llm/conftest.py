"""The model tier's fixtures: a real llama.cpp server (scripts/llama_server.py) over a GGUF model from the registry.

Each fixture starts its server once per session (per worker under xdist) and stops it at the end. The fixtures
mark nothing: a test that uses one carries ``pytest.mark.model`` (and ``slow``) itself."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

_SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "llama_server.py"


def _load_llama_server():
    """scripts/llama_server.py as a module (scripts/ is no package)."""
    spec = importlib.util.spec_from_file_location("llama_server", _SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


llama_server = _load_llama_server()


@pytest.fixture(scope="session")
def smollm_server(tmp_path_factory):
    """SmolLM2-135M: loads in a second, answers quickly, follows no instructions (for the plumbing)."""
    with llama_server.serve("smollm2", log_path=tmp_path_factory.mktemp("smollm2") / "server.log") as server:
        yield server


@pytest.fixture(scope="session")
def qwen_server(tmp_path_factory):
    """Qwen2.5-Coder-1.5B: follows instructions and schemas; 3-8 generated tokens a second on two cores."""
    with llama_server.serve("qwen1.5b", log_path=tmp_path_factory.mktemp("qwen1.5b") / "server.log") as server:
        yield server
