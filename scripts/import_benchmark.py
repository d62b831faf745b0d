"""Time a large import and export: N synthetic Likert items with one judgment each.

    DATABASE_URL=postgres://... .venv/bin/python scripts/import_benchmark.py [--items 40000]

Creates a throw-away project (slug bench-import-<pid>), imports a generated jsonl file with
`import_data`, re-imports it (must create nothing), exports it as jsonl and CSV, prints the
times, then deletes the project. Use a scratch database.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.dev")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--items", type=int, default=40000)
    args = parser.parse_args()

    import django

    django.setup()
    from django.core.management import call_command

    from annotation.models import Item, Judgment, Project, Stage

    call_command("migrate", verbosity=0)
    slug = f"bench-import-{os.getpid()}"
    with tempfile.TemporaryDirectory() as folder:
        source = Path(folder) / "items.jsonl"
        with source.open("w") as handle:
            for n in range(args.items):
                handle.write(json.dumps({
                    "external_id": f"bench-{n}",
                    "dataset": "bench", "split": "train" if n % 5 else "dev",
                    "content": {
                        "passage": f"Passage {n // 10}: " + "lorem ipsum dolor sit amet " * 12,
                        "question": f"What is asked in question {n}?",
                        "references": [f"reference answer {n}"],
                        "candidate": f"candidate answer {n}",
                    },
                    "judgments": [{"worker": f"bench-worker-{n % 50}", "score": 1 + n % 5,
                                   "time_spent_ms": 5000 + n % 7000}],
                }) + "\n")
        timings = {}
        start = time.perf_counter()
        call_command("import_data", "jsonl", str(source), "--project", slug, "--create",
                     "--kind", "likert")
        timings["import"] = time.perf_counter() - start
        start = time.perf_counter()
        call_command("import_data", "jsonl", str(source), "--project", slug)
        timings["re-import (nothing new)"] = time.perf_counter() - start
        for fmt in ("jsonl", "csv"):
            start = time.perf_counter()
            call_command("export_data", slug, "--format", fmt, "--output",
                         str(Path(folder) / f"out.{fmt}"))
            timings[f"export {fmt}"] = time.perf_counter() - start
        project = Project.objects.get(slug=slug)
        counts = (project.items.count(), Judgment.objects.filter(item__project=project).count())
        Judgment.objects.filter(item__project=project)._raw_delete(Judgment.objects.db)
        Stage.objects.filter(project=project).delete()
        Item.objects.filter(project=project).delete()
        project.delete()
    engine = django.db.connection.vendor
    print(f"{engine}: {counts[0]} items, {counts[1]} judgments")
    for name, seconds in timings.items():
        print(f"  {name}: {seconds:.1f} s")


if __name__ == "__main__":
    main()
