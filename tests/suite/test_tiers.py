"""The test tiers: a test carries the marker of its slow kind itself, the one rule in tests/conftest.py makes
each kind `slow` too, and a test on a real `chroma run` that forgot its `server` marker stops the collection."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from types import SimpleNamespace

import pytest

from tests.conftest import ROOT, SLOW_KINDS, pytest_collection_modifyitems, slow_kinds, uses_chroma_server


def registered_markers() -> set[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return {line.split(":", 1)[0] for line in config["tool"]["pytest"]["ini_options"]["markers"]}


def test_every_kind_is_a_registered_marker():
    assert {*SLOW_KINDS, "slow"} <= registered_markers()  # --strict-markers refuses the rest


@dataclass
class Collected:
    """What the tier rule reads of a collected test, and the marker it adds."""

    marks: list[str] = field(default_factory=list)
    fixturenames: list[str] = field(default_factory=list)
    params: dict | None = None
    nodeid: str = "tests/test_x.py::test_y"

    @property
    def callspec(self):
        return None if self.params is None else type("CallSpec", (), {"params": self.params})()

    def iter_markers(self):
        return iter([SimpleNamespace(name=name) for name in self.marks])

    def get_closest_marker(self, name):
        return next((mark for mark in self.iter_markers() if mark.name == name), None)

    def add_marker(self, name):
        self.marks.append(name)


def test_each_slow_kind_is_also_slow_and_nothing_else_is():
    items = [Collected([kind]) for kind in SLOW_KINDS] + [Collected(["slow"]), Collected([]),
                                                          Collected(["parametrize"])]
    pytest_collection_modifyitems(None, items)
    assert [set(item.marks) for item in items] == [{kind, "slow"} for kind in SLOW_KINDS] + [
        {"slow"}, set(), {"parametrize"}]
    assert slow_kinds(Collected(["subprocess", "stress", "skip"])) == {"subprocess", "stress"}


def test_a_test_on_the_chroma_server_must_carry_the_server_marker():
    assert uses_chroma_server(Collected(fixturenames=["tmp_path", "chroma_server"]))
    assert uses_chroma_server(Collected(fixturenames=["backend_settings"], params={"backend_settings": "server"}))
    assert not uses_chroma_server(Collected(fixturenames=["backend_settings"], params={"backend_settings": "embedded"}))
    assert not uses_chroma_server(Collected(params={"n": 3, "v": [1, 2]}))  # a parameter not a string: never
    pytest_collection_modifyitems(None, [Collected(["server"], ["chroma_server"])])  # marked: fine
    with pytest.raises(pytest.UsageError, match="tests/test_x.py::test_forgot"):
        pytest_collection_modifyitems(None, [Collected([], ["chroma_server"], nodeid="tests/test_x.py::test_forgot")])
