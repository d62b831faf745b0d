"""Fewer human judgments for the same certainty: a simulation on the 23,499 judged EVOUNA answers.

For each of the five systems (fid, gpt35, chatgpt, gpt4, newbing; NQ and TriviaQA pooled, about
4,700 answers each) the "full-data value" is its accuracy over every judged answer. A study with
a human budget of n judgments per system is simulated many times, and three estimators
(metrics_app/domain/estimates.py, the code the reports run) are compared:

- human: n answers drawn at random, humans alone (bootstrap interval);
- ppi: the same n answers plus the metric's P(correct) on every answer (PPI++);
- active: answers sent to humans with probability ∝ the metric's uncertainty (expected n),
  inverse-probability weighted (active inference);
- ppi_superpopulation: ppi-python's own PPI++ interval, for comparison (no finite-population
  correction).

The metric never saw the questions: each answer's P(correct) comes from a judge trained on the
*other* dataset — LERC's `cross` runs of scripts/bench_lerc.py when their saved predictions
exist (var/bench-lerc/cross-*/test-predictions.json), else the lexical judge (the calibrated
judge without the encoder) fitted on the other dataset's judgments here.

Numbers per method and budget, averaged over systems: coverage of the full-data value, mean
interval width, root mean squared error, and the effective sample size (the human-only budget
giving the same mean width: n·(width_human / width_method)²).

    .venv/bin/python -m bench.efficiency [--reps 500] [--budgets 100,200,500,1000]
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

from .runner import REPO, Benchmark, Context, Outcome

BUDGETS = (100, 200, 500, 1000)
METHODS = ("human", "ppi", "active", "ppi_superpopulation")
SYSTEMS = ("fid", "gpt35", "chatgpt", "gpt4", "newbing")
LERC_PREDICTIONS = REPO / "var" / "bench-lerc"


def judged_answers(data_dir: Path) -> list[dict]:
    """Every judged EVOUNA answer: id, dataset, system, question, references, candidate, label."""
    from annotation.domain.likert_scale import is_likert_correct
    from annotation.importers import evouna

    rows = []
    for name in ("evouna_nq.json", "evouna_tq.json"):
        for record in evouna.parse(data_dir / "open_qa_judgments" / name):
            if record.excluded or not record.judgments:
                continue
            content = record.content
            rows.append({"id": record.external_id, "dataset": record.dataset,
                         "system": record.external_id.rsplit("/", 1)[-1],
                         "question": content["question"],
                         "references": tuple(content["references"]),
                         "candidate": content["candidate"],
                         "label": int(is_likert_correct(record.judgments[0].score))})
    return rows


def lerc_cross_predictions(rows: list[dict]) -> dict[str, float] | None:
    """P(correct) of every answer from the LERC trained on the other dataset, if both cross runs
    of bench_lerc saved their predictions."""
    predictions: dict[str, float] = {}
    for run in ("cross-nq-to-tq", "cross-tq-to-nq"):
        path = LERC_PREDICTIONS / run / "test-predictions.json"
        if not path.is_file():
            return None
        predictions.update(json.loads(path.read_text()))
    if any(row["id"] not in predictions for row in rows):
        return None
    return predictions


def lexical_cross_predictions(rows: list[dict], *, fit_size: int = 3000,
                              seed: int = 0) -> dict[str, float]:
    """P(correct) of every answer from the lexical judge fitted on a seeded sample of the other
    dataset's judgments (answers equal to a reference are judged correct by rule, as served)."""
    from core.text_match import is_exact_match
    from metrics_app.lerc.calibration import fit_calibrator

    rng = np.random.default_rng(seed)
    predictions: dict[str, float] = {}
    for target in ("evouna_nq", "evouna_tq"):
        other = [r for r in rows if r["dataset"] != target
                 and not is_exact_match(r["candidate"], r["references"])]
        fit = [other[i] for i in rng.choice(len(other), size=min(fit_size, len(other)),
                                            replace=False)]
        judge, report = fit_calibrator(
            [0.0] * len(fit), [r["candidate"] for r in fit], [r["references"] for r in fit],
            [5.0 if r["label"] else 1.0 for r in fit], [r["question"] for r in fit],
            sources=[r["system"] for r in fit], questions=[r["question"] for r in fit],
            use_encoder=False)
        if judge is None:
            raise RuntimeError(f"lexical judge not fitted: {report}")
        scored = [r for r in rows if r["dataset"] == target]
        probabilities = judge.probabilities([0.0] * len(scored), [r["candidate"] for r in scored],
                                            [r["references"] for r in scored],
                                            [r["question"] for r in scored])
        for row, p in zip(scored, probabilities, strict=True):
            predictions[row["id"]] = 1.0 if is_exact_match(row["candidate"],
                                                           row["references"]) else p
    return predictions


