"""The agreement report at a million judgments: a synthetic Likert project of 333,334 items × 3
judgments (1,000 workers), and `manage.py report SLUG --json --refresh` run as a researcher runs
it, in its own process, so its wall time includes Django's start-up and its peak RSS is its own
(`os.wait4` gives the child's resource usage, not the benchmark process's).

The anchor is one bare `krippendorff.alpha` (interval) on the same items × values count matrix,
in this process: the ratio is what the whole report costs next to the one statistic a
researcher could compute by hand.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from .reports import bare_alpha
from .runner import REPO, Benchmark, Context, Outcome

TARGET_S = 10.0
TARGET_RSS_GB = 2.0


def report_in_child(slug: str, database_url: str) -> dict:
    """Run `manage.py report SLUG --json --refresh`; wall seconds, peak RSS and the report."""
    env = {**os.environ, "DATABASE_URL": database_url,
           "DJANGO_SETTINGS_MODULE": "bench.settings", "PYTHONUNBUFFERED": "1"}
    started = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, "manage.py", "report", slug, "--json", "--refresh"],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    # Read the pipes before waiting (a full pipe would block the child); then wait4 reaps it
    # and returns this child's own rusage.
    out, err = process.stdout.read(), process.stderr.read()
    _pid, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise RuntimeError(f"report exited {process.returncode}: {err.decode()[-2000:]}")
    return {"seconds": seconds, "peak_rss_gb": usage.ru_maxrss / 1024 / 1024,
            "report": json.loads(out)}


def run(ctx: Context) -> Outcome:
    from metrics_app.reports.benchmark import build_benchmark_project

    n_items = ctx.size(333_334, 400)
    started = time.perf_counter()
    project = build_benchmark_project(n_items=n_items, judgments_per_item=3, n_workers=1000,
                                      slug="bench-million")
    build_s = time.perf_counter() - started
    child = report_in_child(project.slug, ctx.database_url)
    alpha, call_s, read_call_s = bare_alpha(project)
    report = child["report"]
    overall = next(iter(report["agreement"].values()))
    outcome = Outcome(inputs={"items": n_items, "judgments_per_item": 3, "workers": 1000,
                              "data": "synthetic (seeded), 1-5 Likert", "database": ctx.vendor,
                              "command": "manage.py report SLUG --json --refresh (own process)"})
    outcome.numbers = {
        "build_project_s": round(build_s, 1),
        "n_judgments": report["n_judgments"],
        "report_command_s": round(child["seconds"], 2),
        "report_peak_rss_gb": round(child["peak_rss_gb"], 2),
        "report_alpha": overall.get("krippendorff_alpha"),
        "bare_krippendorff_alpha_s": round(call_s, 3),
        "bare_alpha_with_row_read_s": round(read_call_s, 2),
        "bare_alpha": round(alpha, 4),
        "ratio_report_to_bare_alpha_with_read": round(child["seconds"] / read_call_s, 1)
        if read_call_s else None,
    }
    outcome.check(f"report on {3 * n_items:,} judgments < {TARGET_S:.0f} s",
                  child["seconds"] < TARGET_S, f"{child['seconds']:.1f} s (bare alpha with the "
                  f"row read {read_call_s:.1f} s, call alone {call_s:.2f} s)")
    outcome.check(f"peak RSS < {TARGET_RSS_GB:.0f} GB", child["peak_rss_gb"] < TARGET_RSS_GB,
                  f"{child['peak_rss_gb']:.2f} GB")
    outcome.check("the report's α is the bare α",
                  overall.get("krippendorff_alpha") is not None
                  and abs(overall["krippendorff_alpha"] - alpha) < 1e-6,
                  f"{overall.get('krippendorff_alpha')} vs {alpha:.6f}")
    return outcome


BENCHMARK = Benchmark(
    name="report_scale", title="Report on 1,000,000 judgments (333,334 × 3 Likert)",
    target=f"`report` < {TARGET_S:.0f} s on PostgreSQL, peak RSS < {TARGET_RSS_GB:.0f} GB; "
           "anchor: bare krippendorff.alpha on the same matrix", run=run,
)
