"""Annotator load: gunicorn (2 sync workers) on 127.0.0.1 against the run's database, driven by
an asyncio + httpx load generator in this process.

Items: EVOUNA NQ answers (real questions, references and system answers), grouped by question so
a task page shows the five systems' answers to one question (items_per_hit=5, 3 judgments each),
published in-house; every simulated annotator has a personal in-house link.

Phases, all on the same server:
1. bare view    — 32 clients in a closed loop on `/bench/bare/` (bench.urls; no database).
2. task page    — 32 clients in a closed loop re-opening their task page (a full render each
                  time: link check, assignment lookup/touch, items, template).
   The throughput ratio of phase 2 to phase 1 is the platform's cost over bare Django.
3. annotators   — 32 annotators for 60 s: open the task page, judge (think time), submit, open
                  the next. All start at once (a burst); latencies, throughput and errors here
                  are the p95 targets; afterwards every acknowledged judgment must be in the
                  database.

Closed loops without think time measure capacity: with 2 sync workers and 32 clients in flight,
latency there is queueing (≈ 32 / throughput) whatever the code does. The annotator phase uses a
think time (default 2–4 s, `BENCH_THINK_S=lo,hi`), still far busier than real annotators, who
spend minutes on a page.
"""
from __future__ import annotations

import asyncio
import json
import os
import random
import re
import resource
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from .runner import REPO, Benchmark, Context, Outcome, percentiles

N_ANNOTATORS = 32
ITEMS_PER_HIT = 5
CONFIG_RE = re.compile(r'<script id="task-config" type="application/json">(.*?)</script>', re.S)


# --- Setup ------------------------------------------------------------------------------------


def build_study(ctx: Context, *, n_items: int, n_annotators: int) -> tuple[int, list[str]]:
    """A published in-house Likert stage over EVOUNA items; returns (stage id, link paths)."""
    from annotation.importers import evouna
    from annotation.models import (
        Item,
        Project,
        Provider,
        Stage,
        StageKind,
        StageStatus,
        TaskKind,
        Worker,
    )
    from annotation.services.access import inhouse_link_create

    project = Project.objects.create(
        slug=f"bench-load-{os.getpid()}", title="Benchmark: annotator load", kind=TaskKind.LIKERT,
        items_per_hit=ITEMS_PER_HIT, redundancy={"default": 3},
    )
    source = ctx.data_dir / "open_qa_judgments" / "evouna_nq.json"
    records = [r for r in evouna.parse(source) if not r.excluded and r.content.get("candidate")]
    items = []
    for record in records[:n_items]:
        question_index = record.external_id.split("/")[1]
        items.append(Item(project=project, external_id=record.external_id,
                          content=record.content, dataset=record.dataset, source=record.source,
                          split="test", group_key=f"q{question_index}"))
    Item.objects.bulk_create(items, batch_size=2000)
    stage = Stage.objects.create(project=project, kind=StageKind.FULL, name="full",
                                 status=StageStatus.PUBLISHED, provider=Provider.INHOUSE)
    paths = []
    for n in range(n_annotators):
        worker = Worker.objects.create(provider=Provider.INHOUSE, external_id=f"bench-ann-{n}")
        _link, path = inhouse_link_create(worker=worker, project=project, stage=stage)
        paths.append(path)
    return stage.pk, paths


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Server:
    """gunicorn with 2 sync workers on a free loopback port; stopped (by its own pid) on exit."""

    def __init__(self, ctx: Context, *, workers: int = 2):
        self.ctx = ctx
        self.workers = workers
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen | None = None
        self.log = ctx.work_dir / "gunicorn.log"

    def __enter__(self) -> Server:
        env = {**os.environ, "DJANGO_SETTINGS_MODULE": "bench.settings",
               "DATABASE_URL": self.ctx.database_url, "DJANGO_DEBUG": "0"}
        gunicorn = Path(sys.executable).with_name("gunicorn")
        command = [str(gunicorn) if gunicorn.exists() else sys.executable]
        if not gunicorn.exists():
            command += ["-m", "gunicorn"]
        command += ["bench.wsgi:application", "--workers", str(self.workers), "--bind",
                    f"127.0.0.1:{self.port}", "--timeout", "60", "--graceful-timeout", "5",
                    "--log-level", "warning"]
        self.log_handle = self.log.open("w")
        self.process = subprocess.Popen(command, cwd=REPO, env=env, stdout=self.log_handle,
                                        stderr=subprocess.STDOUT)
        self._wait_ready()
        return self

    def _wait_ready(self, timeout: float = 60.0) -> None:
        import httpx

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"gunicorn exited: {self.log.read_text()[-2000:]}")
            try:
                if httpx.get(self.url + "/bench/bare/", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise RuntimeError("gunicorn did not answer within 60 s")

    def __exit__(self, *exc) -> None:
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=5)
        self.log_handle.close()


# --- Load generation ---------------------------------------------------------------------------