def simulate(y: np.ndarray, p: np.ndarray, budget: int, reps: int, *, seed: int = 0,
             bootstrap: int = 1000) -> dict[str, dict]:
    """Repeated studies of one system: {method: {coverage, width, rmse, mean_n}}."""
    from metrics_app.domain import estimates

    truth = float(y.mean())
    total = len(y)
    rng = np.random.default_rng(seed)
    pi = estimates.routing_probabilities(p, budget)
    found: dict[str, list] = defaultdict(list)
    for rep in range(reps):
        sample = rng.choice(total, size=budget, replace=False)
        drawn = np.flatnonzero(rng.random(total) < pi)
        results = {
            "human": estimates.human_only(y[sample], n_items=total, n_resamples=bootstrap,
                                          seed=rep),
            "ppi": estimates.prediction_powered(y[sample], p[sample], p),
            "active": estimates.active_estimate(y[drawn], drawn, p, pi),
            "ppi_superpopulation": estimates.superpopulation_ppi(y[sample], p[sample], p),
        }
        for method, result in results.items():
            if result.estimate is None or result.low is None:
                continue
            found[method].append((result.low <= truth <= result.high, result.high - result.low,
                                  (result.estimate - truth) ** 2, result.n_human))
    out = {}
    for method, rows in found.items():
        covered, width, squared, n = (np.array(column, dtype=float) for column in zip(*rows, strict=True))
        out[method] = {"coverage": float(covered.mean()), "width": float(width.mean()),
                       "rmse": float(np.sqrt(squared.mean())), "mean_n": float(n.mean()),
                       "reps": len(rows)}
    return out


def _seeded_subset(rows: list, size: int, rng) -> list:
    if len(rows) <= size:
        return rows
    return [rows[i] for i in sorted(rng.choice(len(rows), size=size, replace=False))]


def efficiency_study(data_dir: Path, *, budgets=BUDGETS, reps: int = 500, metric: str = "auto",
                     progress=None, max_per_system: int | None = None) -> dict:
    """`metric`: "lerc" (the saved cross-run predictions, required), "lexical", or "auto"
    (LERC when saved, else lexical). `max_per_system`: a seeded subset of each system's
    answers (quick mode; the lexical judge's features over all 23,499 answers are most of the
    run)."""
    rows = judged_answers(data_dir)
    if max_per_system:
        rng = np.random.default_rng(0)
        rows = [row for system in SYSTEMS
                for row in _seeded_subset([r for r in rows if r["system"] == system],
                                          max_per_system, rng)]
    predictions = lerc_cross_predictions(rows) if metric in ("auto", "lerc") else None
    if metric == "lerc" and predictions is None:
        raise SystemExit(f"no saved cross-run predictions under {LERC_PREDICTIONS}: run "
                         "scripts/bench_lerc.py --runs cross first")
    metric = "LERC trained on the other dataset (bench_lerc cross runs)"
    if predictions is None:
        predictions = lexical_cross_predictions(rows)
        metric = "lexical judge fitted on the other dataset"
    by_system: dict[str, dict] = {}
    for system in SYSTEMS:
        mine = [r for r in rows if r["system"] == system]
        y = np.array([r["label"] for r in mine], dtype=float)
        p = np.array([predictions[r["id"]] for r in mine], dtype=float)
        by_system[system] = {
            "n_items": len(mine), "accuracy": float(y.mean()),
            "metric_accuracy": float((p >= 0.5).mean()),
            "correlation": float(np.corrcoef(y, p)[0, 1]),
            "budgets": {}}
        for index, budget in enumerate(budgets):
            started = time.monotonic()
            by_system[system]["budgets"][str(budget)] = simulate(y, p, budget, reps,
                                                                 seed=index)
            if progress:
                progress(f"{system} n={budget}: {time.monotonic() - started:.0f} s")
    summary = {}
    for budget in budgets:
        row = {}
        for method in METHODS:
            cells = [by_system[s]["budgets"][str(budget)].get(method) for s in SYSTEMS]
            cells = [c for c in cells if c]
            if not cells:
                continue
            row[method] = {key: float(np.mean([c[key] for c in cells]))
                           for key in ("coverage", "width", "rmse", "mean_n")}
            row[method]["min_coverage"] = min(c["coverage"] for c in cells)
            row[method]["max_coverage"] = max(c["coverage"] for c in cells)
        human_width = row["human"]["width"]
        for cell in row.values():
            cell["effective_n"] = budget * (human_width / cell["width"]) ** 2
        summary[str(budget)] = row
    return {"metric": metric, "reps": reps, "judged_answers": len(rows),
            "systems": by_system, "summary": summary}


