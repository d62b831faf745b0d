"""LLM judge throughput: a judge job (`judges.run`'s body, `judge_job_run`, under its lease)
over 5,000 Likert items against the local chat-completions fake (`testing/openai_server.py`,
in a process of its own, as an endpoint would be) answering after 500 ms, at concurrency 64, with a burst of 200 "429 rate limited" answers at
the start and 2% malformed answers. Then the same job again (the cache: no call), and a new
version with a budget that stops it.

Target: throughput within 80% of concurrency / latency (128 answers/s here), never more
requests in flight than the concurrency, every item judged or counted unparseable, the rerun
makes no call, the budgeted run stops before its cap.
"""
from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
import urllib.request

from .runner import REPO, Benchmark, Context, Outcome

LATENCY_S = 0.5
CONCURRENCY = 64
BURST_429 = 200


def _project(n_items: int):
    from annotation.models import Item, Project, TaskKind

    project = Project.objects.create(slug=f"bench-judges-{time.time_ns()}", title="Judge bench",
                                     kind=TaskKind.LIKERT)
    Item.objects.bulk_create([
        Item(project=project, external_id=f"q{n}", dataset="bench", source=f"s{n % 5}",
             content={"passage": f"Passage {n}: the cat sat on the mat in room {n}.",
                      "question": f"Where did the cat sit ({n})?",
                      "references": ["on the mat"],
                      "candidate": "on the mat" if n % 3 else f"in the garden {n}"})
        for n in range(n_items)], batch_size=2000)
    return project


@contextlib.contextmanager
def fake_endpoint(**options):
    """`python -m testing.openai_server` in its own process; yields (url, stats(), faults())."""
    argv = [sys.executable, "-m", "testing.openai_server", "--port", "0"]
    for key, value in options.items():
        argv += [f"--{key}", str(value)]
    process = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.PIPE, text=True)
    try:
        url = process.stdout.readline().strip()
        root = url.removesuffix("/v1")

        def stats() -> dict:
            with urllib.request.urlopen(f"{root}/fake/stats", timeout=10) as response:
                return json.loads(response.read())

        def faults(**fields) -> None:
            request = urllib.request.Request(f"{root}/fake/faults", method="POST",
                                             data=json.dumps(fields).encode())
            urllib.request.urlopen(request, timeout=10).close()

        yield url, stats, faults
    finally:
        process.terminate()
        process.wait(timeout=10)


def run(ctx: Context) -> Outcome:
    from metrics_app.models import JudgeJob, JudgeVerdict, ScoringStatus
    from metrics_app.services.judges.client import RetryPolicy
    from metrics_app.services.judges.runs import judge_job_create, judge_job_run, judge_project
    from metrics_app.services.judges.versions import judge_version_create

    n_items = ctx.size(5000, 300)
    burst = ctx.size(BURST_429, 20)
    project = _project(n_items)
    retry = RetryPolicy(attempts=12, base_delay=0.05, max_delay=1.0)
    outcome = Outcome(inputs={"items": n_items, "latency_s": LATENCY_S,
                              "concurrency": CONCURRENCY, "burst_429": burst,
                              "malformed_rate": 0.02, "client": "httpx (threads)",
                              "server": "testing/openai_server.py"})
    with fake_endpoint(latency=LATENCY_S, malformed=0.02, seed=7) as (url, server_stats, faults):
        version = judge_version_create(name=f"bench-{project.pk}", config={
            "base_url": url, "model": "fake-judge", "logprobs": True})[0]
        job = judge_job_create(project=project, version=version, concurrency=CONCURRENCY)
        faults(rate_limit_burst=burst)
        started, cpu_started = time.perf_counter(), time.process_time()
        load_before = os.getloadavg()[0]
        judge_job_run(job_id=job.pk, retry=retry)
        seconds = time.perf_counter() - started
        cpu_seconds = time.process_time() - cpu_started
        load_after = os.getloadavg()[0]
        job = JudgeJob.objects.get(pk=job.pk)
        stats = server_stats()
        stored = JudgeVerdict.objects.filter(judge_version=version).count()
        rerun_job = judge_job_create(project=project, version=version, concurrency=CONCURRENCY)
        before = server_stats()["requests"]
        judge_job_run(job_id=rerun_job.pk, retry=retry)
        rerun_calls = server_stats()["requests"] - before
        budgeted = judge_version_create(name=f"bench-{project.pk}", config={
            "base_url": url, "model": "fake-judge", "temperature": 0.1})[0]
        budget = 0.02
        capped = judge_project(project=project, version=budgeted, budget=budget,
                               concurrency=CONCURRENCY, retry=retry)
    ideal = CONCURRENCY / LATENCY_S
    throughput = job.detail["calls"] / seconds
    outcome.numbers = {"seconds": round(seconds, 1), "answers_per_s": round(throughput, 1),
                       # The client's own CPU per answer: what bounds throughput on a busy host.
                       "client_cpu_ms_per_answer": round(1000 * cpu_seconds
                                                         / max(1, job.detail["calls"]), 2),
                       "load_average_before_after": [round(load_before, 1),
                                                     round(load_after, 1)],
                       "ideal_answers_per_s": ideal, "max_in_flight": stats["max_in_flight"],
                       "requests": stats["requests"], "rate_limited": stats.get("429", 0),
                       "retries": job.detail["retries"], "unparseable": job.detail["unparseable"],
                       "cost_usd": job.detail["cost"], "rerun_calls": rerun_calls,
                       "budget_usd": budget, "budget_spent_usd": capped["cost"],
                       "budget_calls": capped["calls"]}
    outcome.check("throughput >= 80% of concurrency / latency", throughput >= 0.8 * ideal,
                  f"{throughput:.1f} answers/s (ideal {ideal:.0f})")
    outcome.check("never more in flight than the concurrency",
                  stats["max_in_flight"] <= CONCURRENCY,
                  f"max {stats['max_in_flight']} in flight")
    outcome.check("every item judged or counted unparseable; the 429 burst retried",
                  job.status == ScoringStatus.DONE and stored == n_items
                  and job.detail["failed"] == 0 and stats.get("429", 0) == burst,
                  f"{stored} verdicts ({job.detail['unparseable']} unparseable), "
                  f"{stats['429']} answered 429, {job.detail['failed']} failed")
    outcome.check("a rerun of the same version makes no call", rerun_calls == 0,
                  f"{rerun_calls} calls")
    outcome.check("the budget stops the run before its cap",
                  capped["stopped"].startswith("budget") and capped["cost"] <= budget,
                  f"${capped['cost']:.4f} of ${budget} in {capped['calls']} calls")
    outcome.notes.append(f"{job.detail['calls']} answers in {seconds:.1f} s at concurrency "
                         f"{CONCURRENCY} and {LATENCY_S * 1000:.0f} ms latency")
    return outcome


BENCHMARK = Benchmark(
    name="judges", title="LLM judge job: 5,000 items, 500 ms latency, 429 bursts",
    target="throughput ~ concurrency / latency; rerun free; budget stops the run", run=run,
)
