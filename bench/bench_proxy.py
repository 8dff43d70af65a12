#!/usr/bin/env python
"""What the chat proxy adds: a chat request through ``brain serve`` against the same request sent to the chat
model directly, in one run, beside ``build_context`` alone.

    .venv/bin/python bench/bench_proxy.py [--memories 2000] [--conversations 30] [--requests 150]
                                          [--pause 0.5] [--out bench/PROXY_RESULTS.md]

The chat model is the tests' stand-in upstream (tests/proxy/openai_stub.py, in this process): it answers at
once, so whatever the proxy adds is all that differs between the two ways. A fresh data directory gets
``--memories`` memories over five entities and ``--conversations`` conversations of ten exchanges, written with
the real local embedder. Then, in this one run:

1. in process, on that store: ``ChatMemory.build_context`` for each measured message (its conversation, its
   entity) as a chat calls it, i.e. as the proxy does: the conversation's previous exchange recorded
   ``--pause`` seconds before (the conversation's caches then hold a turn they must take in), the message
   distinct each time so that every one is embedded; half before step 2 and half after it, so that a change in
   the machine's load weighs on the reference as on the proxy;
2. ``brain serve`` in its own process with ``BRAIN_CHAT_UPSTREAM`` at the stand-in, and a client here (httpx,
   one keep-alive connection to each), sending each message four ways in turn: to the stand-in directly and
   through the proxy (``X-Brain-Conversation``, ``X-Brain-Entity``), plain and with ``stream: true``. Plain:
   the time to the whole answer; streamed: the time to the answer's first chunk.

The proxy records each exchange after its answer (embedding two turns, off the request's path but on the same two
cores): ``--pause`` after each request, as a chat's pause, lets that write finish before the next measurement.
Plain requests, streamed ones and the ``/v1/context`` reference each take their own third of the conversations in
turn, so every measured message finds its conversation as a chat's next message does: the previous exchange
written and not yet taken into the conversation's caches. ``POST /v1/context`` is measured after a
``POST /v1/exchanges`` of the conversation's previous exchange: the two calls a backend makes today around its own
call to the model.

Target: the proxy's added p50 (plain, and time to the first chunk) <= build_context p50 + 5 ms.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import httpx
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from brain.app.core import open_store  # noqa: E402
from brain.config import Settings  # noqa: E402
from brain.features.chat import ChatMemory  # noqa: E402
from brain.providers.summarizers import ExtractiveSummarizer  # noqa: E402
from brain.wiring import get_embedder  # noqa: E402
from tests.proxy.openai_stub import MODEL, OpenAIStub  # noqa: E402

ENTITIES = ("alice", "bob", "carol", "dave", "erin")
TOPICS = ("my trip to Lisbon", "the dentist appointment", "Bob's birthday", "the budget for June",
          "what I like to cook", "the running plan", "my sister's wedding", "the new job")


def message(i: int) -> str:
    return f"Can you remind me what we said about {TOPICS[i % len(TOPICS)]}? (message {i})"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def p50_p95(samples: list[float]) -> tuple[float, float]:
    a = np.asarray(samples) * 1000.0
    return float(np.percentile(a, 50)), float(np.percentile(a, 95))


def seed(settings: Settings, memories: int, conversations: int) -> list[tuple[str, str]]:
    """The store's memories and conversations; the (conversation, entity) pairs."""
    rng = np.random.default_rng(7)
    store = open_store(settings, embedder=get_embedder(settings))
    chat = ChatMemory(store, summarizer=ExtractiveSummarizer(), start_worker=False)
    try:
        for i in range(memories):
            who = ENTITIES[i % len(ENTITIES)]
            store.upsert_memory(f"{who} mentioned {TOPICS[int(rng.integers(len(TOPICS)))]}, detail {i}",
                                scope=f"entity:{who}", importance=int(rng.integers(1, 6)))
        pairs = []
        for c in range(conversations):
            who = ENTITIES[c % len(ENTITIES)]
            conversation_id = f"conv-bench-{c}"
            for turn in range(10):
                chat.record_exchange(conversation_id, f"{TOPICS[(c + turn) % len(TOPICS)]}, part {turn}",
                                     f"Noted: part {turn} of {TOPICS[(c + turn) % len(TOPICS)]}.", entity=who)
            pairs.append((conversation_id, who))
        return pairs
    finally:
        chat.close()
        store.close()


