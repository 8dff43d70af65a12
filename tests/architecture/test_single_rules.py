"""Rules written once: each has one home, and the code that needs it calls that home instead of
spelling the rule again. Each test pins the rule's behaviour and, where a source scan can say so,
that no module keeps a copy of its own."""

from __future__ import annotations

import ast
import functools
import math
import threading
from pathlib import Path

import httpx
import numpy as np
import ollama
import pytest
from hypothesis import given
from hypothesis import strategies as st

import brain.store.memory_index
from brain.config import Settings
from brain.features.mirror.mapping import foreign_metadata
from brain.model.errors import Backoff, EmbedderError, EmbedderUnavailable, ValidationError, retry
from brain.model.schemas import entity_of, entity_scope, valid_entity_scope
from brain.model.vectors import unit_rows, zero_rows
from brain.providers.embeddings import OllamaEmbedder
from brain.providers.ollama_client import ollama_errors
from brain.providers.summarizers import OllamaSummarizer, SummarizerError, SummarizerUnavailable, TurnText
from brain.rules import ranking
from brain.shells.xaibo.attributes import encode_attributes
from brain.store.memory_rows import read_row
from tests.ollama_stub import DEFAULT_CHAT_MODELS, OllamaStub

BRAIN = Path(__file__).resolve().parents[2] / "brain"


@functools.cache
def _modules() -> tuple[tuple[Path, ast.Module], ...]:
    """Every module of brain/ parsed, once per session (the scans below only read the trees)."""
    return tuple((p, ast.parse(p.read_text(encoding="utf-8"))) for p in sorted(BRAIN.rglob("*.py")))


def _where(path: Path, node: ast.AST) -> str:
    return f"{path.relative_to(BRAIN.parent)}:{node.lineno}"


# ---- the entity-name rule and the scope of an entity ------------------------------------------------

def test_only_the_schemas_build_or_take_apart_an_entitys_scope():
    """The scope string of an entity is built by ``entity_scope`` and read back by ``entity_of``; no
    other module spells the prefix in code (messages and docstrings may name it)."""
    home = BRAIN / "model" / "schemas" / "values.py"
    copies = []
    for path, tree in _modules():
        if path == home:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in (
                    "startswith", "removeprefix", "partition", "split") and any(
                    isinstance(a, ast.Constant) and a.value == "entity:" for a in node.args):
                copies.append(_where(path, node))
            if isinstance(node, ast.JoinedStr) and node.values and isinstance(node.values[0], ast.Constant) \
                    and node.values[0].value == "entity:":
                copies.append(_where(path, node))
            if isinstance(node, ast.BinOp) and isinstance(node.left, ast.Constant) and node.left.value == "entity:":
                copies.append(_where(path, node))
    assert copies == []


def test_no_module_exports_a_second_name_for_the_entity_name_check():
    import brain.access.policy

    assert not hasattr(brain.access.policy, "check_entity_name")


@pytest.mark.parametrize("name, canonical", [("bob", "bob"), ("Mary Ann", "mary ann"), ("team/ops", "team/ops"),
                                             ("李雷", "李雷")])
def test_an_entitys_scope_round_trips(name, canonical):
    assert entity_of(entity_scope(name)) == canonical
    assert valid_entity_scope(name) == entity_scope(name)
    assert entity_of("global") is None


@pytest.mark.parametrize("name", ["", " bob", "bo\x1bb", "x" * 129, 7])
def test_both_scope_builders_refuse_the_same_names_with_the_same_words(name):
    with pytest.raises(ValueError) as plain:
        entity_scope(name)
    with pytest.raises(ValidationError) as typed:
        valid_entity_scope(name)
    assert str(plain.value) in str(typed.value)


def test_engrams_namespace_and_xaibos_entity_attribute_follow_the_scope_rule():
    assert foreign_metadata("factual", 0.0, 0.6, "entity:team/ops")["entity"] == "team/ops"
    assert "entity" not in foreign_metadata("factual", 0.0, 0.6, "default")
    assert encode_attributes({"entity": "team/ops"}, "entity:team/ops").fields == {"entity": "team/ops"}
    assert encode_attributes({"entity": "bob"}, "entity:alice").fields == {}  # another entity's scope
    assert encode_attributes({"entity": "bob "}, "entity:bob ").fields == {}  # not a name


