"""docs/pam.md, the PAM mapping's specification, names every module of brain/features/pam and the public API."""

from __future__ import annotations

import re
from pathlib import Path

import brain.features.pam

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "pam.md"


def test_every_pam_module_is_in_the_docs_module_table():
    listed = set(re.findall(r"^\| `(\w+\.py)` \|", DOC.read_text(encoding="utf-8"), flags=re.MULTILINE))
    modules = {p.name for p in (ROOT / "brain" / "features" / "pam").glob("*.py") if p.name != "__init__.py"}
    assert listed == modules


def test_the_package_exports_what_callers_use():
    for name in ("export_pam", "import_pam", "ExportReport", "ImportReport", "content_hash", "pam_tag",
                 "MEMORY_STORE_FILE", "EMBEDDINGS_FILE", "CONVERSATIONS_DIR", "MAX_NESTING"):
        assert name in brain.features.pam.__all__ and hasattr(brain.features.pam, name), name
