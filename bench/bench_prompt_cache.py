#!/usr/bin/env python
"""What brain's context costs a local model per turn: a conversation through the chat proxy against the same
conversation sent to the model directly, each on a fresh llama.cpp server, in one run.

    .venv/bin/python bench/bench_prompt_cache.py [--model smollm2|qwen1.5b] [--max-tokens 48]
                                                 [--out bench/PROMPT_CACHE_RESULTS.md]

The model is the model tier's (scripts/llama_server.py: llama.cpp's OpenAI-compatible server over a GGUF from the
package registry), one slot, which keeps the state of the last prompt and its answer and reads only what follows
their longest common beginning. Two ways, the same 12 user messages, each on a server started for it:

- **direct**: the client sends its own history to the model, with no memory (what a chat does without brain);
- **brain**: the same client, the same history, through ``brain serve``'s proxy (``X-Brain-Conversation``,
  ``X-Brain-Entity``) over a store holding the entity's memories and ``persona.md``; each exchange is
  recorded before the next message is sent, as a chat's pause allows.

Each message is streamed (``stream: true``, ``temperature`` 0, at most ``--max-tokens`` tokens). Per turn: the time
to the first streamed chunk with text, and from the server's own log how many prompt tokens it read and how many
it reused (``Llama.generate: N prefix-match hit, remaining M prompt tokens to eval``).

Target: turns 6-12 through brain at <= 1.3x direct (median time to the first chunk).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import httpx
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "bench"))

import llama_server  # noqa: E402
from bench_proxy import free_port, start_server  # noqa: E402

from brain.app.core import open_store  # noqa: E402
from brain.config import Settings  # noqa: E402
from brain.wiring import get_embedder  # noqa: E402

ENTITY = "alice"
FACTS = [
    ("Alice is allergic to peanuts", 5),
    ("Alice's sister Maria lives in Porto", 3),
    ("Alice plays the cello in an amateur orchestra", 3),
    ("Alice works night shifts as a nurse at the city hospital", 3),
    ("Alice is training for a half marathon in October", 3),
    ("Alice's cat is called Miso", 3),
    ("Alice prefers vegetarian food", 4),
    ("Alice is learning Portuguese", 2),
]
MESSAGES = [
    "Hi! I need some ideas for dinner tonight.",
    "Could I make a satay sauce?",
    "I'm visiting my sister next month, any tips for the trip?",
    "What should I pack for the flight?",
    "My orchestra has a concert soon and I'm nervous.",
    "How long should I practise each day?",
    "I'm exhausted after my shifts this week.",
    "How do I sleep well during the day?",
    "My running plan says 15 km on Sunday.",
    "What should I eat before a long run?",
    "My cat keeps waking me up at 5am.",
    "Thanks, that was helpful! Can you sum up the advice?",
]
MEASURED = range(5, 12)  # turns 6-12
TARGET = 1.3
PREFIX_HIT = re.compile(r"Llama\.generate: (\d+) prefix-match hit, remaining (\d+) prompt tokens to eval")
PROMPT_EVAL = re.compile(r"prompt eval time =\s+([\d.]+) ms /\s+(\d+) tokens")


@dataclass
class Turn:
    first_chunk: float
    answer: str
    conversation_id: str | None = None  # the proxy's X-Brain-Conversation answer header
    read: int | None = None  # prompt tokens the server evaluated
    reused: int | None = None  # prompt tokens it kept from the previous request
    eval_ms: float | None = None


@dataclass
class Way:
    name: str
    turns: list[Turn] = field(default_factory=list)

    def median_first(self) -> float:
        return float(np.median([self.turns[i].first_chunk for i in MEASURED]))

    def median_read(self) -> float:
        return float(np.median([self.turns[i].read or 0 for i in MEASURED]))


def stream(client: httpx.Client, url: str, model: str, messages: list[dict], headers: dict, max_tokens: int) -> Turn:
    body = {"model": model, "messages": messages, "stream": True, "temperature": 0, "max_tokens": max_tokens}
    t = time.perf_counter()
    first, parts = None, []
    with client.stream("POST", url, json=body, headers=headers) as response:
        if response.status_code != 200:
            raise RuntimeError(f"{url}: {response.status_code} {response.read()[:300]!r}")
        for line in response.iter_lines():
            if not line.startswith("data: {"):
                continue
            delta = json.loads(line[6:])["choices"][0].get("delta", {}).get("content") or ""
            if delta and first is None:
                first = time.perf_counter() - t
            parts.append(delta)
    took = first if first is not None else time.perf_counter() - t
    return Turn(took, "".join(parts), response.headers.get("x-brain-conversation"))


def read_log(log: Path, turns: list[Turn]) -> None:
    """Each request's prompt tokens read and reused, from the server's log, in order."""
    requests: list[tuple[int, int | None, float | None]] = []
    reused = 0
    for line in log.read_text(errors="replace").splitlines():
        hit = PREFIX_HIT.search(line)
        if hit:
            reused = int(hit.group(1))
            continue
        evaluated = PROMPT_EVAL.search(line)
        if evaluated:
            requests.append((reused, int(evaluated.group(2)), float(evaluated.group(1))))
            reused = 0
    for turn, (kept, read, ms) in zip(turns, requests):
        turn.reused, turn.read, turn.eval_ms = kept, read, ms


def seed(data_dir: Path) -> None:
    settings = Settings(data_dir=data_dir, summarizer="extractive")
    with open_store(settings, embedder=get_embedder(settings)) as store:
        for text, importance in FACTS:
            store.upsert_memory(text, importance=importance, scope=f"entity:{ENTITY}")


def stop(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()


def recorded(client: httpx.Client, base: str, conversation_id: str) -> int:
    answer = client.get(f"{base}/v1/conversations/{conversation_id}/turns", params={"entity": ENTITY})
    return len(answer.json().get("turns", [])) if answer.status_code == 200 else 0


def converse(url: str, model: str, headers: dict, max_tokens: int, brain_base: str | None = None) -> list[Turn]:
    history: list[dict] = []
    turns = []
    with httpx.Client(timeout=600) as client:
        for i, text in enumerate(MESSAGES):
            messages = [*history, {"role": "user", "content": text}]
            turn = stream(client, url, model, messages, headers, max_tokens)
            turns.append(turn)
            history += [{"role": "user", "content": text}, {"role": "assistant", "content": turn.answer}]
            if brain_base is not None and turn.conversation_id is not None:
                deadline = time.monotonic() + 120
                while recorded(client, brain_base, turn.conversation_id) < 2 * (i + 1):
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"turn {i + 1} was not recorded within 120 s")
                    time.sleep(0.1)
            time.sleep(0.5)  # a chat's pause
    return turns


def run(args: argparse.Namespace) -> tuple[Way, Way, dict]:
    tmp = Path(tempfile.mkdtemp(prefix="brain-bench-cache-"))
    persona = ROOT / "persona.md"
    try:
        direct = Way("direct")
        with llama_server.serve(args.model, n_ctx=args.n_ctx, log_path=tmp / "direct.log") as server:
            direct.turns = converse(server.base_url + "/chat/completions", server.alias, {}, args.max_tokens)
        read_log(tmp / "direct.log", direct.turns)

        data_dir = tmp / "data"
        seed(data_dir)
        through = Way("brain")
        with llama_server.serve(args.model, n_ctx=args.n_ctx, log_path=tmp / "brain.log") as server:
            port = free_port()
            brain = start_server(data_dir, port, server.base_url, BRAIN_PERSONA_PATH=str(persona))
            base = f"http://127.0.0.1:{port}"
            try:
                headers = {"X-Brain-Conversation": "conv-bench-cache", "X-Brain-Entity": ENTITY}
                conversation = f"{base}/v1/chat/completions"
                # the proxy's first request opens the embedder and the indexes: one warm-up message in another
                # conversation, so that turn 1 measures a running service (its prompt is the model's first too)
                with httpx.Client(timeout=600) as client:
                    stream(client, conversation, server.alias, [{"role": "user", "content": "Hello"}],
                           {"X-Brain-Conversation": "conv-warm-up", "X-Brain-Entity": "warm-up"}, 4)
                through.turns = converse(conversation, server.alias, headers, args.max_tokens, brain_base=base)
            finally:
                stop(brain)
        read_log(tmp / "brain.log", [Turn(0.0, ""), *through.turns])  # the warm-up request comes first
        facts = {"persona_chars": len(persona.read_text()), "memories": len(FACTS)}
        return direct, through, facts
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def report(args: argparse.Namespace, direct: Way, through: Way, facts: dict) -> str:
    ratio = through.median_first() / direct.median_first()
    load = os.getloadavg()
    lines = [
        f"- model: `{args.model}` on llama.cpp's server (llama-cpp-python), one slot, n_ctx {args.n_ctx}; "
        f"{os.cpu_count()} cores shared by the model, brain serve and the client; load average "
        f"{load[0]:.1f}/{load[1]:.1f}/{load[2]:.1f} at the end; Python {platform.python_version()}",
        f"- run: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC; {len(MESSAGES)} user messages streamed, temperature 0, "
        f"at most {args.max_tokens} tokens each; each way on a fresh server",
        f"- brain: {facts['memories']} memories of the entity, persona.md ({facts['persona_chars']} "
        "characters), default RAG_* settings; each exchange recorded before the next message",
        "- tokens read / reused: from the server's log (`prefix-match hit, remaining N prompt tokens to eval`)",
        "",
        "| turn | first chunk direct (s) | first chunk brain (s) | ratio | tokens read direct | tokens read brain | "
        "tokens reused brain | reading direct (ms) | reading brain (ms) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for i, (d, b) in enumerate(zip(direct.turns, through.turns)):
        lines.append(
            f"| {i + 1} | {d.first_chunk:.2f} | {b.first_chunk:.2f} | {b.first_chunk / d.first_chunk:.2f} | "
            f"{d.read} | {b.read} | {b.reused} | {d.eval_ms or 0:.0f} | {b.eval_ms or 0:.0f} |"
        )
    verdict = "met" if ratio <= TARGET else "NOT met"
    lines += [
        "",
        f"Turns 6-12, median time to the first chunk: direct **{direct.median_first():.2f} s**, through brain "
        f"**{through.median_first():.2f} s**: **{ratio:.2f}x**; target <= {TARGET}x: **{verdict}**. Median "
        f"prompt tokens read: direct {direct.median_read():.0f}, brain {through.median_read():.0f}.",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", choices=tuple(llama_server.MODELS), default="smollm2")
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument("--n-ctx", type=int, default=8192)
    parser.add_argument("--out", type=Path, default=None, help="also write the table here")
    args = parser.parse_args()
    direct, through, facts = run(args)
    text = report(args, direct, through, facts)
    print(text)
    if args.out is not None:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