def in_process(settings: Settings, pairs: list[tuple[str, str]], n: int, first: int, pause: float) -> list[float]:
    """build_context as a chat calls it: on a conversation whose previous exchange was just recorded (as the proxy
    records each one), one message every ``pause`` seconds."""
    store = open_store(settings, embedder=get_embedder(settings))
    chat = ChatMemory(store, summarizer=ExtractiveSummarizer())  # the summary worker running, as in brain serve
    try:
        for i, (conversation_id, who) in enumerate(pairs):  # conversations cached, as in a running service
            chat.build_context(conversation_id, f"warm up {i}", entity=who)
        took = []
        for i in range(first, first + n):
            conversation_id, who = pairs[i % len(pairs)]
            chat.record_exchange(conversation_id, f"earlier {message(i)}", f"You said: earlier {message(i)}",
                                 entity=who)
            time.sleep(pause)
            t = time.perf_counter()
            chat.build_context(conversation_id, message(i), entity=who)
            took.append(time.perf_counter() - t)
            time.sleep(pause)
        return took
    finally:
        chat.close()
        store.close()


def start_server(data_dir: Path, port: int, upstream: str, **settings: str) -> subprocess.Popen:
    """``brain serve`` on ``data_dir`` in front of ``upstream``; ``settings``: more environment variables."""
    env = {**os.environ, "BRAIN_DATA_DIR": str(data_dir), "BRAIN_SUMMARIZER": "extractive",
           "BRAIN_CHAT_UPSTREAM": upstream, **settings}
    log = (data_dir.parent / "serve.log").open("wb")  # a file, not a pipe nobody reads: a full pipe would stall it
    proc = subprocess.Popen([sys.executable, "-m", "brain.shells.cli", "serve", "--port", str(port)], env=env,
                            stdout=subprocess.DEVNULL, stderr=log, cwd=data_dir.parent)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/v1/health", timeout=5).status_code == 200:
                return proc
        except httpx.HTTPError:
            pass
        if proc.poll() is not None:
            raise RuntimeError(f"brain serve exited: {(data_dir.parent / 'serve.log').read_text()[-2000:]}")
        time.sleep(0.5)
    proc.kill()
    raise RuntimeError("brain serve did not start")


def plain(client: httpx.Client, url: str, text: str, headers: dict[str, str]) -> float:
    body = {"model": MODEL, "messages": [{"role": "user", "content": text}]}
    t = time.perf_counter()
    response = client.post(url, json=body, headers=headers)
    took = time.perf_counter() - t
    if response.status_code != 200:
        raise RuntimeError(f"{url}: {response.status_code} {response.text[:300]}")
    return took


