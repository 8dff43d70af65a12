"""bench/locomo.py without its data: a usage error that says where LoCoMo comes from, never a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "bench" / "locomo.py"
DEFAULT_DATA = ROOT / "bench" / "data" / "locomo10.json"


def run_bench(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], cwd=cwd, capture_output=True, text=True, timeout=300)


def assert_usage_error_naming_locomo(result: subprocess.CompletedProcess, path: Path) -> None:
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""
    assert f"{path} does not exist" in result.stderr
    assert "https://github.com/snap-research/locomo" in result.stderr and "data/locomo10.json" in result.stderr
    assert "--data PATH" in result.stderr


def test_a_missing_data_file_says_where_to_get_locomo(tmp_path):
    result = run_bench(tmp_path, "--data", "nowhere/locomo10.json")
    # relative to where the script was started, not to the repository it changes into
    assert_usage_error_naming_locomo(result, tmp_path / "nowhere" / "locomo10.json")


@pytest.mark.skipif(DEFAULT_DATA.exists(), reason="LoCoMo is downloaded here: the default file exists")
def test_without_data_and_without_the_default_file(tmp_path):
    assert_usage_error_naming_locomo(run_bench(tmp_path), DEFAULT_DATA)


@pytest.mark.parametrize("content, problem", [
    ("not json", "JSONDecodeError"),
    ('[{"sample_id": "conv-1"}]', "KeyError: 'conversation'"),
])
def test_a_file_that_is_not_locomo_is_a_usage_error(tmp_path, content, problem):
    (tmp_path / "mine.json").write_text(content)
    result = run_bench(tmp_path, "--data", "mine.json")
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert f"{tmp_path / 'mine.json'} is not a usable LoCoMo file" in result.stderr and problem in result.stderr


def test_samples_not_in_the_file_are_named(tmp_path):
    sample = {"sample_id": "conv-1", "conversation": {"speaker_a": "A", "speaker_b": "B"}, "qa": []}
    (tmp_path / "one.json").write_text(__import__("json").dumps([sample]))
    result = run_bench(tmp_path, "--data", "one.json")  # the default: the five development conversations
    assert result.returncode == 2, result.stderr
    assert "has no sample conv-26, conv-30, conv-41, conv-42, conv-43; it holds conv-1" in result.stderr
    assert "--samples all" in result.stderr
