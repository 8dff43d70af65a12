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

* ``bench/specialists_holdout5.jsonl`` -- written blind the same way (150 requests for a specialist,
  50 for none), committed before the confidence and the bands were chosen, and scored once after
  they were frozen. The requests its writer hesitated over (``HESITATIONS``, from the writer's
  notes) are left out of the "clear requests" figure. Its misses were then read;
* ``bench/specialists_holdout6.jsonl`` -- written blind the same way (150 / 50), committed before any
  further change was tried, and scored once with the confidence and the bands unchanged since
  holdout5, after the variants tried on the other sets (a stronger embedder, max-pooled predicates)
  were dropped. Its writer's hesitations are left out of the "clear requests" figure the same way;
* ``bench/specialists_holdout7.jsonl`` -- written blind the same way (150 / 50), committed unscored
  after the classifier was frozen, and scored once with it. Its writer's hesitations are in
  ``specialists_holdout7_hesitations.json``.

The eight sets from calibration to holdout6 are the labelled requests of
``config/specialists_examples.jsonl``: the classifier (:mod:`brain.features.specialists.classifier`) learns
each match's confidence from them, so its figures on those sets are in-sample; the script also
scores each blind one of them (holdout2 to holdout6) with a classifier learnt without it. The band is
read from the confidence. Without labelled requests the confidence is a logistic fit on the score and
ln(words) over the six development sets (calibration to holdout4,
:class:`brain.features.specialists.SpecialistConfidence`): the script refits it and prints the coefficients
and the band cut next to the defaults, and shows that rule beside the classifier. Per set it prints a
reliability table: for each band of the top-1, how many requests, how many of them the top-1 got
right, and how many match no specialist.

Everything runs on a fresh embedded store in a temporary directory with the real embedder that
``BRAIN_EMBEDDER`` names: ``local/minilm-l6-v2`` by default (``bench/SPECIALISTS_RESULTS.md``), or

    BRAIN_EMBEDDER=local/multilingual-e5-small .venv/bin/python bench/specialists_eval.py

(``bench/SPECIALISTS_E5_RESULTS.md``). The refitted confidence and the cut are printed next to that
embedder's defaults (``brain.config.SPECIALIST_EMBEDDER_DEFAULTS``), which for an embedder other than
MiniLM were fitted the same way on the same six development sets, and the units its similarities are
mapped into MiniLM's by.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from brain.app.core import open_store
from brain.config import Settings
from brain.features.specialists import (
    CONFIDENCE_MAX_WORDS,
    SpecialistBands,
    SpecialistConfidence,
    SpecialistRegistry,
    SpecialistWeights,
    examples_path,
    normalise_request,
    request_words,
)

SETS = {
    "calibration": ROOT / "bench" / "specialists_calibration.jsonl",
    "eval": ROOT / "bench" / "specialists_requests.jsonl",
    "holdout": ROOT / "bench" / "specialists_holdout.jsonl",
    "holdout2": ROOT / "bench" / "specialists_holdout2.jsonl",
    "holdout3": ROOT / "bench" / "specialists_holdout3.jsonl",
    "holdout4": ROOT / "bench" / "specialists_holdout4.jsonl",
    "holdout5": ROOT / "bench" / "specialists_holdout5.jsonl",
    "holdout6": ROOT / "bench" / "specialists_holdout6.jsonl",
    "holdout7": ROOT / "bench" / "specialists_holdout7.jsonl",
}
#: the sets config/specialists_examples.jsonl was made of (the classifier's training data)
TRAINING = ("calibration", "eval", "holdout", "holdout2", "holdout3", "holdout4", "holdout5", "holdout6")
#: the blind sets scored leave-one-set-out: the classifier trained on the other training sets
LEAVE_ONE_OUT = ("holdout2", "holdout3", "holdout4", "holdout5", "holdout6")
#: the sets the confidence and the bands were fitted on (holdout5 is not one of them)
DEVELOPMENT = ("calibration", "eval", "holdout", "holdout2", "holdout3", "holdout4")
#: holdout5's requests its writer hesitated over (their notes name a second defensible label):
#: a phrase of each request, as the notes quote it
HESITATIONS: dict[str, tuple[str, ...]] = {"holdout5": (
    "what's the euro trading at against the pound", "compute mean, median and standard deviation",
    "find all the primes under 500", "parse this csv", "scanned pdf of my payslip",
    "is there a penalty for cancelling the gym membership", "what does the sign say in this photo",
    "read me the serial number printed on the label", "look at this chart screenshot",
    "copy the text from this poster photo", "text my wife that i'm on my way", "set an alarm for 6:30",
    "what's the formula for compound interest", "book a table for two at dishoom",
), "holdout6": (
    "what does the sign say?", "photo of the bus timetable at the stop",
    "look at this chart screenshot and tell me whether sales went up or down",
    "what does the bar chart in this image show", "does this outfit look formal enough for a wedding",
    "check this picture of my living room", "what did the letter from the council say about the bin collection",
    "according to the boiler manual", "según nuestro contrato de alquiler", "quanto fa 23 per 47",
    "if my loan is 12,000 at 6.9% apr", "here's a csv, can you give me the total per category",
    "compute the standard deviation and median", "execute: import datetime",
    "dedupe this list and count how many unique addresses", "put a reminder in my calendar to renew the car tax",
    "the meeting is moved to thursday", "translate the error message into english", "sonntags geschlossen",
    "who is the current ceo of boeing", "euro to pound exchange rate today", "is it cold out rn",
    "who's that guy standing next to me", "write a python function that reverses a string",
    "help me word a birthday card message", "mean on an insurance policy",
    "how do people usually split a restaurant bill fairly", "explain what compound interest is like i'm 12",
    "organise my week so i don't burn out",
)}
HESITATIONS["holdout7"] = tuple(json.loads(
    (ROOT / "bench" / "specialists_holdout7_hesitations.json").read_text(encoding="utf-8")))