def first_chunk(client: httpx.Client, url: str, text: str, headers: dict[str, str]) -> float:
    body = {"model": MODEL, "messages": [{"role": "user", "content": text}], "stream": True}
    t = time.perf_counter()
    with client.stream("POST", url, json=body, headers=headers) as response:
        chunks = response.iter_raw()
        first = next(chunks)
        took = time.perf_counter() - t
        whole = first + b"".join(chunks)
    if response.status_code != 200 or not whole.endswith(b"[DONE]\n\n"):
        raise RuntimeError(f"{url}: {response.status_code}, the stream did not end with [DONE]")
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--memories", type=int, default=2000)
    parser.add_argument("--conversations", type=int, default=30, help="a third each for plain, context, stream")
    parser.add_argument("--requests", type=int, default=150, help="messages measured each way")
    parser.add_argument("--pause", type=float, default=0.5, help="seconds after each measured request")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "PROXY_RESULTS.md")
    args = parser.parse_args()
    args.out = args.out.resolve()  # the run changes directory

    tmp = Path(tempfile.mkdtemp(prefix="brain-bench-proxy-"))
    os.chdir(tmp)  # no project's .env, persona or config/ for either way: the served store is this one alone
    try:
        data_dir = tmp / "data"
        settings = Settings(data_dir=data_dir, summarizer="extractive")
        t0 = time.perf_counter()
        pairs = seed(settings, args.memories, args.conversations)
        seeded = time.perf_counter() - t0
        context = in_process(settings, pairs, args.requests // 2, first=0, pause=args.pause)

        ways: dict[str, list[float]] = {
            "direct plain": [], "proxy plain": [], "direct first": [], "proxy first": [], "context": []}
        with OpenAIStub() as stub:
            port = free_port()
            server = start_server(data_dir, port, stub.url)
            proxy_url = f"http://127.0.0.1:{port}/v1/chat/completions"
            direct_url = stub.url + "/chat/completions"
            try:
                with httpx.Client(timeout=60) as direct, httpx.Client(timeout=60) as proxied:
                    for i, (conversation_id, who) in enumerate(pairs):  # warm: model, indexes, conversations
                        headers = {"X-Brain-Conversation": conversation_id, "X-Brain-Entity": who}
                        plain(proxied, proxy_url, f"warm up {i}", headers)
                        plain(direct, direct_url, f"warm up {i}", {})
                    time.sleep(2)
                    group = len(pairs) // 3  # plain, context and stream each have conversations of their own
                    for i in range(args.requests):
                        conversation_id, who = pairs[i % group]
                        headers = {"X-Brain-Conversation": conversation_id, "X-Brain-Entity": who}
                        text = message(args.requests + i)
                        if i % 2:  # the order alternates, so neither way always follows the other
                            ways["direct plain"].append(plain(direct, direct_url, text, {}))
                            ways["proxy plain"].append(plain(proxied, proxy_url, text, headers))
                        else:
                            ways["proxy plain"].append(plain(proxied, proxy_url, text, headers))
                            ways["direct plain"].append(plain(direct, direct_url, text, {}))
                        time.sleep(args.pause)  # a chat's pause: the exchange just answered is written meanwhile
                        # the two calls a backend makes today: the previous exchange, then the next context
                        conversation_id, who = pairs[group + i % group]
                        proxied.post(f"http://127.0.0.1:{port}/v1/exchanges", json={
                            "conversation_id": conversation_id, "entity": who, "user_text": f"earlier {text}",
                            "assistant_text": f"You said: earlier {text}"})
                        time.sleep(args.pause)
                        t = time.perf_counter()
                        proxied.post(f"http://127.0.0.1:{port}/v1/context", json={
                            "conversation_id": conversation_id, "entity": who, "user_message": text + " (again)"})
                        ways["context"].append(time.perf_counter() - t)
                        time.sleep(args.pause)
                        conversation_id, who = pairs[2 * group + i % group]
                        headers = {"X-Brain-Conversation": conversation_id, "X-Brain-Entity": who}
                        text = message(3 * args.requests + i)
                        if i % 2:
                            ways["direct first"].append(first_chunk(direct, direct_url, text, {}))
                            ways["proxy first"].append(first_chunk(proxied, proxy_url, text, headers))
                        else:
                            ways["proxy first"].append(first_chunk(proxied, proxy_url, text, headers))
                            ways["direct first"].append(first_chunk(direct, direct_url, text, {}))
                        time.sleep(args.pause)
            finally:
                server.send_signal(signal.SIGINT)
                try:
                    server.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    server.kill()

        context += in_process(
            settings, pairs, args.requests - args.requests // 2, first=args.requests // 2, pause=args.pause
        )
        c50, c95 = p50_p95(context)
        figures = {name: p50_p95(samples) for name, samples in ways.items()}
        added_plain = figures["proxy plain"][0] - figures["direct plain"][0]
        added_first = figures["proxy first"][0] - figures["direct first"][0]
        target = c50 + 5.0
        load = os.getloadavg()
        verdict = "met" if added_plain <= target and added_first <= target else "NOT met"
        lines = [
            "# The chat proxy's added latency",
            "",
            f"- machine: {os.cpu_count()} cores (brain serve, its model, the stand-in upstream and the client share "
            f"them), load average {load[0]:.1f}/{load[1]:.1f}/{load[2]:.1f} at the end; Python "
            f"{platform.python_version()}",
            f"- run: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC; {args.memories:,} memories over {len(ENTITIES)} "
            f"entities and {args.conversations} conversations of 10 exchanges, seeded in {seeded:.0f} s with the "
            f"real local embedder; {args.requests} distinct messages each way; default RAG_* settings",
            "- the stand-in upstream answers at once; through the proxy, each message names its conversation and "
            "entity, and its exchange is recorded after the answer",
            "",
            "| | p50 | p95 |",
            "|---|---|---|",
            f"| build_context in process, after the conversation's previous exchange was recorded (incl. embedding "
            f"the message; half before, half after the rest) | {c50:.2f} ms | {c95:.2f} ms |",
            f"| POST /v1/context to brain serve, after POST /v1/exchanges of the previous exchange "
            f"| {figures['context'][0]:.2f} ms "
            f"| {figures['context'][1]:.2f} ms |",
            f"| plain: the upstream directly | {figures['direct plain'][0]:.2f} ms "
            f"| {figures['direct plain'][1]:.2f} ms |",
            f"| plain: through the proxy | {figures['proxy plain'][0]:.2f} ms | {figures['proxy plain'][1]:.2f} ms |",
            f"| stream, first chunk: the upstream directly | {figures['direct first'][0]:.2f} ms "
            f"| {figures['direct first'][1]:.2f} ms |",
            f"| stream, first chunk: through the proxy | {figures['proxy first'][0]:.2f} ms "
            f"| {figures['proxy first'][1]:.2f} ms |",
            "",
            f"Added by the proxy (p50 through it - p50 direct): **{added_plain:.2f} ms** plain, "
            f"**{added_first:.2f} ms** to the first chunk; target <= build_context p50 + 5 ms = {target:.2f} ms: "
            f"**{verdict}**.",
            "",
        ]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    text = "\n".join(lines)
    print(text)
    args.out.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
