"""The test tiers: TIERS in tests/conftest.py names tests that exist and kinds pyproject.toml registers, and
the collection rule marks the server runs of the store fixtures without a list."""

from __future__ import annotations

import ast
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from tests.conftest import ROOT, SLOW_KINDS, TIERS, tier_kinds


def defined_tests(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {node.name for node in ast.walk(tree)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test")}


def registered_markers() -> set[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return {line.split(":", 1)[0] for line in config["tool"]["pytest"]["ini_options"]["markers"]}


def test_every_entry_names_a_test_that_exists_and_a_known_kind():
    problems = []
    for key, kinds in TIERS.items():
        file, _, name = key.partition("::")
        path = ROOT / "tests" / file
        if not path.is_file():
            problems.append(f"{key}: tests/{file} does not exist")
        elif name and name.partition("[")[0] not in defined_tests(path):
            problems.append(f"{key}: {file} defines no {name.partition('[')[0]}")
        if not kinds or not set(kinds) <= {*SLOW_KINDS, "slow"}:
            problems.append(f"{key}: {kinds} (kinds are {', '.join(SLOW_KINDS)} or slow)")
    assert not problems, "rename or remove these entries of TIERS in tests/conftest.py:\n" + "\n".join(problems)


def test_every_kind_is_a_registered_marker():
    assert {*SLOW_KINDS, "slow"} <= registered_markers()  # --strict-markers refuses the rest


@dataclass
class Collected:
    """What tier_kinds reads of a collected test."""

    path: Path
    originalname: str
    fixturenames: list[str] = field(default_factory=list)
    params: dict | None = None
    name: str = ""  # with the parameters' ids

    @property
    def callspec(self):
        return None if self.params is None else type("CallSpec", (), {"params": self.params})()


def test_the_kinds_of_a_test_come_from_its_file_its_name_its_fixtures_and_its_parameters():
    tests = ROOT / "tests"
    assert tier_kinds(Collected(tests / "test_ui_browser.py", "test_anything")) == {"browser"}
    assert tier_kinds(Collected(tests / "test_cli.py", "test_subprocess_help")) == {"subprocess"}
    assert tier_kinds(Collected(tests / "test_cli.py", "test_help_lists_commands")) == set()
    assert tier_kinds(Collected(tests / "test_x.py", "test_y", ["tmp_path", "chroma_server"])) == {"server"}
    assert tier_kinds(Collected(tests / "test_x.py", "test_y", ["backend_settings"], {"backend_settings": "server"})) \
        == {"server"}
    assert tier_kinds(Collected(tests / "test_x.py", "test_y", ["backend_settings"],
                                {"backend_settings": "embedded"})) == set()
    assert tier_kinds(Collected(tests / "test_relevance_ranking.py", "test_gated_top_k_equals_brute_force",
                                name="test_gated_top_k_equals_brute_force[6144-heavy]")) == {"slow"}
    assert tier_kinds(Collected(tests / "test_relevance_ranking.py", "test_gated_top_k_equals_brute_force",
                                name="test_gated_top_k_equals_brute_force[300-heavy]")) == set()
    # a parameter that is not a string is never taken for the server
    assert tier_kinds(Collected(tests / "test_x.py", "test_y", ["n"], {"n": 3, "v": [1, 2]})) == set()

