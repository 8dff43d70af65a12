"""Specialist discovery: accuracy of find_specialists, band calibration, and lookup cost.

    .venv/bin/python bench/specialists_eval.py [--yaml config/specialists.yaml]

Labelled sets of requests ({"request", "expected": specialist id or null for "no specialist"}):

* ``bench/specialists_calibration.jsonl`` -- the development set: the YAML phrases and the band
  thresholds were tuned on it;
* ``bench/specialists_requests.jsonl`` -- the evaluation set;
* ``bench/specialists_holdout.jsonl`` -- never tuned on (scored once per frozen YAML revision);
* ``bench/specialists_holdout2.jsonl`` -- written blind by someone who did not see the YAML revision,
  scored once after that YAML was frozen; later used, with the three sets above, to choose the
  lexical share's weight and the bands;
* ``bench/specialists_holdout3.jsonl`` -- written blind (the writer saw neither the YAML nor the other
  sets), scored once after the lexical share and the bands were frozen; its misses were then seen;
* ``bench/specialists_holdout4.jsonl`` -- written blind the same way (144 requests), scored once after
  the YAML revision chosen on the five sets above was frozen. A second annotator labelled its
  requests from the specialists' descriptions alone (``specialists_holdout4_annotator2.jsonl``, with
  an ``alt`` where a second specialist is defensible); the agreement and the accuracy on the requests
  both label alike are printed too.

Band thresholds derived from the calibration set (printed next to the defaults in code):

* possible -- the cut between the top scores of calibration requests whose top-1 is right and the
  top scores of requests that match no specialist that misclassifies fewest (midpoint of the gap;
  of cuts with equally few errors, the highest, so fewer no-match requests reach ``possible``);
* strong -- the median score a specialist's own predicate phrases get when sent as requests: a
  request that says it the way the YAML does;
* good -- halfway between the two. (The lowest score above every wrong top-1 and every no-match
  top score is printed too; with MiniLM it sits right on ``possible``, so the data cannot place
  ``good`` by precision.)

Everything runs on a fresh embedded store in a temporary directory with the real local embedder.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from brain.config import Settings
from brain.core import open_store
from brain.specialists import SpecialistBands, SpecialistRegistry, SpecialistWeights

SETS = {
    "calibration": ROOT / "bench" / "specialists_calibration.jsonl",
    "eval": ROOT / "bench" / "specialists_requests.jsonl",
    "holdout": ROOT / "bench" / "specialists_holdout.jsonl",
    "holdout2": ROOT / "bench" / "specialists_holdout2.jsonl",
    "holdout3": ROOT / "bench" / "specialists_holdout3.jsonl",
    "holdout4": ROOT / "bench" / "specialists_holdout4.jsonl",
}
#: a second annotator's labels of holdout4 ({"n", "label", "alt"}), given the descriptions only
SECOND_ANNOTATOR = {"holdout4": ROOT / "bench" / "specialists_holdout4_annotator2.jsonl"}
LABELS = {"holdout": "holdout (seen)", "holdout2": "holdout2 (blind, then used to choose the lexical weight)",
          "holdout3": "holdout3 (blind, scored once; then seen)", "holdout4": "holdout4 (blind, scored once)"}


def read_set(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def run(registry: SpecialistRegistry, rows: list[dict]) -> list[tuple[dict, list]]:
    registry.clear_cache()
    return [(row, registry.find_specialists(row["request"], k=3)) for row in rows]


def metrics(results: list[tuple[dict, list]]) -> dict:
    matching = [(r, m) for r, m in results if r["expected"]]
    none = [(r, m) for r, m in results if not r["expected"]]
    top1 = [m[0].id == r["expected"] for r, m in matching]
    top3 = [r["expected"] in [x.id for x in m] for r, m in matching]
    bands_right = [m[0].band for (r, m), ok in zip(matching, top1) if ok]
    return {
        "n_match": len(matching),
        "n_none": len(none),
        "top1": float(np.mean(top1)),
        "top3": float(np.mean(top3)),
        "none_weak": float(np.mean([m[0].band == "weak" for _, m in none])) if none else float("nan"),
        "right_not_weak": float(np.mean([b != "weak" for b in bands_right])) if bands_right else float("nan"),
        "bands_right": {b: bands_right.count(b) for b in ("strong", "good", "possible", "weak")},
        "bands_wrong": {b: [m[0].band for (r, m), ok in zip(matching, top1) if not ok].count(b) for b in ("strong", "good", "possible", "weak")},
        "bands_none": {b: [m[0].band for _, m in none].count(b) for b in ("strong", "good", "possible", "weak")},
        "misses": [(r["request"], r["expected"], m[0].id, round(m[0].score, 3)) for (r, m), ok in zip(matching, top1) if not ok],
    }


def calibrate(registry: SpecialistRegistry, results: list[tuple[dict, list]]) -> dict[str, float]:
    right = sorted(m[0].score for r, m in results if r["expected"] and m[0].id == r["expected"])
    wrong = [m[0].score for r, m in results if r["expected"] and m[0].id != r["expected"]]
    none = sorted(m[0].score for r, m in results if not r["expected"])
    # possible: fewest errors (a right match below the cut, a no-match at or above it), midpoint of the gap
    candidates = sorted(set(right + none))
    best = None
    for lo, hi in zip(candidates, candidates[1:]):
        cut = (lo + hi) / 2
        errors = sum(s < cut for s in right) + sum(s >= cut for s in none)
        if best is None or errors <= best[0]:  # ties: the highest such cut
            best = (errors, cut)
    possible = best[1]
    # the lowest score above every wrong top-1 and every no-match top score (printed for reference:
    # with MiniLM it lands right on `possible`, so it cannot place `good`)
    ceiling = max(wrong + none)
    precise = min((s for s in right if s > ceiling), default=ceiling)
    # strong: how a specialist's own predicate phrases score for it
    own = []
    for spec in registry.list_specialists():
        for phrase in spec.semantics.predicates:
            own.append(next(m.score for m in registry.find_specialists(phrase, k=len(registry)) if m.id == spec.id))
    strong = statistics.median(own)
    good = (possible + strong) / 2
    return {"possible": round(possible, 3), "good": round(good, 3), "strong": round(strong, 3), "precise": round(precise, 3)}


def agreement(name: str, results: list[tuple[dict, list]], second: list[dict]) -> str:
    """How the set's labels agree with a second annotator's, and top-1 on the requests both label alike."""
    if len(second) != len(results):
        raise SystemExit(f"{name}: the second annotator labelled {len(second)} requests, the set has {len(results)}")
    agree = [(r, m) for (r, m), b in zip(results, second) if r["expected"] == b["label"]]
    matching = [(r, m) for r, m in agree if r["expected"]]
    top1 = float(np.mean([m[0].id == r["expected"] for r, m in matching])) if matching else float("nan")
    # a top-1 either annotator would accept: the set's label, the second label or the second's alt
    accepted = [m[0].id in {r["expected"], b["label"], b.get("alt")} for (r, m), b in zip(results, second) if r["expected"]]
    return (
        f"{name}, second annotator: labels agree on {len(agree)} of {len(results)} requests "
        f"({len(agree) / len(results):.3f}); top-1 on the {len(matching)} matching requests both label alike: {top1:.3f}; "
        f"top-1 that either annotator accepts (label or alt), over all matching requests: {float(np.mean(accepted)):.3f}"
    )


def fmt_bands(counts: dict) -> str:
    return " / ".join(str(counts[b]) for b in ("strong", "good", "possible", "weak"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--yaml", type=Path, default=ROOT / "config" / "specialists.yaml")
    parser.add_argument("--sets", default=",".join(SETS), help="comma-separated: " + ", ".join(SETS))
    args = parser.parse_args()
    chosen = [s.strip() for s in args.sets.split(",") if s.strip()]
    if "calibration" not in chosen or any(s not in SETS for s in chosen):
        parser.error(f"--sets must include calibration and name only {', '.join(SETS)}")
    missing = [str(SETS[name]) for name in chosen if not SETS[name].is_file()]
    if missing:
        parser.error(f"missing labelled set(s): {', '.join(missing)}; leave them out with --sets")
    sets = {name: read_set(SETS[name]) for name in chosen}

    with tempfile.TemporaryDirectory() as tmp, open_store(Settings(data_dir=Path(tmp) / "data"), mirror=False) as store:
        registry = SpecialistRegistry(store, path=args.yaml)
        t0 = time.perf_counter()
        first = registry.register()
        t_first = time.perf_counter() - t0
        t0 = time.perf_counter()
        again = registry.register()
        t_again = time.perf_counter() - t0
        print(f"## Registration ({len(registry)} specialists, {store.embedder.name})\n")
        print("| run | texts embedded | seconds |\n|---|---:|---:|")
        print(f"| first | {first.embedded} | {t_first:.3f} |")
        print(f"| unchanged YAML again | {again.embedded} | {t_again:.3f} |\n")

        defaults = SpecialistBands()
        calib = calibrate(registry, run(registry, sets["calibration"]))
        print("## Band thresholds (derived from the calibration set only)\n")
        print("| band | derived | default in code |\n|---|---:|---:|")
        for band in ("strong", "good", "possible"):
            print(f"| {band} | {calib[band]:.3f} | {getattr(defaults, band):.2f} |")
        print(f"\n(lowest score above every wrong top-1 and no-match top score: {calib['precise']:.3f})\n")

        variants = {
            "not-penalty 1.0 over 0.40": dict(not_margin=0.40),
            "default (0.5/0.3/0.2, not-penalty 1.0 over 0.50, lexical share 0.2)": dict(),
            "dense formula only (no lexical share)": dict(lexical_weight=0.0),
            "no not-penalty": dict(not_penalty=0.0),
            "canonical only (1/0/0, not-penalty)": dict(weights=SpecialistWeights(1.0, 0.0, 0.0)),
            "predicates+objects only (0/0.6/0.4)": dict(weights=SpecialistWeights(0.0, 0.6, 0.4)),
        }
        print("## Accuracy per set (default bands)\n")
        print("| set | matching / no-match requests | top-1 | top-3 | no-match banded weak | right top-1 not weak | right top-1 bands s/g/p/w | wrong top-1 bands s/g/p/w | no-match bands s/g/p/w |")
        print("|---|---|---:|---:|---:|---:|---|---|---|")
        all_misses = {}
        for name, rows in sets.items():
            m = metrics(run(registry, rows))
            all_misses[name] = m["misses"]
            print(
                f"| {LABELS.get(name, name)} | {m['n_match']} / {m['n_none']} | {m['top1']:.3f} | {m['top3']:.3f} | {m['none_weak']:.3f} | "
                f"{m['right_not_weak']:.3f} | {fmt_bands(m['bands_right'])} | {fmt_bands(m['bands_wrong'])} | {fmt_bands(m['bands_none'])} |"
            )
        for name, path in SECOND_ANNOTATOR.items():
            if name in sets and path.is_file():
                print()
                print(agreement(name, run(registry, sets[name]), read_set(path)))
        print("\n## Scoring variants: top-1 per set\n")
        print("| variant | " + " | ".join(LABELS.get(name, name) for name in sets) + " |\n|---|" + "---:|" * len(sets))
        for label, overrides in variants.items():
            variant = SpecialistRegistry(store, path=args.yaml, **overrides)
            print(f"| {label} | " + " | ".join(f"{metrics(run(variant, rows))['top1']:.3f}" for rows in sets.values()) + " |")

        print("\n## Misses (default scoring)\n")
        for name, misses in all_misses.items():
            for request, expected, got, score in misses:
                print(f"- {name}: \"{request}\" -> {got} ({score}), expected {expected}")

        # cost of one lookup: embedding the request dominates; the cache skips it
        requests = [r["request"] for rows in sets.values() for r in rows]
        uncached = SpecialistRegistry(store, path=args.yaml, cache_ttl=0)
        store.embedder.clear_cache()
        t0 = time.perf_counter()
        for req in requests:
            uncached.find_specialists(req + " ?")  # text the embedder's own query cache has not seen
        t_uncached = (time.perf_counter() - t0) / len(requests)
        for req in requests:
            registry.find_specialists(req)
        t0 = time.perf_counter()
        for req in requests:
            registry.find_specialists(req)
        t_cached = (time.perf_counter() - t0) / len(requests)
        print("\n## Lookup cost (per request, mean)\n")
        print("| path | microseconds | ratio to uncached |\n|---|---:|---:|")
        print(f"| uncached (embed + score {len(registry)} specialists) | {t_uncached * 1e6:.0f} | 1.00 |")
        print(f"| cached (same request within the TTL) | {t_cached * 1e6:.1f} | {t_cached / t_uncached:.4f} |")


if __name__ == "__main__":
    main()
