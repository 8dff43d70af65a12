"""Schemathesis against the real server: every operation of the OpenAPI schema fuzzed with valid and
invalid data (its coverage, fuzzing and stateful phases, every check), as the admin and as a token
bound to an entity. Zero server errors, zero responses that break the schema.

Bounded: a fixed seed and a few dozen examples per operation, so the run is repeatable and takes
well under two minutes. ``positive_data_acceptance`` is left out on purpose: the schema cannot say
everything the library refuses (a metadata key that is reserved, a timestamp that is not ISO 8601, a
summary without its conversation), so the server rightly answers some schema-valid requests with 422.
Every warning counts as an issue except ``missing_test_data`` (an operation that only ever met unknown
ids): which ids a seeded run reaches through the links depends on the set of operations, so that one is
a measure of the run's luck, not of the server.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from brain.app.core import open_store
from brain.features.chat import ChatMemory
from brain.providers.extractors import OllamaExtractor
from brain.providers.summarizers import ExtractiveSummarizer
from brain.shells.api import create_app
from tests.conftest import ROOT, LiveServer, api_settings
from tests.http.test_api_security import ADMIN, TOKENS, write_tokens
from tests.ollama_stub import DEFAULT_CHAT_MODELS
from tests.proxy.openai_stub import OpenAIStub

pytestmark = [pytest.mark.fuzz, pytest.mark.subprocess]

SEED = 20261123
#: the warnings that fail the run: schemathesis' default set but missing_test_data (see the module)
WARNINGS = (
    "missing_auth",
    "base_url_mismatch",
    "validation_mismatch",
    "missing_deserializer",
    "unused_openapi_auth",
    "unsupported_regex",
    "method_not_allowed",
    "constants_extraction",
    "unmatched_filter",
    "unresolvable_reference",
    "rate_limited",
    "dictionary_mismatch",
    "timeout_units",
)


@pytest.fixture
def server(tmp_path, local_embedder, stub):
    path = tmp_path / "tokens"
    write_tokens(path)
    # memory formation on, its model the Ollama test server (whose answers it refuses), so that extracting
    # answers with a report rather than "formation is off"
    settings = api_settings(
        tmp_path,
        api_token=ADMIN,
        api_tokens_file=path,
        summary_every_n=1,
        formation=True,
        formation_retries=0,
        specialists_path=ROOT / "config" / "specialists.yaml",
    )
    extractor = OllamaExtractor(DEFAULT_CHAT_MODELS[0], host=stub.url, timeout=30)
    with OpenAIStub() as upstream, open_store(settings, embedder=local_embedder) as store:
        # the chat proxy in front of the stand-in chat model, so that its routes answer rather than "it is off"
        settings = settings.model_copy(update={"chat_upstream": upstream.url})
        chat = ChatMemory(store, settings, summarizer=ExtractiveSummarizer(), extractor=extractor)
        try:
            with LiveServer(create_app(settings, store=store, chat=chat)) as live:
                yield live
        finally:
            chat.close()


#: the operations a token bound to alice is refused (403) for nearly anything it sends, by design: the admin's and
#: another entity's (tests/http/test_api_security.py). Schemathesis reads "only 403" as failed authentication, or
#: as data the schema allows and the API rejects; the admin's run fuzzes them
ADMIN_ONLY = ("get_docs", "verify_mirror", "backfill_mirror", "forget_preview")
#: the chat proxy's operations, fuzzed in a run of their own: the seeded runs of the others stay as they were
#: (a run's data depends on its set of operations)
PROXY = ("chat_completions", "ollama_chat", "models")


def schemathesis_run(
    url: str,
    token: str,
    examples: int,
    cwd,
    exclude: tuple[str, ...] = (),
    include: tuple[str, ...] = (),
    phases: tuple[str, ...] = ("examples", "coverage", "fuzzing", "stateful"),
) -> subprocess.CompletedProcess:
    excluded = [arg for operation in exclude for arg in ("--exclude-operation-id", operation)]
    excluded += [arg for operation in include for arg in ("--include-operation-id", operation)]
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "schemathesis.cli",
            "run",
            f"{url}/openapi.json",
            "--header",
            f"Authorization: Bearer {token}",
            "--checks",
            "all",
            "--exclude-checks",
            "positive_data_acceptance",
            "--mode",
            "all",
            "--phases",
            ",".join(phases),
            "--max-examples",
            str(examples),
            "--seed",
            str(SEED),
            "--workers",
            "1",
            "--generation-database",
            "none",
            "--warnings",
            ",".join(WARNINGS),
            "--no-color",
            # its body is a tar of an export's files, which no schema describes: random bytes are refused (422)
            # as they should be, and schemathesis reads that as a schema mismatch; tests/http/test_transfer_routes.py
            "--exclude-path",
            "/v1/import",
            *excluded,
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
    )


@pytest.mark.parametrize("who, examples", [("admin", 40), ("alice", 25), ("proxy", 40)])
def test_schemathesis_finds_no_server_error_and_no_schema_violation(server, tmp_path, who, examples):
    token = TOKENS[who] if who in TOKENS else ADMIN
    phases = ("Coverage", "Fuzzing", "Stateful")
    if who == "proxy":  # no links between the proxy's operations: nothing stateful to run
        phases = ("Coverage", "Fuzzing")
        result = schemathesis_run(
            server.url, token, examples, tmp_path, include=PROXY, phases=("examples", "coverage", "fuzzing")
        )
    else:
        result = schemathesis_run(
            server.url, token, examples, tmp_path, exclude=PROXY + (() if who == "admin" else ADMIN_ONLY)
        )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-6000:]
    assert "No issues found" in output, output[-6000:]
    for phase in phases:
        assert f"✅ {phase}" in output, output[-3000:]