#: a second annotator's labels of holdout4 ({"n", "label", "alt"}), given the descriptions only
SECOND_ANNOTATOR = {"holdout4": ROOT / "bench" / "specialists_holdout4_annotator2.jsonl"}
LABELS = {"holdout": "holdout (seen)", "holdout2": "holdout2 (blind, then used to choose the lexical weight)",
          "holdout3": "holdout3 (blind, scored once; then seen)",
          "holdout4": "holdout4 (blind, scored once; then used to fit the confidence)",
          "holdout5": "holdout5 (blind, scored once; then seen)",
          "holdout6": "holdout6 (blind, scored once; then seen)",
          "holdout7": "holdout7 (blind, scored once)"}
ORDER = ("strong", "good", "possible", "weak")


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
        "right_banded_sure": float(np.mean([ok and m[0].band in ("strong", "good") for (r, m), ok in zip(matching, top1)])),
        "misses": [(r["request"], r["expected"], m[0].id, round(m[0].score, 3), round(m[0].confidence, 3), m[0].band)
                   for (r, m), ok in zip(matching, top1) if not ok],
    }


def is_hesitation(name: str, request: str) -> bool:
    text = normalise_request(request)
    return any(phrase in text for phrase in HESITATIONS.get(name, ()))


def reliability(results: list[tuple[dict, list]]) -> dict[str, tuple[int, int, int, int]]:
    """Per band of the top-1: (requests, right top-1, wrong top-1, no specialist expected)."""
    out = {}
    for band in ORDER:
        rows = [(r, m) for r, m in results if m[0].band == band]
        right = sum(1 for r, m in rows if r["expected"] and m[0].id == r["expected"])
        none = sum(1 for r, m in rows if not r["expected"])
        out[band] = (len(rows), right, len(rows) - right - none, none)
    return out


