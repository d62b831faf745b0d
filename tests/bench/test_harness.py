"""The benchmark harness cannot rot: its pieces (percentiles, the table, merging results of a
single-benchmark run, the generated document) and a real `python -m bench --quick` run of every
benchmark on tiny inputs in a subprocess (its own server, database and files). Speed targets are
not asserted here; they live in `make bench`."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.db import connection

from bench import registry
from bench.document import render
from bench.runner import Benchmark, Context, Outcome, merge_results, percentiles, run_one, table

REPO = Path(__file__).resolve().parent.parent.parent


def _ctx(tmp_path) -> Context:
    return Context(quick=True, work_dir=tmp_path, data_dir=tmp_path, database_url="",
                   vendor="sqlite")


def test_percentiles_are_in_milliseconds_and_empty_is_none():
    values = [i / 1000 for i in range(1, 101)]  # 1..100 ms
    got = percentiles(values)
    assert got["p50_ms"] == pytest.approx(50.5, abs=0.1)
    assert got["p95_ms"] == pytest.approx(95.05, abs=0.1)
    assert got["p99_ms"] == pytest.approx(99.01, abs=0.1)
    assert percentiles([]) == {"p50_ms": None, "p95_ms": None, "p99_ms": None}


def test_run_one_turns_checks_into_status_and_a_crash_into_an_error_row(tmp_path):
    def passing(ctx):
        outcome = Outcome(inputs={"n": 1}, numbers={"s": 0.5})
        outcome.check("fast", True, "0.5 s")
        return outcome

    def missing(ctx):
        outcome = Outcome()
        outcome.check("fast", True, "1 s")
        outcome.check("faster", False, "9 s")
        return outcome

    def crashing(ctx):
        raise RuntimeError("boom")

    ctx = _ctx(tmp_path)
    ok = run_one(Benchmark("a", "A", "t", passing), ctx)
    miss = run_one(Benchmark("b", "B", "t", missing), ctx)
    crash = run_one(Benchmark("c", "C", "t", crashing), ctx)
    skipped = run_one(Benchmark("d", "D", "t", lambda c: Outcome(skipped="no GPU")), ctx)
    assert (ok.status, ok.passed, ok.numbers) == ("pass", True, {"s": 0.5})
    assert (miss.status, miss.passed) == ("fail", False)
    assert crash.status == "error" and "RuntimeError: boom" in crash.error
    assert skipped.status == "skipped" and skipped.notes == ["skipped: no GPU"]
    text = table([ok, miss, crash])
    assert "faster [MISS]" in text and "fast [ok]" in text and "error" in text


def test_a_single_benchmark_run_replaces_its_entry_and_keeps_the_others(tmp_path):
    path = tmp_path / "results.json"
    ctx = _ctx(tmp_path)

    def make(name, value):
        def run(ctx):
            outcome = Outcome(numbers={"value": value})
            outcome.check("value small", value < 5, str(value))
            return outcome
        return run_one(Benchmark(name, name, "t", run), ctx)

    first_run = {"id": "run-1", "benchmarks": ["reports", "publishing"], "wall_s": 60.0}
    merge_results(path, [make("reports", 1), make("publishing", 2)], {"cpus": 2}, first_run)
    second_run = {"id": "run-2", "benchmarks": ["reports"], "wall_s": 30.0}
    document = merge_results(path, [make("reports", 9)], {"cpus": 2}, second_run)
    on_disk = json.loads(path.read_text())
    assert on_disk == json.loads(json.dumps(document, default=str))
    by_name = {b["name"]: b for b in on_disk["benchmarks"]}
    assert by_name["reports"]["numbers"] == {"value": 9}
    assert by_name["reports"]["status"] == "fail"
    assert by_name["publishing"]["numbers"] == {"value": 2}
    # Registry order, not insertion order.
    assert [b["name"] for b in on_disk["benchmarks"]] == ["reports", "publishing"]
    text = render(on_disk)
    assert "## Method" in text and "❌ miss" in text and "value small" in text
    assert "Reports:" in text  # the benchmark module's docstring explains how it is measured
    # Numbers measured in another run than the last are named as such.
    assert on_disk["last_run"] == second_run
    assert (by_name["reports"]["run_id"], by_name["publishing"]["run_id"]) == ("run-2", "run-1")
    assert "Last run run-2: reports in one process, 0.5 min" in text
    assert "Merged from earlier runs: publishing." in text


def test_every_registered_benchmark_has_a_docstring_and_a_target():
    for name in registry.names():
        benchmark = registry.get(name)
        assert benchmark.name == name and benchmark.target and benchmark.title
    with pytest.raises(KeyError):
        registry.get("nope")


@pytest.mark.slow
def test_quick_run_of_every_benchmark_end_to_end(tmp_path, shared_data):
    env = {**os.environ, "QAJ_SHARED_DATA": str(shared_data)}
    command = [sys.executable, "-m", "bench", "--quick", "--output-dir", str(tmp_path)]
    if connection.vendor == "postgresql":
        # The harness makes and drops its own throwaway database next to the test database.
        settings = connection.settings_dict
        env["BENCH_POSTGRES_ADMIN_URL"] = (
            f"postgres://{settings['USER']}@{settings['HOST'] or '127.0.0.1'}:"
            f"{settings['PORT'] or 5432}/postgres")
    else:
        command += ["--database-url", f"sqlite:///{tmp_path / 'bench.sqlite3'}"]
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=600)
    results_path = tmp_path / "results.json"
    errors = [b["error"] for b in json.loads(results_path.read_text())["benchmarks"]
              if b["error"]] if results_path.is_file() else []
    assert done.returncode == 0, "\n".join(errors) or done.stdout[-3000:] + done.stderr[-3000:]
    results = json.loads(results_path.read_text())
    by_name = {b["name"]: b for b in results["benchmarks"]}
    assert set(by_name) == set(registry.names())
    for name, b in by_name.items():
        assert b["status"] != "error", (name, b["error"])
        assert b["quick"] is True and b["checks"], name
    # Checks that hold at any size: nothing lost, nothing published twice, same LERC scores.
    load = by_name["annotator_load"]
    assert load["numbers"]["judgments_acknowledged"] > 0
    assert load["numbers"]["judgments_in_database"] == load["numbers"]["judgments_acknowledged"]
    assert by_name["import_export"]["passed"] and by_name["publishing"]["passed"]
    assert by_name["metric_throughput"]["numbers"]["lerc"]["max_abs_score_difference"] < 1e-3
    served = by_name["metric_throughput"]["numbers"]["lerc_served"]
    assert served["calibrator_inputs"] == "semantic"
    for part in ("with_encoder", "without_encoder"):  # every answer got a verdict
        assert served[part]["judged"] > 0 and served[part]["answers_per_s"] > 0
    assert by_name["lerc_training"]["numbers"]["cpu"]["examples_per_s"] > 0
    padding = by_name["lerc_training"]["numbers"]["padding_share"]
    assert padding["length_bucketed"] < padding["plain_shuffle"]
    document = (tmp_path / "PERFORMANCE.md").read_text()
    assert "quick mode: plumbing only" in document
    assert results["last_run"]["benchmarks"] == registry.names()
    assert "Every row above comes from this run." in document
    assert all(f"### {name}" in document for name in registry.names())


def test_profile_option_writes_a_pyinstrument_profile_naming_the_slow_function(tmp_path):
    def slow_part():
        total = 0
        for i in range(2_000_000):
            total += i * i
        return total

    def run(ctx):
        outcome = Outcome(numbers={"total": slow_part()})
        outcome.check("ran", True, "yes")
        return outcome

    result = run_one(Benchmark("prof", "P", "t", run), _ctx(tmp_path),
                     profile_dir=tmp_path / "profiles")
    assert result.status == "pass"
    assert "slow_part" in (tmp_path / "profiles" / "prof.txt").read_text()
    assert (tmp_path / "profiles" / "prof.html").stat().st_size > 0