# ---- unit length ---------------------------------------------------------------------------------

def test_a_zero_vector_stays_zero_and_never_becomes_nan():
    rows = np.array([[3.0, 4.0], [0.0, 0.0], [1e-30, 0.0]], dtype=np.float32)
    unit = unit_rows(rows)
    assert np.isfinite(unit).all()
    assert np.allclose(unit, [[0.6, 0.8], [0.0, 0.0], [0.0, 0.0]])
    assert zero_rows(rows).tolist() == [False, True, True]
    assert np.isfinite(unit_rows(np.zeros(384))).all() and not unit_rows(np.zeros(384)).any()
    assert unit.dtype == np.float32 and unit.flags.c_contiguous
    assert unit_rows(rows, np.float64).dtype == np.float64


@given(st.lists(st.floats(-1e6, 1e6, allow_nan=False, width=32), min_size=1, max_size=16))
def test_unit_rows_is_unit_length_or_zero(values):
    unit = unit_rows(np.asarray(values))
    norm = float(np.linalg.norm(unit.astype(np.float64)))
    assert math.isfinite(norm)
    assert abs(norm - 1.0) < 1e-5 if not zero_rows(np.asarray(values)) else norm == 0.0


def test_every_scaled_copy_of_a_zero_vector_is_zero_not_nan():
    """The callers that scale vectors themselves go through unit_rows, so they agree on a zero vector."""
    assert not np.isnan(ranking.normalize_rows(np.zeros((2, 4)))).any()
    unit, scaled = ranking.to_unit_length(np.zeros(4))
    assert scaled and not np.isnan(unit).any()


def test_no_module_divides_by_a_norm_outside_the_vectors_module():
    home = BRAIN / "model" / "vectors.py"
    copies = []
    for path, tree in _modules():
        if path == home:
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.BinOp, ast.AugAssign)) and isinstance(node.op, ast.Div):
                right = node.right if isinstance(node, ast.BinOp) else node.value
                text = ast.unparse(right)
                if "linalg.norm" in text or text in ("norm", "norms"):
                    copies.append(_where(path, node))
            if isinstance(node, ast.Call) and ast.unparse(node.func) == "np.divide" and \
                    any("norm" in ast.unparse(a) for a in node.args[1:2]):
                copies.append(_where(path, node))
    assert copies == []


# ---- the epoch recency counts from ----------------------------------------------------------------

@pytest.mark.parametrize("meta, epoch", [
    ({"ts_epoch": 100.0, "last_used": 250.0}, 250.0),
    ({"ts_epoch": 100.0}, 100.0),
    ({"ts_epoch": 100.0, "last_used": "yesterday"}, 100.0),
    ({"ts_epoch": 100.0, "last_used": True}, 100.0),
    ({"ts_epoch": 100.0, "last_used": float("nan")}, 100.0),
    ({"ts_epoch": "soon"}, 0.0),
    ({}, 0.0),
])
def test_the_index_measures_age_from_recency_epoch(meta, epoch):
    assert ranking.recency_epoch(meta) == epoch
    row, _ = read_row({"scope": "global", **meta})
    assert row is not None and row["used"] == epoch


def test_the_index_calls_the_one_recency_rule(monkeypatch):
    monkeypatch.setattr(brain.store.memory_index.ranking, "recency_epoch", lambda meta: 42.0)
    row, _ = read_row({"scope": "global", "ts_epoch": 1.0, "last_used": 2.0})
    assert row["used"] == 42.0


def test_an_unusable_last_use_is_still_reported():
    _, problems = read_row({"scope": "global", "ts_epoch": 1.0, "last_used": "yesterday"})
    assert "last_used" in problems


# ---- the Ollama error ladder ----------------------------------------------------------------------

LADDERS = {
    "embed": (EmbedderUnavailable, EmbedderError),
    "chat": (SummarizerUnavailable, SummarizerError),
}