def markdown(study: dict) -> str:
    lines = [f"Metric: {study['metric']}; {study['reps']} simulated studies per system and "
             f"budget; {study['judged_answers']} judged answers.", "",
             "| human budget per system | method | coverage (min–max over systems) | "
             "mean 95% width | RMSE | effective n |",
             "| --- | --- | --- | --- | --- | --- |"]
    for budget, row in study["summary"].items():
        for method, cell in row.items():
            lines.append(
                f"| {budget} | {method} | {cell['coverage']:.3f} ({cell['min_coverage']:.3f}–"
                f"{cell['max_coverage']:.3f}) | {cell['width'] * 100:.2f} pts | "
                f"{cell['rmse'] * 100:.2f} pts | {cell['effective_n']:.0f} |")
    lines += ["", "| system | answers | human accuracy | metric's accuracy (P ≥ 0.5) | "
              "corr(label, P) |", "| --- | --- | --- | --- | --- |"]
    for system, row in study["systems"].items():
        lines.append(f"| {system} | {row['n_items']} | {row['accuracy']:.3f} | "
                     f"{row['metric_accuracy']:.3f} | {row['correlation']:.3f} |")
    return "\n".join(lines)


def check_targets(study: dict, outcome: Outcome) -> None:
    """Coverage is judged on the mean over the five systems (2,500 studies at 500 per system:
    Monte-Carlo error ±0.9 points at 95%); one system's 500 studies carry ±1.9 points, so
    its min–max is reported, not checked."""
    summary = study["summary"]
    for budget, row in summary.items():
        for method in ("human", "ppi", "active"):
            if method in row:
                cell = row[method]
                outcome.check(f"{method} coverage 93–97% at n={budget}",
                              0.93 <= cell["coverage"] <= 0.97,
                              f"{cell['coverage']:.3f} (systems {cell['min_coverage']:.3f}–"
                              f"{cell['max_coverage']:.3f})")
    if "200" in summary:
        row = summary["200"]
        outcome.check("PPI effective n ≥ 1.5 × human-only at 200 judgments",
                      row["ppi"]["effective_n"] >= 300, f"{row['ppi']['effective_n']:.0f}")
    for budget, row in summary.items():
        outcome.check(f"active routing narrower than random PPI at n={budget}",
                      row["active"]["width"] < row["ppi"]["width"],
                      f"{row['active']['width'] * 100:.2f} vs {row['ppi']['width'] * 100:.2f} pts")


def run(ctx: Context) -> Outcome:
    reps = ctx.size(500, 40)
    budgets = BUDGETS if not ctx.quick else (100, 200)
    outcome = Outcome(inputs={"reps": reps, "budgets": list(budgets)})
    study = efficiency_study(ctx.data_dir, budgets=budgets, reps=reps,
                             max_per_system=ctx.size(0, 600))
    outcome.inputs["metric"] = study["metric"]
    outcome.numbers = {"summary": study["summary"]}
    check_targets(study, outcome)
    outcome.notes.append(markdown(study))
    return outcome


BENCHMARK = Benchmark(
    name="efficiency",
    title="Human judgments saved: PPI and active routing on EVOUNA (simulation)",
    target="coverage 93–97% for every method; PPI ≥ 1.5× human-only effective n at 200; "
           "active routing ahead of random at equal coverage",
    run=run,
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data")
    parser.add_argument("--reps", type=int, default=500)
    parser.add_argument("--budgets", default=",".join(map(str, BUDGETS)))
    parser.add_argument("--metric", choices=("auto", "lerc", "lexical"), default="auto")
    parser.add_argument("--out", type=Path, default=REPO / "var" / "efficiency.json")
    args = parser.parse_args()
    sys.path.insert(0, str(REPO))
    study = efficiency_study(args.data, budgets=[int(b) for b in args.budgets.split(",")],
                             reps=args.reps, metric=args.metric, progress=lambda m: print(m, file=sys.stderr))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(study, indent=2))
    print(markdown(study))


if __name__ == "__main__":
    main()