class Recorder:
    def __init__(self):
        self.latency: dict[str, list[float]] = {}
        self.errors: dict[str, int] = {}
        self.error_samples: list[str] = []

    def ok(self, kind: str, seconds: float) -> None:
        self.latency.setdefault(kind, []).append(seconds)

    def error(self, kind: str, what: str) -> None:
        self.errors[kind] = self.errors.get(kind, 0) + 1
        if len(self.error_samples) < 5:
            self.error_samples.append(f"{kind}: {what[:200]}")


async def closed_loop(client, url: str, *, clients: int, seconds: float, kind: str,
                      recorder: Recorder, urls: list[str] | None = None) -> float:
    """`clients` coroutines each requesting as fast as answers come; returns the wall time."""
    deadline = time.perf_counter() + seconds

    async def one(n: int) -> None:
        target = urls[n % len(urls)] if urls else url
        while time.perf_counter() < deadline:
            started = time.perf_counter()
            try:
                response = await client.get(target)
                elapsed = time.perf_counter() - started
                if response.status_code == 200:
                    recorder.ok(kind, elapsed)
                else:
                    recorder.error(kind, f"HTTP {response.status_code}")
            except Exception as exc:  # noqa: BLE001 - any failure is an error to count
                recorder.error(kind, repr(exc))

    started = time.perf_counter()
    await asyncio.gather(*(one(n) for n in range(clients)))
    return time.perf_counter() - started


async def annotate(client, base: str, paths: list[str], *, seconds: float,
                   think: tuple[float, float], recorder: Recorder, seed: int = 0) -> dict:
    """Annotators: open the page, think, submit a score for every item, open the next.
    Returns the wall time and what the server acknowledged."""
    deadline = time.perf_counter() + seconds
    acknowledged = {"judgments": 0, "submits": 0, "exhausted": 0}
    rng = random.Random(seed)

    async def annotator(path: str) -> None:
        while time.perf_counter() < deadline:
            started = time.perf_counter()
            try:
                page = await client.get(base + path)
            except Exception as exc:  # noqa: BLE001
                recorder.error("task_page", repr(exc))
                continue
            elapsed = time.perf_counter() - started
            match = CONFIG_RE.search(page.text) if page.status_code == 200 else None
            if match is None:
                if page.status_code == 200 and "Nothing more to do" in page.text:
                    acknowledged["exhausted"] += 1
                    return
                recorder.error("task_page", f"HTTP {page.status_code} without a task")
                continue
            recorder.ok("task_page", elapsed)
            config = json.loads(match.group(1))
            await asyncio.sleep(rng.uniform(*think))
            body = {"answers": [{"item": item, "score": rng.randint(1, 5)}
                                for item in config["items"]]}
            started = time.perf_counter()
            try:
                response = await client.post(
                    base + config["endpoints"]["submit"], content=json.dumps(body),
                    headers={"Content-Type": "application/json",
                             "X-Assignment-Token": config["token"]})
            except Exception as exc:  # noqa: BLE001
                recorder.error("submit", repr(exc))
                continue
            elapsed = time.perf_counter() - started
            answer = response.json() if response.headers.get("content-type", "").startswith(
                "application/json") else {}
            if response.status_code == 200 and answer.get("ok"):
                recorder.ok("submit", elapsed)
                acknowledged["submits"] += 1
                acknowledged["judgments"] += int(answer.get("n_judgments", 0))
            else:
                recorder.error("submit", f"HTTP {response.status_code} {answer}")

    started = time.perf_counter()
    await asyncio.gather(*(annotator(p) for p in paths))
    return {"wall_s": time.perf_counter() - started, **acknowledged}


async def drive(server_url: str, paths: list[str], *, phase_s: float, annotate_s: float,
                think: tuple[float, float]) -> dict:
    import httpx

    limits = httpx.Limits(max_connections=len(paths) + 8, max_keepalive_connections=len(paths))
    async with httpx.AsyncClient(limits=limits, timeout=httpx.Timeout(30.0)) as client:
        warm = Recorder()  # first requests import and connect in each worker; not measured
        await closed_loop(client, server_url + "/bench/bare/", clients=4, seconds=1.0,
                          kind="warm", recorder=warm)
        bare = Recorder()
        bare_s = await closed_loop(client, server_url + "/bench/bare/", clients=len(paths),
                                   seconds=phase_s, kind="bare", recorder=bare)
        pages = Recorder()
        pages_s = await closed_loop(client, "", clients=len(paths), seconds=phase_s,
                                    kind="task_page", recorder=pages,
                                    urls=[server_url + p for p in paths])
        flow = Recorder()
        acknowledged = await annotate(client, server_url, paths, seconds=annotate_s,
                                      think=think, recorder=flow)
    return {"bare": (bare, bare_s), "pages": (pages, pages_s), "flow": (flow, acknowledged)}


def _throughput(recorder: Recorder, kind: str, seconds: float) -> float:
    return round(len(recorder.latency.get(kind, [])) / seconds, 1) if seconds else 0.0


