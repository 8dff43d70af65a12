"""bench/locomo.py without its data: a usage error that says where LoCoMo comes from, never a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.subprocess

ROOT = Path(__file__).resolve().parents[2]
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


CEILING = ROOT / "bench" / "locomo_ceiling.py"


def test_the_ceiling_script_shares_the_usage_errors(tmp_path):
    result = subprocess.run([sys.executable, str(CEILING), "--data", "nowhere/locomo10.json"], cwd=tmp_path,
                            capture_output=True, text=True, timeout=300)
    assert_usage_error_naming_locomo(result, tmp_path / "nowhere" / "locomo10.json")


def small_locomo(path: Path) -> None:
    """Two short conversations in LoCoMo's shape, each with questions whose evidence is known."""
    def sample(sid, a, b, topics):
        turns = []
        for i, (said_a, said_b) in enumerate(topics):
            turns += [{"speaker": a, "dia_id": f"D1:{2 * i + 1}", "text": said_a},
                      {"speaker": b, "dia_id": f"D1:{2 * i + 2}", "text": said_b}]
        qa = [{"question": f"What did {a} say about {word}?", "category": 4, "evidence": [f"D1:{2 * i + 1}"]}
              for i, (word, _) in enumerate(topics[:3])]
        conversation = {"speaker_a": a, "speaker_b": b, "session_1": turns,
                       "session_1_date_time": "1:56 pm on 8 May, 2023"}
        return {"sample_id": sid, "conversation": conversation, "qa": qa}
    words = ["gardening", "chess", "sailing", "baking", "cycling", "painting", "climbing", "fishing", "pottery",
             "astronomy", "knitting", "surfing", "archery", "juggling", "origami"]
    first = [(w, f"Nice. I tried {words[-1 - i]} once.") for i, w in enumerate(words)]
    second = [(w, "Sounds fun, tell me more.") for w in words[::-1]]
    path.write_text(__import__("json").dumps([sample("conv-1", "Ann", "Bo", first),
                                              sample("conv-2", "Cy", "Di", second)]))


def test_the_ceiling_fits_weights_that_do_no_worse_where_they_were_fitted(tmp_path):
    small_locomo(tmp_path / "small.json")
    result = subprocess.run([sys.executable, str(CEILING), "--data", "small.json", "--samples", "all",
                             "--left-out", "conv-2", "--out", "ceiling.md"], cwd=tmp_path,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    report = (tmp_path / "ceiling.md").read_text()
    rows = {}
    for line in report.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) == 10 and cells[1] in ("choosing", "left out"):
            rows[(cells[0].split(" (")[0], cells[1])] = cells
    assert set(rows) >= {("shipped", "choosing"), ("shipped", "left out"), ("fitted", "choosing"),
                         ("fitted", "left out")}
    assert rows[("shipped", "choosing")][2] == rows[("shipped", "left out")][2] == "3"  # questions per group
    # an ascent keeps a weight only when it helps, so where it was fitted it is never worse than its start
    assert float(rows[("fitted", "choosing")][3]) >= float(rows[("shipped", "choosing")][3])
    assert "best for single-hop" in report and "multi-hop" in report
