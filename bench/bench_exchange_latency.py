#!/usr/bin/env python
"""Does a chat turn get slower when memories form? p50/p90 of ``POST /v1/exchanges``, formation off vs on.

    .venv/bin/python bench/bench_exchange_latency.py [--data ../shared/bench/locomo/locomo-dev.json]
                                                     [--exchanges 60] [--rounds 8] [--every-n 2]
                                                     [--interval 0.5] [--delay 0.5,2.0]
                                                     [--out bench/FORMATION_RESULTS.md]

One run, the same data both ways: the first ``--exchanges`` LoCoMo exchanges that have both a user and an
assistant turn (bench/locomo.py's loader; each conversation's entity named after it), posted one at a
time, one every ``--interval`` seconds (or as soon as the previous one is answered), to a real
``brain serve`` (its own process, the real local embedder, every other setting the default) in a fresh
data directory:

- off: ``BRAIN_FORMATION=false``;
- on: ``BRAIN_FORMATION=true``.

Both ways the summaries come from a model, so that formation is the only difference: the Ollama test
server (tests/ollama_stub.py, in this process) answers every chat call after a delay drawn from
``--delay`` (seconds, uniform, derived from the request so both ways wait alike): a summary with a
sentence, a formation call with one fact per user turn of the batch (so formation embeds and writes
memories, as with a real model). ``BRAIN_SUMMARY_EVERY_N`` is ``--every-n``: a batch falls due every
``--every-n`` exchanges, i.e. every second at the defaults, while the model needs a summary call and a
formation call for it (2.5 s on average), so the worker never idles and formation runs all through the
measurement (the report counts the formation calls answered while requests were being measured).

The two ways are run ``--rounds`` times in the order off, on, on, off, ... (a new server each time), so a
change of the machine's load during the run weighs on both alike; the percentiles pool each way's rounds.
The first exchanges of every server (a conversation of their own) warm it up and are not measured.

Target: p50 with formation on within 1.1x of off.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import httpx
import numpy as np

INVOKED_FROM = Path.cwd()
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import locomo  # noqa: E402
from bench_formation import request_turns  # noqa: E402
from bench_http import free_port, wait_until_serving  # noqa: E402
from bench_relevance import DEFAULT_DATA  # noqa: E402

from tests.ollama_stub import DEFAULT_CHAT_MODELS, OllamaStub  # noqa: E402

MODEL = DEFAULT_CHAT_MODELS[0]
TARGET_P50_RATIO = 1.1
WARM_UP = 20  # exchanges of a conversation of their own before measuring (first embeddings, caches)


# ---- data -------------------------------------------------------------------------------------
def exchange_bodies(path: Path, n: int) -> list[dict]:
    """The first ``n`` two-sided LoCoMo exchanges as ``POST /v1/exchanges`` bodies."""
    bodies = []
    for conv in locomo.load(path):
        for when, user_turn, assistant_turn in locomo.exchanges(conv):
            if user_turn is None or assistant_turn is None:
                continue
            bodies.append({"conversation_id": conv.id, "entity": conv.id, "user_text": user_turn.text,
                           "assistant_text": assistant_turn.text, "timestamp": when.isoformat(),
                           "user_name": conv.speakers[0], "assistant_name": conv.speakers[1]})
            if len(bodies) == n:
                return bodies
    if not bodies:
        raise ValueError(f"{path} has no exchange with both a user and an assistant turn")
    return bodies


def warm_up_bodies() -> list[dict]:
    return [{"conversation_id": "conv-warm-up", "entity": "warm-up", "user_text": f"Warm-up message {i}.",
             "assistant_text": f"Warm-up answer {i}."} for i in range(WARM_UP)]


# ---- the model ----------------------------------------------------------------------------------
class ScriptedModel:
    """The test server's answers: a delay, then a summary or a formation answer. Records when each
    formation and summary call was answered."""

    def __init__(self, low: float, high: float):
        self.low, self.high = low, high
        self.answered: list[tuple[float, str]] = []
        self._lock = threading.Lock()

    def delay(self, body: dict) -> float:
        digest = hashlib.sha256(json.dumps(body.get("messages"), sort_keys=True).encode()).digest()
        return self.low + (self.high - self.low) * int.from_bytes(digest[:4], "little") / 2**32

    def __call__(self, body: dict) -> str:
        time.sleep(self.delay(body))
        kind = "formation" if body.get("format") else "summary"
        with self._lock:
            self.answered.append((time.monotonic(), kind))
        if kind == "summary":
            return "They talked about their week and their plans."
        return json.dumps(formation_answer(body))

    def count(self, kind: str, start: float, end: float) -> int:
        with self._lock:
            return sum(1 for at, k in self.answered if k == kind and start <= at <= end)


def formation_answer(body: dict) -> dict:
    """One fact per user turn of the batch (so formation writes and embeds memories, as with a real model)."""
    entity, turns = request_turns(body)
    facts = []
    for index, line in turns:
        said = re.match(r"(?:\s\S+)?\s+User(?: \(([^)]*)\))?: (.*)$", line)
        if said:
            who, text = said.group(1) or "The user", said.group(2)
            facts.append({"text": f"{who} said: {text}"[:300], "importance": 3, "tags": [], "entity": entity,
                          "action": "add", "target": None, "expires_at": None, "valid_from": None,
                          "turns": [index]})
    return {"facts": facts}


# ---- the server ---------------------------------------------------------------------------------
def start_server(data_dir: Path, port: int, stub_url: str, formation: bool, every_n: int) -> subprocess.Popen:
    env = {**os.environ, "BRAIN_DATA_DIR": str(data_dir), "OLLAMA_HOST": stub_url, "BRAIN_SUMMARIZER": "ollama",
           "BRAIN_SUMMARY_MODEL": MODEL, "BRAIN_FORMATION_MODEL": MODEL,
           "BRAIN_FORMATION": "true" if formation else "false", "BRAIN_SUMMARY_EVERY_N": str(every_n)}
    env.pop("RAG_SUMMARY_EVERY_N", None)
    data_dir.mkdir(parents=True)
    proc = subprocess.Popen([sys.executable, "-m", "brain.shells.cli", "serve", "--port", str(port)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=data_dir.parent)
    return wait_until_serving(proc, f"http://127.0.0.1:{port}/v1/health", "brain serve",
                              ready=lambda response: response.status_code == 200)


def stop_server(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=120)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def post_all(client: httpx.Client, bodies: list[dict], interval: float = 0.0) -> list[float]:
    """Post ``bodies`` one at a time, each ``interval`` seconds after the previous one started (or at once
    when the previous one took longer); their latencies."""
    latencies = []
    started = time.perf_counter()
    for i, body in enumerate(bodies):
        time.sleep(max(0.0, started + i * interval - time.perf_counter()))
        t = time.perf_counter()
        response = client.post("/v1/exchanges", json=body)
        latencies.append(time.perf_counter() - t)
        if response.status_code != 201:
            raise RuntimeError(f"POST /v1/exchanges answered {response.status_code}: {response.text[:300]}")
    return latencies


def one_run(tmp: Path, name: str, formation: bool, bodies: list[dict], stub: OllamaStub, model: ScriptedModel,
            every_n: int, interval: float) -> dict:
    port = free_port()
    server = start_server(tmp / name, port, stub.url, formation, every_n)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=120) as client:
            post_all(client, warm_up_bodies())
            start = time.monotonic()
            latencies = post_all(client, bodies, interval)
            end = time.monotonic()
            health = client.get("/v1/health").json()
    finally:
        stop_server(server)
    return {"latencies": latencies, "seconds": end - start, "formation_calls": model.count("formation", start, end),
            "summary_calls": model.count("summary", start, end), "health": health}


# ---- report -------------------------------------------------------------------------------------
def pct(samples: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(samples) * 1000.0, q))


def report(args, runs: dict[str, list[dict]], n: int) -> str:
    pooled = {way: [x for run in runs[way] for x in run["latencies"]] for way in runs}
    p50 = {way: pct(pooled[way], 50) for way in pooled}
    p90 = {way: pct(pooled[way], 90) for way in pooled}
    ratio = p50["on"] / p50["off"]
    load = os.getloadavg()
    lines = [
        "# Chat latency with memory formation off and on (POST /v1/exchanges)",
        "",
        f"`{args.command}`",
        "",
        f"- run {datetime.now(UTC):%Y-%m-%d %H:%M} UTC; {os.cpu_count()} cores shared with the server, its "
        f"embedder, the client and the test server (and whatever else runs: load average {load[0]:.1f}/"
        f"{load[1]:.1f}/{load[2]:.1f} at the end); Python {platform.python_version()}",
        f"- {n} exchanges of {args.data.name} per run, one at a time, one every {args.interval:g} s (or as soon as "
        f"the previous one is answered); {args.rounds} rounds (order off, on, on, off, "
        f"...); BRAIN_SUMMARY_EVERY_N={args.every_n}; the model (Ollama test server) answers after "
        f"{args.delay[0]:g}-{args.delay[1]:g} s",
        "",
        "| formation | requests | p50 | p90 | mean | formation calls answered while measuring | summaries |",
        "|---|---|---|---|---|---|---|",
    ]
    for way in ("off", "on"):
        lat = pooled[way]
        lines.append(f"| {way} | {len(lat)} | {p50[way]:.1f} ms | {p90[way]:.1f} ms | {1000 * np.mean(lat):.1f} ms | "
                     f"{sum(r['formation_calls'] for r in runs[way])} | {sum(r['summary_calls'] for r in runs[way])} |")
    pairs = [pct(on["latencies"], 50) / pct(off["latencies"], 50) for off, on in zip(runs["off"], runs["on"])]
    offs = [pct(run["latencies"], 50) for run in runs["off"]]
    lines += ["", f"p50 on/off: **{ratio:.2f}x** (p90 {p90['on'] / p90['off']:.2f}x); target <= {TARGET_P50_RATIO}x: "
              f"**{'met' if ratio <= TARGET_P50_RATIO else 'NOT met'}**. Round by round (each on run against the off "
              f"run next to it in time): median {np.median(pairs):.2f}x, from {min(pairs):.2f}x to {max(pairs):.2f}x; "
              f"the off runs alone differ by up to {max(offs) / min(offs):.2f}x between themselves (the machine's "
              "noise).", "", "Per run, in the order run:", ""]
    order = [(way, i) for i in range(args.rounds) for way in (("off", "on") if i % 2 == 0 else ("on", "off"))]
    for way, i in order:
        run = runs[way][i]
        formation = run["health"].get("formation") or {}
        kept = {k: formation.get(k) for k in ("pending", "done", "failed", "facts", "prompt_tokens", "eval_tokens")}
        lines.append(f"- {way}: p50 {pct(run['latencies'], 50):.1f} ms, p90 {pct(run['latencies'], 90):.1f} ms, "
                     f"{len(run['latencies']) / run['seconds']:.1f} requests/s, "
                     f"formation calls {run['formation_calls']}, "
                     f"summaries {run['summary_calls']}" + (f"; formation in health afterwards: {json.dumps(kept)}"
                                                           if formation.get("enabled") else ""))
    lines.append("")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help=f"LoCoMo JSON (default {DEFAULT_DATA})")
    parser.add_argument("--exchanges", type=int, default=60, help="exchanges measured per run")
    parser.add_argument("--rounds", type=int, default=8, help="runs each way (order off, on, on, off, ...)")
    parser.add_argument("--every-n", type=int, default=2, help="BRAIN_SUMMARY_EVERY_N: exchanges per batch")
    parser.add_argument("--delay", default="0.5,2.0", help="the model's delay, seconds: low,high")
    parser.add_argument("--interval", type=float, default=0.5,
                        help="seconds from one request's start to the next's (0: back to back)")
    parser.add_argument("--out", type=Path, help="also write the report to this file")
    args = parser.parse_args()
    args.command = ".venv/bin/python bench/bench_exchange_latency.py " + " ".join(sys.argv[1:])
    if not args.data.is_absolute():
        args.data = INVOKED_FROM / args.data
    if not args.data.is_file():
        parser.error(f"{args.data} does not exist: pass --data PATH to a LoCoMo JSON file")
    try:
        low, high = (float(x) for x in args.delay.split(","))
    except ValueError:
        parser.error(f"--delay {args.delay!r}: give two numbers of seconds, low,high (e.g. 0.5,2.0)")
    if not 0 <= low <= high:
        parser.error(f"--delay {args.delay!r}: need 0 <= low <= high")
    args.delay = (low, high)
    os.chdir(ROOT)
    bodies = exchange_bodies(args.data, args.exchanges)
    model = ScriptedModel(low, high)
    runs: dict[str, list[dict]] = {"off": [], "on": []}
    tmp = Path(tempfile.mkdtemp(prefix="bench-exchange-latency-"))
    try:
        with OllamaStub(models={}, chat_models=[MODEL]) as stub:
            stub.chat_script.extend([model] * 1_000_000)  # every chat call, however many
            for r in range(args.rounds):
                for way in (("off", "on") if r % 2 == 0 else ("on", "off")):
                    runs[way].append(one_run(tmp, f"{way}-{r}", way == "on", bodies, stub, model, args.every_n,
                                             args.interval))
                    print(f"round {r + 1} {way}: p50 {pct(runs[way][-1]['latencies'], 50):.1f} ms", file=sys.stderr)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    text = report(args, runs, len(bodies))
    print(text)
    if args.out:
        out = args.out if args.out.is_absolute() else INVOKED_FROM / args.out
        out.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