def run(ctx: Context) -> Outcome:
    from annotation.models import Judgment

    n_annotators = ctx.size(N_ANNOTATORS, 2)
    phase_s = ctx.size(15, 1)
    annotate_s = ctx.size(60, 3)
    think = tuple(float(x) for x in os.environ.get(
        "BENCH_THINK_S", "0.2,0.4" if ctx.quick else "2,4").split(","))
    # 32 annotators × (60 s / ~3 s per page) × 5 items ≈ 3,200 judgments; 3 per item → ~1,100
    # items needed; 4,000 leaves room for a faster server without running dry.
    n_items = ctx.size(4000, 60)
    stage_id, paths = build_study(ctx, n_items=n_items, n_annotators=n_annotators)
    cpu_before = resource.getrusage(resource.RUSAGE_SELF)
    with Server(ctx) as server:
        measured = asyncio.run(drive(server.url, paths, phase_s=phase_s, annotate_s=annotate_s,
                                     think=think))
    cpu_after = resource.getrusage(resource.RUSAGE_SELF)
    bare, bare_s = measured["bare"]
    pages, pages_s = measured["pages"]
    flow, acknowledged = measured["flow"]
    in_db = Judgment.objects.filter(stage_id=stage_id).count()

    outcome = Outcome(inputs={
        "server": "gunicorn, 2 sync workers, 127.0.0.1", "database": ctx.vendor,
        "annotators": n_annotators, "items": n_items, "items_per_page": ITEMS_PER_HIT,
        "data": "EVOUNA NQ answers (../shared/data/open_qa_judgments/evouna_nq.json)",
        "closed_loop_phase_s": phase_s, "annotator_phase_s": annotate_s,
        "think_time_s": list(think), "load_generator": "asyncio + httpx, same machine",
    })
    bare_rps = _throughput(bare, "bare", bare_s)
    page_rps = _throughput(pages, "task_page", pages_s)
    flow_s = acknowledged["wall_s"]
    numbers = {
        "bare_view": {"requests_per_s": bare_rps, **percentiles(bare.latency.get("bare", [])),
                      "errors": sum(bare.errors.values())},
        "task_page_closed_loop": {"requests_per_s": page_rps,
                                  **percentiles(pages.latency.get("task_page", [])),
                                  "errors": sum(pages.errors.values())},
        "throughput_ratio_task_page_to_bare": round(page_rps / bare_rps, 3) if bare_rps else None,
        "annotators": {
            "task_page": {"requests_per_s": _throughput(flow, "task_page", flow_s),
                          "n": len(flow.latency.get("task_page", [])),
                          **percentiles(flow.latency.get("task_page", []))},
            "submit": {"requests_per_s": _throughput(flow, "submit", flow_s),
                       "n": len(flow.latency.get("submit", [])),
                       **percentiles(flow.latency.get("submit", []))},
            "errors": dict(flow.errors),
            "pages_exhausted": acknowledged["exhausted"],
        },
        "judgments_acknowledged": acknowledged["judgments"],
        "judgments_in_database": in_db,
        "load_generator_cpu_s": round(
            (cpu_after.ru_utime + cpu_after.ru_stime) - (cpu_before.ru_utime + cpu_before.ru_stime),
            1),
    }
    outcome.numbers = numbers
    errors = (sum(bare.errors.values()) + sum(pages.errors.values())
              + sum(flow.errors.values()))
    samples = bare.error_samples + pages.error_samples + flow.error_samples
    if samples:
        outcome.notes.append("errors, first ones: " + " | ".join(samples[:5]))
    _check_targets(outcome, numbers, errors=errors, page_rps=page_rps, bare_rps=bare_rps)
    if acknowledged["exhausted"]:
        outcome.notes.append(f"{acknowledged['exhausted']} annotators ran out of items")
    return outcome


def _check_targets(outcome: Outcome, numbers: dict, *, errors: int, page_rps: float,
                   bare_rps: float) -> None:
    """The targets: p95 latencies, task page throughput against the bare view, no errors and
    no acknowledged judgment lost."""
    ann = numbers["annotators"]
    in_db, acknowledged = numbers["judgments_in_database"], numbers["judgments_acknowledged"]
    for kind in ("task_page", "submit"):
        p95 = ann[kind]["p95_ms"]
        outcome.check(f"{kind} p95 < 100 ms", p95 is not None and p95 < 100,
                      f"{p95} ms (p50 {ann[kind]['p50_ms']}, p99 {ann[kind]['p99_ms']})")
    ratio = numbers["throughput_ratio_task_page_to_bare"]
    outcome.check("task page throughput ≥ 50% of bare view", ratio is not None and ratio >= 0.5,
                  f"{page_rps} / {bare_rps} req/s = {ratio}")
    outcome.check("zero errors", errors == 0, f"{errors} errors")
    outcome.check("every acknowledged judgment in the database",
                  acknowledged > 0 and in_db == acknowledged,
                  f"{in_db} in DB / {acknowledged} acknowledged")


BENCHMARK = Benchmark(
    name="annotator_load",
    title="Annotator load (gunicorn + task pages)",
    target="task page and submit p95 < 100 ms; task-page throughput ≥ 50% of a bare view; "
           "zero errors; every acknowledged judgment stored",
    run=run,
)
