"""The scripts of bench/ as modules, for the tests that check what a benchmark measures."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCH = Path(__file__).resolve().parent.parent / "bench"


def bench_script(filename: str) -> ModuleType:
    """``bench/<filename>`` as a module, loaded once (a script, not a package: imported by path)."""
    name = f"bench_script_{Path(filename).stem}"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, BENCH / filename)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # its dataclasses look their module up while being defined
        spec.loader.exec_module(module)
    return sys.modules[name]
