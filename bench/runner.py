"""The harness: what a benchmark is, how results are recorded, the table and the files.

A benchmark is a function `run(ctx) -> Outcome`. An Outcome holds the inputs (sizes, what data),
the numbers measured, and named checks (target → passed?). The runner adds timing, the machine
load before and after (the host is shared, so every number is read next to it), and turns
exceptions into an `error` row instead of stopping the run.
"""
from __future__ import annotations

import json
import os
import platform
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parent.parent


@dataclass
class Context:
    """What every benchmark gets: sizes shrink with `quick` (the smoke test), a scratch folder,
    the real-data folder, and the database the runner made for this run."""

    quick: bool
    work_dir: Path
    data_dir: Path
    database_url: str
    vendor: str  # "postgresql" or "sqlite"

    def size(self, full: int, quick: int) -> int:
        return quick if self.quick else full


@dataclass
class Check:
    target: str
    passed: bool
    measured: str


@dataclass
class Outcome:
    inputs: dict[str, Any] = field(default_factory=dict)
    numbers: dict[str, Any] = field(default_factory=dict)
    checks: list[Check] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    skipped: str = ""  # non-empty: not run here, and why

    def check(self, target: str, passed: bool, measured: str) -> None:
        self.checks.append(Check(target=target, passed=bool(passed), measured=measured))


@dataclass
class Benchmark:
    name: str
    title: str
    target: str  # the target, in words
    run: Callable[[Context], Outcome]


@dataclass
class Result:
    name: str
    title: str
    target: str
    status: str  # pass | fail | skipped | error
    passed: bool | None
    inputs: dict[str, Any]
    numbers: dict[str, Any]
    checks: list[dict]
    notes: list[str]
    seconds: float
    started_at: str
    load_before: list[float]
    load_after: list[float]
    quick: bool
    database: str
    error: str = ""


def percentiles(values: Sequence[float]) -> dict[str, float | None]:
    """p50/p95/p99 in milliseconds of latencies given in seconds (None when empty)."""
    if not values:
        return {"p50_ms": None, "p95_ms": None, "p99_ms": None}
    p50, p95, p99 = np.percentile(np.asarray(values, dtype=float) * 1000.0, [50, 95, 99])
    return {"p50_ms": round(float(p50), 1), "p95_ms": round(float(p95), 1),
            "p99_ms": round(float(p99), 1)}


def torch_threads() -> int:
    """Intra-op threads for the torch benchmarks: 1 unless BENCH_TORCH_THREADS says otherwise.
    On a shared 2-core host torch's default (one thread per core) spins against the other
    processes: one-at-a-time MiniLM inference measured 0.8 items/s with 2 threads against 12
    with 1 at load average 11, which would make any comparison measure the neighbours."""
    return int(os.environ.get("BENCH_TORCH_THREADS", "1"))


def load_average() -> list[float]:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []


def machine_info() -> dict[str, Any]:
    import torch

    info = {
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.cuda.is_available(),
        "torch_threads": torch.get_num_threads(),
    }
    try:
        with open("/proc/meminfo") as handle:
            total_kb = int(handle.readline().split()[1])
        info["memory_gb"] = round(total_kb / 1024 / 1024, 1)
    except (OSError, ValueError, IndexError):
        pass
    return info


def run_one(benchmark: Benchmark, ctx: Context, *, profile_dir: Path | None = None) -> Result:
    """Run one benchmark; with `profile_dir`, under pyinstrument, writing `<name>.txt` and
    `<name>.html` there (the load benchmark's server work happens in gunicorn's processes and
    is not in that profile)."""
    started_at = datetime.now(UTC).isoformat(timespec="seconds")
    load_before = load_average()
    profiler = None
    if profile_dir is not None:
        from pyinstrument import Profiler

        profiler = Profiler(interval=0.005)
        profiler.start()
    started = time.perf_counter()
    outcome, error = Outcome(), ""
    try:
        outcome = benchmark.run(ctx)
    except Exception:  # noqa: BLE001 - one broken benchmark must not hide the others' numbers
        error = traceback.format_exc(limit=8)
    seconds = round(time.perf_counter() - started, 1)
    if profiler is not None:
        profiler.stop()
        profile_dir.mkdir(parents=True, exist_ok=True)
        (profile_dir / f"{benchmark.name}.txt").write_text(
            profiler.output_text(unicode=False, color=False))
        (profile_dir / f"{benchmark.name}.html").write_text(profiler.output_html())
    if error:
        status, passed = "error", False
    elif outcome.skipped:
        status, passed = "skipped", None
    else:
        passed = all(c.passed for c in outcome.checks)
        status = "pass" if passed else "fail"
    if outcome.skipped:
        outcome.notes.insert(0, f"skipped: {outcome.skipped}")
    return Result(
        name=benchmark.name, title=benchmark.title, target=benchmark.target, status=status,
        passed=passed, inputs=outcome.inputs, numbers=outcome.numbers,
        checks=[asdict(c) for c in outcome.checks], notes=outcome.notes, seconds=seconds,
        started_at=started_at, load_before=load_before, load_after=load_average(),
        quick=ctx.quick, database=ctx.vendor, error=error,
    )


# --- Output --------------------------------------------------------------------------------------


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 1000 else f"{value:,.0f}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value)


def table(results: Sequence[Result]) -> str:
    """The console table: one line per check (a benchmark without checks gets one line)."""
    rows = [("benchmark", "status", "target", "measured", "time")]
    for r in results:
        checks = r.checks or [{"target": r.target, "measured": (r.notes or [""])[0][:60],
                               "passed": r.passed}]
        for n, c in enumerate(checks):
            mark = "ok" if c["passed"] else ("-" if c["passed"] is None else "MISS")
            rows.append((r.name if n == 0 else "", r.status if n == 0 else "",
                         f"{c['target']} [{mark}]", c["measured"],
                         f"{r.seconds:.0f}s" if n == 0 else ""))
    widths = [min(max(len(row[i]) for row in rows), 60) for i in range(len(rows[0]))]
    lines = []
    for i, row in enumerate(rows):
        lines.append("  ".join(cell[:60].ljust(widths[j]) for j, cell in enumerate(row)))
        if i == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def merge_results(path: Path, results: Sequence[Result], machine: dict,
                  run: dict | None = None) -> dict:
    """results.json keeps the latest result of every benchmark: a run of one (`B=name`)
    replaces that benchmark's entry and keeps the others. `run` describes the invocation that
    produced `results` ({"id", "benchmarks", "wall_s"}); each entry keeps its run id, so the
    document can tell numbers measured side by side from ones merged from earlier runs."""
    previous: dict = {}
    if path.is_file():
        try:
            previous = json.loads(path.read_text())
        except (OSError, ValueError):
            previous = {}
    by_name = {b["name"]: b for b in previous.get("benchmarks", []) if isinstance(b, dict)}
    for result in results:
        by_name[result.name] = asdict(result) | ({"run_id": run["id"]} if run else {})
    from . import registry

    order = {name: n for n, name in enumerate(registry.names())}
    document = {
        "written_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine,
        "last_run": run or previous.get("last_run"),
        "benchmarks": sorted(by_name.values(), key=lambda b: order.get(b["name"], 99)),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=2, default=str) + "\n")
    return document
