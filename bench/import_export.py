"""Import/export: 40,000 Likert items with 3 judgments each (120,000 judgments) through the
commands a researcher runs: `import_data jsonl --create`, then `export_data` as JSON Lines and
as CSV (one row per judgment), on the run's database (PostgreSQL unless it was unreachable).

Item content is real: EVOUNA answers (NQ and TQ), cycled with a suffix on the external id to
reach 40,000; judgment 1 is EVOUNA's own correctness judgment (5/1), judgments 2 and 3 are
seeded synthetic scores from a pool of 50 workers. A second import of the same file (nothing new
to store) is timed too, since researchers re-run imports.
"""
from __future__ import annotations

import json
import random
import time

from .runner import Benchmark, Context, Outcome


def write_jsonl(ctx: Context, path, n_items: int) -> int:
    from annotation.importers import evouna

    records = []
    for name in ("evouna_nq.json", "evouna_tq.json"):
        records += [r for r in evouna.parse(ctx.data_dir / "open_qa_judgments" / name)
                    if not r.excluded and r.judgments]
    rng = random.Random(0)
    n_judgments = 0
    with path.open("w", encoding="utf-8") as handle:
        for n in range(n_items):
            record = records[n % len(records)]
            real = record.judgments[0].score
            judgments = [{"worker": "evouna-judge", "score": real}]
            for w in rng.sample(range(50), 2):
                judgments.append({"worker": f"bench-w{w}",
                                  "score": max(1, min(5, int(real) + rng.randint(-1, 1))),
                                  "time_spent_ms": rng.randint(3000, 60000)})
            n_judgments += len(judgments)
            handle.write(json.dumps({
                "external_id": f"{record.external_id}#{n // len(records)}",
                "dataset": record.dataset, "source": record.source,
                "split": "train" if n % 5 else "dev", "content": record.content,
                "judgments": judgments,
            }) + "\n")
    return n_judgments


def run(ctx: Context) -> Outcome:
    from django.core.management import call_command

    from annotation.models import Judgment, Project

    n_items = ctx.size(40_000, 200)
    source = ctx.work_dir / "import.jsonl"
    n_judgments = write_jsonl(ctx, source, n_items)
    slug = "bench-import"
    timings = {}
    started = time.perf_counter()
    call_command("import_data", "jsonl", str(source), "--project", slug, "--create", "--kind",
                 "likert", "--no-progress", stdout=open("/dev/null", "w"))
    timings["import_s"] = time.perf_counter() - started
    started = time.perf_counter()
    call_command("import_data", "jsonl", str(source), "--project", slug, "--no-progress",
                 stdout=open("/dev/null", "w"))
    timings["reimport_nothing_new_s"] = time.perf_counter() - started
    sizes = {}
    for fmt in ("jsonl", "csv"):
        out = ctx.work_dir / f"export.{fmt}"
        started = time.perf_counter()
        call_command("export_data", slug, "--format", fmt, "--output", str(out),
                     "--no-progress", stderr=open("/dev/null", "w"))
        timings[f"export_{fmt}_s"] = time.perf_counter() - started
        with out.open(encoding="utf-8") as handle:
            sizes[f"export_{fmt}_lines"] = sum(1 for _ in handle)
    project = Project.objects.get(slug=slug)
    stored = {"items": project.items.count(),
              "judgments": Judgment.objects.filter(item__project=project).count()}
    outcome = Outcome(inputs={
        "items": n_items, "judgments": n_judgments, "database": ctx.vendor,
        "file_mb": round(source.stat().st_size / 1e6, 1),
        "data": "EVOUNA answers (NQ+TQ) cycled; 1 real + 2 synthetic judgments per item",
    })
    outcome.numbers = {**{k: round(v, 2) for k, v in timings.items()}, **sizes, **stored,
                       "import_items_per_s": round(n_items / timings["import_s"]),
                       "export_jsonl_rows_per_s": round(
                           sizes["export_jsonl_lines"] / timings["export_jsonl_s"])}
    outcome.check("import < 60 s", timings["import_s"] < 60, f"{timings['import_s']:.1f} s")
    for fmt in ("jsonl", "csv"):
        value = timings[f"export_{fmt}_s"]
        outcome.check(f"export {fmt} < 60 s", value < 60, f"{value:.1f} s")
    outcome.check("everything stored once",
                  stored == {"items": n_items, "judgments": n_judgments},
                  f"{stored['items']} items, {stored['judgments']} judgments")
    return outcome


BENCHMARK = Benchmark(
    name="import_export", title="Import and export (40,000 items × 3 judgments)",
    target="import_data and export_data < 60 s each on PostgreSQL", run=run,
)