def _through_ladder(endpoint: str, failure: BaseException) -> BaseException:
    unavailable, error = LADDERS[endpoint]
    with pytest.raises(error) as caught:
        with ollama_errors("http://127.0.0.1:1", endpoint, "m:1", unavailable=unavailable, error=error,
                           timed_out="too slow: raise THE_TIMEOUT", doing="work"):
            raise failure
    return caught.value


@pytest.mark.parametrize("endpoint", sorted(LADDERS))
@pytest.mark.parametrize("failure, unavailable, words", [
    (ConnectionError("refused"), True, "ollama serve"),
    (httpx.ReadTimeout("slow"), True, "THE_TIMEOUT"),
    (httpx.RemoteProtocolError("reset"), True, "connection to Ollama"),
    (ollama.ResponseError('model "m:1" not found, try pulling it first', 404), True, "ollama pull m:1"),
    (ollama.ResponseError("404 page not found", 404), True, "upgrade Ollama"),
    (ollama.ResponseError("llama runner process has terminated", 500), True, "failed (500)"),
    (ollama.ResponseError("bad option", 400), False, "refused to work with 'm:1': bad option"),
    (ValueError("not json"), False, "not an Ollama"),
])
def test_both_ollama_providers_translate_a_failure_the_same_way(endpoint, failure, unavailable, words):
    raised = _through_ladder(endpoint, failure)
    assert isinstance(raised, LADDERS[endpoint][0]) == unavailable
    assert words in str(raised)


def test_an_ollama_without_the_endpoint_says_to_upgrade_for_embeddings_and_summaries():
    with OllamaStub(chat_models=DEFAULT_CHAT_MODELS) as stub:
        old = stub.url + "/old"  # every path under it is unknown to the stub: a plain 404
        with pytest.raises(EmbedderUnavailable, match="upgrade Ollama"):
            OllamaEmbedder("nomic-embed-text", host=old).embed_query("hello")
        with pytest.raises(SummarizerUnavailable, match="upgrade Ollama") as info:
            OllamaSummarizer(host=old, timeout=5).summarize([TurnText(1, "user", "hello")])
        assert "ollama pull" not in str(info.value)


def test_only_the_ladder_catches_what_the_ollama_client_raises():
    home = BRAIN / "providers" / "ollama_client.py"
    catches = []
    for path, tree in _modules():
        for node in ast.walk(tree):
            if isinstance(node, ast.ExceptHandler) and node.type is not None and \
                    "ResponseError" in ast.unparse(node.type) and path != home:
                catches.append(_where(path, node))
    assert catches == []


# ---- trying again ---------------------------------------------------------------------------------

def test_each_named_schedule_waits_what_it_says():
    from itertools import islice

    from brain.features.chat.summaries import summary_backoff
    from brain.store.chroma import READ_RETRIES
    from brain.store.follower import FETCH_RETRIES, WAIT_POLLS

    assert list(READ_RETRIES.waits()) == pytest.approx([0.05, 0.1, 0.2, 0.4, 0.8])
    assert list(FETCH_RETRIES.waits()) == pytest.approx([0.05, 0.1])
    assert list(islice(WAIT_POLLS.waits(), 7)) == pytest.approx([0.02, 0.04, 0.08, 0.16, 0.32, 0.5, 0.5])
    settings = Settings(summary_retries=3, summary_backoff_seconds=0.5)
    assert list(summary_backoff(settings).waits()) == [0.5, 1.0, 2.0]
    assert summary_backoff(settings).wait(2) == 2.0


class Flaky:
    def __init__(self, failures: int, error: type[Exception] = OSError):
        self.failures, self.error, self.calls = failures, error, 0

    def __call__(self) -> str:
        self.calls += 1
        if self.calls <= self.failures:
            raise self.error(f"failure {self.calls}")
        return "done"


def test_retry_waits_the_schedule_then_returns():
    slept: list[float] = []
    flaky = Flaky(2)
    assert retry(flaky, Backoff(first=0.1, retries=3), on=OSError, sleep=slept.append) == "done"
    assert flaky.calls == 3 and slept == pytest.approx([0.1, 0.2])