def features(results: list[tuple[dict, list]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The confidence's inputs for each top-1 (score, ln words capped), whether it is right, whether
    the request expects a specialist."""
    x = np.array([[m[0].score, np.log(min(request_words(normalise_request(r["request"])), CONFIDENCE_MAX_WORDS))]
                  for r, m in results])
    right = np.array([bool(r["expected"]) and m[0].id == r["expected"] for r, m in results])
    return x, right, np.array([bool(r["expected"]) for r, _ in results])


def fit_logistic(x: np.ndarray, y: np.ndarray, l2: float = 1e-2) -> np.ndarray:
    """Intercept and coefficients of a logistic regression (Newton's method, a light ridge on the coefficients)."""
    a = np.column_stack([np.ones(len(x)), x])
    beta = np.zeros(a.shape[1])
    ridge = l2 * np.diag([0.0] + [1.0] * x.shape[1])
    for _ in range(50):
        p = 1 / (1 + np.exp(-a @ beta))
        hessian = a.T @ (a * (p * (1 - p))[:, None]) + ridge
        beta += np.linalg.solve(hessian, a.T @ (y - p) - ridge @ beta)
    return beta


def best_cut(p: np.ndarray, right: np.ndarray, matching: np.ndarray) -> tuple[float, float, float]:
    """The confidence cut that maximises the smaller of: the share of matching requests whose top-1 is
    right and at or above the cut, and the share of no-match requests below it."""
    best = (-1.0, 0.0, 0.0, 0.0)
    for cut in np.unique(p):
        served = float(np.mean(right[matching] & (p[matching] >= cut)))
        weak = float(np.mean(p[~matching] < cut))
        if min(served, weak) > best[0]:
            best = (min(served, weak), float(cut), served, weak)
    return best[1], best[2], best[3]


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


def leave_one_set_out(yaml: Path, sets: dict[str, list[dict]], embedder) -> list[str]:
    """Each blind training set scored by a classifier learnt from the other training sets (a fresh
    store and an examples file without that set, beside a copy of the YAML)."""
    lines = ["| left out | matching / no-match | top-1 | right and strong/good | no-match banded weak |",
             "|---|---|---:|---:|---:|"]
    for left_out in LEAVE_ONE_OUT:
        if left_out not in sets or any(name not in sets for name in TRAINING):
            continue
        with tempfile.TemporaryDirectory() as tmp:
            copy = Path(tmp) / yaml.name
            copy.write_text(yaml.read_text(encoding="utf-8"), encoding="utf-8")
            rows = [row for name in TRAINING if name != left_out for row in sets[name]]
            examples_path(copy).write_text("".join(json.dumps({"request": r["request"], "expected": r["expected"]},
                                                              ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
            # the same embedder: the labelled requests come from its query cache instead of being embedded again
            with open_store(Settings(data_dir=Path(tmp) / "data"), embedder=embedder, mirror=False) as store:
                registry = SpecialistRegistry(store, path=copy)
                registry.register()
                m = metrics(run(registry, sets[left_out]))
        lines.append(f"| {left_out} | {m['n_match']} / {m['n_none']} | {m['top1']:.3f} | "
                     f"{m['right_banded_sure']:.3f} | {m['none_weak']:.3f} |")
    return lines


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

    # every request of the sets is embedded once: they hold more distinct requests than the default query cache
    with tempfile.TemporaryDirectory() as tmp, open_store(
            Settings(data_dir=Path(tmp) / "data", query_cache_size=4096), mirror=False) as store:
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

        scored = SpecialistRegistry(store, path=args.yaml, use_examples=False)  # the score order and confidence
        # the embedder's defaults (brain.config.SPECIALIST_EMBEDDER_DEFAULTS), or what the settings set
        defaults, confidence, units = scored.bands, scored.confidence, scored.units
        print(f"Similarities in the reference embedder's units: (cosine - {units.shift:.3f}) / {units.spread:.2f}\n")
        dev = [name for name in DEVELOPMENT if name in sets]
        if dev == list(DEVELOPMENT):
            x, right, matching = (np.concatenate(parts) for parts in zip(*(features(run(scored, sets[n])) for n in dev)))
            beta = fit_logistic(x, right.astype(float))
            cut, served, weak = best_cut(1 / (1 + np.exp(-(beta[0] + x @ beta[1:]))), right, matching)
            print("## The score-and-length confidence (used without labelled requests), refitted on the six "
                  "development sets\n")
            print(f"| coefficient | refitted | default for {store.embedder.name} |\n|---|---:|---:|")
            for label, value, default in zip(("intercept", "score", "ln(words, at most 40)"), beta,
                                              (confidence.intercept, confidence.score, confidence.length)):
                print(f"| {label} | {value:.2f} | {default:.2f} |")
            print(f"| weak / possible cut (max of the smaller must-show share) | {cut:.3f} | {defaults.possible:.2f} |")
            print(f"\nAt that cut, on the development sets: {served:.3f} of matching requests right and not weak, "
                  f"{weak:.3f} of no-match requests weak. Bands in code: strong > {defaults.strong:.2f}, "
                  f"good >= {defaults.good:.2f}, possible >= {defaults.possible:.2f}.\n")

        variants = {
            "not-penalty 1.0 over 0.40": dict(not_margin=0.40),
            "default (0.5/0.3/0.2, not-penalty 1.0 over 0.50, lexical share 0.2)": dict(),
            "dense formula only (no lexical share)": dict(lexical_weight=0.0),
            "no not-penalty": dict(not_penalty=0.0),
            "canonical only (1/0/0, not-penalty)": dict(weights=SpecialistWeights(1.0, 0.0, 0.0)),
            "predicates+objects only (0/0.6/0.4)": dict(weights=SpecialistWeights(0.0, 0.6, 0.4)),
        }
        print("## Accuracy per set (default bands)\n")
        print("| set | matching / no-match requests | top-1 | top-3 | right and strong/good | no-match banded weak | right top-1 not weak | right top-1 bands s/g/p/w | wrong top-1 bands s/g/p/w | no-match bands s/g/p/w |")
        print("|---|---|---:|---:|---:|---:|---:|---|---|---|")
        all_misses, tables = {}, {}
        for name, rows in sets.items():
            results = run(registry, rows)
            m = metrics(results)
            all_misses[name], tables[name] = m["misses"], reliability(results)
            print(
                f"| {LABELS.get(name, name)} | {m['n_match']} / {m['n_none']} | {m['top1']:.3f} | {m['top3']:.3f} | "
                f"{m['right_banded_sure']:.3f} | {m['none_weak']:.3f} | "
                f"{m['right_not_weak']:.3f} | {fmt_bands(m['bands_right'])} | {fmt_bands(m['bands_wrong'])} | {fmt_bands(m['bands_none'])} |"
            )
            clear = [row for row in rows if not is_hesitation(name, row["request"])]
            if len(clear) < len(rows):
                c = metrics(run(registry, clear))
                print(f"| {name} without the {len(rows) - len(clear)} requests its writer hesitated over | "
                      f"{c['n_match']} / {c['n_none']} | {c['top1']:.3f} | {c['top3']:.3f} | {c['right_banded_sure']:.3f} | "
                      f"{c['none_weak']:.3f} | {c['right_not_weak']:.3f} | {fmt_bands(c['bands_right'])} | "
                      f"{fmt_bands(c['bands_wrong'])} | {fmt_bands(c['bands_none'])} |")
        print("\n## Reliability: the top-1's band -> requests, share whose top-1 is right, share that match no specialist\n")
        print("| set | " + " | ".join(ORDER) + " |\n|---|" + "---|" * len(ORDER))
        for name, table in tables.items():
            cells = []
            for band in ORDER:
                n, right, _wrong, none = table[band]
                cells.append(f"{n}: {right / n:.2f} right, {none / n:.2f} none" if n else "0")
            print(f"| {LABELS.get(name, name)} | " + " | ".join(cells) + " |")
        pooled = {band: tuple(sum(t[band][i] for n, t in tables.items() if n in DEVELOPMENT) for i in range(4)) for band in ORDER}
        cells = [f"{n}: {r / n:.2f} right, {no / n:.2f} none" if n else "0" for n, r, _w, no in pooled.values()]
        print("| all development sets | " + " | ".join(cells) + " |")
        for name, path in SECOND_ANNOTATOR.items():
            if name in sets and path.is_file():
                print()
                print(agreement(name, run(registry, sets[name]), read_set(path)))
        # the previous rule, bands on the raw score, is the confidence with intercept 0, score 1 and no
        # length term and the thresholds mapped through the same logistic
        def sig(v: float) -> float:
            return float(1 / (1 + np.exp(-v)))

        rules = {
            "classifier's probability (default, with config/specialists_examples.jsonl)": registry,
            "score-and-length confidence (no labelled requests)": scored,
            "previous rule: score bands 0.67 / 0.48 / 0.30": SpecialistRegistry(
                store, path=args.yaml, use_examples=False, confidence=SpecialistConfidence(0.0, 1.0, 0.0),
                bands=SpecialistBands(strong=sig(0.67), good=sig(0.48), possible=sig(0.30))),
        }
        print("\n## Band rules: right and strong/good, no-match banded weak, per set\n")
        print("| rule | " + " | ".join(LABELS.get(name, name) for name in sets) + " |\n|---|" + "---|" * len(sets))
        for label, variant in rules.items():
            cells = [metrics(run(variant, rows)) for rows in sets.values()]
            print(f"| {label} | " + " | ".join(f"{c['right_banded_sure']:.3f} / {c['none_weak']:.3f}" for c in cells) + " |")

        print("\n## Scoring variants, in score order (no classifier): top-1 per set\n")
        print("| variant | " + " | ".join(LABELS.get(name, name) for name in sets) + " |\n|---|" + "---:|" * len(sets))
        for label, overrides in variants.items():
            variant = SpecialistRegistry(store, path=args.yaml, use_examples=False, **overrides)
            print(f"| {label} | " + " | ".join(f"{metrics(run(variant, rows))['top1']:.3f}" for rows in sets.values()) + " |")

        print("\n## Leave one set out: the classifier learnt without the set it scores\n")
        print("\n".join(leave_one_set_out(args.yaml, sets, store.embedder)))

        print("\n## Misses (default scoring)\n")
        for name, misses in all_misses.items():
            for request, expected, got, score, conf, band in misses:
                print(f"- {name}: \"{request}\" -> {got} ({score}, confidence {conf}, {band}), expected {expected}")

        print("\n## No-match requests not banded weak, and right top-1s banded weak\n")
        for name, rows in sets.items():
            for r, m in run(registry, rows):
                top = m[0]
                if (not r["expected"] and top.band != "weak") or (r["expected"] == top.id and top.band == "weak"):
                    what = "no match" if not r["expected"] else "right, weak"
                    print(f"- {name} ({what}): \"{r['request']}\" -> {top.id} ({top.score:.3f}, confidence {top.confidence:.3f}, {top.band})")

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