def test_retry_raises_the_last_failure_once_the_schedule_is_spent():
    slept: list[float] = []
    flaky = Flaky(10)
    with pytest.raises(OSError, match="failure 3"):
        retry(flaky, Backoff(first=1.0, retries=2, factor=3.0), on=OSError, sleep=slept.append)
    assert slept == [1.0, 3.0]


def test_retry_gives_up_at_once_on_what_it_is_not_told_to_retry():
    flaky = Flaky(1, KeyError)
    with pytest.raises(KeyError):
        retry(flaky, Backoff(first=0.0, retries=5), on=OSError, sleep=lambda s: None)
    picky = Flaky(1)
    with pytest.raises(OSError):
        retry(picky, Backoff(first=0.0, retries=5), on=OSError, when=lambda exc: "transient" in str(exc))
    assert flaky.calls == 1 and picky.calls == 1


def test_retry_stops_early_when_told():
    stop = threading.Event()
    stop.set()
    flaky = Flaky(3)
    with pytest.raises(OSError, match="failure 1"):
        retry(flaky, Backoff(first=30.0, retries=5), on=OSError, sleep=stop.wait)  # a set event: no wait

    def no_time_left(exc, n, wait):
        raise TimeoutError(f"{n + 1} attempts")

    with pytest.raises(TimeoutError, match="1 attempts"):
        retry(Flaky(3), Backoff(first=30.0, retries=5), on=OSError, before_wait=no_time_left)


def test_no_module_keeps_a_retry_loop_of_its_own():
    home = BRAIN / "model" / "errors.py"
    loops = []
    for path, tree in _modules():
        if path == home:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ExceptHandler) and any(
                    isinstance(n, ast.Call) and ast.unparse(n.func) == "time.sleep" for n in ast.walk(node)):
                loops.append(_where(path, node))
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow) and "attempt" in ast.unparse(node.right):
                loops.append(_where(path, node))
    assert loops == []


# ---- the library returns data; the CLI words it ------------------------------------------------

#: what ``brain`` printed for each report before its words moved to the CLI (byte for byte)
PRINTED = {
    "forget": "forgot entity 'bob': 2 memories, 1 FAQ entry\n"
              "mirror: 2 memories\n"
              "collection old (kept by a re-index): 3 documents\n"
              "note: the Chroma server's own files are not scrubbed by brain (BRAIN_CHROMA_URL)",
    "ingest": "Dry run, nothing written. 3 files read, 1 new, 1 changed, 1 unchanged. 4 documents would be added "
              "(2 to embed), 0 unchanged, 1 would be removed.\n"
              "Skipped 1 file:\n"
              "  a.bin: not a knowledge-base file\n"
              "1 ingested file no longer present (would be removed): gone.md\n"
              "1 error:\n"
              "  bad.csv:3: no answer",
    "verify": "mirror verify: 12 documents checked, 12 missing, 0 extra, 0 with another text, 0 with other metadata, "
              "1 with another or no vector; 1 rows written by engram\n"
              "  missing in the mirror (12): m0, m1, m2, m3, m4, m5, m6, m7, m8, m9, ... (2 more)\n"
              "  vector differs (1): v1",
    "recovery": "restore from mirror: 3 documents (3 memory), 0 of them written by engram; 2 stored vectors reused, "
                "1 embedded, 1 skipped (0.0 s)\n"
                "  skipped 'x': empty text\n"
                "persona: reloaded from p.md (2 sections)\n"
                "not restored: the FAQ: brain ingest",
    "rebuild": "mirror rebuilt at m.db from the store: 5 documents with their stored vectors (nothing embedded); "
               "the old file is kept as m.db.old\n"
               "2 rows engram wrote itself copied from the old file",
    "migration": "embedding protocol v1 -> v2: 4 embedding rows migrated, 1 skipped\n"
                 "  skipped 'a': bad vector",
    "backfill": "embedded 3 documents; 3 of 4 memories (75%) with minilm vectors",
    "reindex": "c2 (local/minilm) is live, c1 kept for `brain reindex --rollback`: 10 documents, 6 embedded, "
               "4 vectors reused from the mirror, 0 done before, 0 written meanwhile and copied again "
               "(2.0 s, 5.0 documents/s)",
    "drop": "dropped 1 collections (c0); kept c1, c2; 7 mirror vectors of dropped models deleted",
    "removal": "removed doc-1\nremoved doc-2",
}


def _reports() -> dict:
    from brain.app.forget import ForgetReport
    from brain.app.reindex import DropReport, ReindexReport
    from brain.app.restore import RebuildReport, RecoveryReport
    from brain.features.ingest import IngestReport
    from brain.features.mirror.protocol import BackfillReport, Coverage, MigrationReport, SkippedRow
    from brain.features.mirror.sync import RestoreReport, SyncReport, VerifyReport
    from brain.shells.cli.reports import MemoryRemoval

    return {
        "forget": ForgetReport("bob", {"memory": 2, "faq": 1, "turn": 0}, mirror={"memories": 2},
                               scrubbed={"chroma": None, "retained": {"old": 3}}),
        "ingest": IngestReport(files_read=3, added=4, embedded=2, updated=1, removed=1, dry_run=True, files_new=1,
                               files_unchanged=1, skipped=[{"path": "a.bin", "reason": "not a knowledge-base file"}],
                               missing_files=["gone.md"], pruned=True,
                               errors=[{"path": "bad.csv", "line": 3, "message": "no answer"}]),
        "verify": VerifyReport(checked=12, missing=[f"m{i}" for i in range(12)], vectors=["v1"], foreign=["f"]),
        "recovery": RecoveryReport(RestoreReport(restored=3, reused_vectors=2, embedded=1, by_type={"memory": 3},
                                                 skipped=[("x", "empty text")]),
                                   persona={"path": "p.md", "sections": 2}, not_restored=["the FAQ: brain ingest"]),
        "rebuild": RebuildReport("m.db", ["m.db.old"], SyncReport(added=5), foreign_copied=2),
        "migration": MigrationReport(1, migrated=4, skipped=[SkippedRow("a", "bad vector")]),
        "backfill": BackfillReport(3, Coverage("minilm", 4, 3)),
        "reindex": ReindexReport("c2", "c1", "local/minilm", documents=10, embedded=6, reused=4, seconds=2.0),
        "drop": DropReport(dropped=["c0"], kept=["c1", "c2"], mirror_vectors=7),
        "removal": MemoryRemoval(removed=["doc-1", "doc-2"]),
    }


def test_the_cli_prints_each_report_as_before():
    from brain.shells.cli import reports as text

    renderers = {"forget": text.forget_text, "ingest": text.ingest_text, "verify": text.verify_text,
                 "recovery": text.recovery_text, "rebuild": text.rebuild_text, "migration": text.migration_text,
                 "backfill": text.backfill_text, "reindex": text.reindex_text, "drop": text.drop_text,
                 "removal": text.removal_text}
    reports = _reports()
    assert {name: renderers[name](reports[name]) for name in PRINTED} == PRINTED


#: reports whose words are still the library's: the server logs them at start-up and ``brain init --json``
#: carries the sync's line (see the module docstring of brain.shells.cli.reports)
STILL_WORDED = {"SyncReport", "PersonaLoad"}


def test_library_reports_hold_data_and_leave_the_words_to_the_cli():
    worded = []
    for path, tree in _modules():
        if (BRAIN / "shells" / "cli") in path.parents:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and any(
                    isinstance(item, ast.FunctionDef) and item.name == "to_dict" for item in node.body):
                methods = {item.name for item in node.body if isinstance(item, ast.FunctionDef)}
                methods |= {t.id for item in node.body if isinstance(item, ast.Assign) for t in item.targets
                            if isinstance(t, ast.Name)}
                if methods & {"summary", "__str__"} and node.name not in STILL_WORDED:
                    worded.append(f"{_where(path, node)} {node.name}")
    assert worded == []

