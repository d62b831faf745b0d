"""Time the project report + dashboard charts on a synthetic 40,000 × 3 Likert project in a
throwaway SQLite database (or DATABASE_URL if set). Prints one JSON line."""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--items", type=int, default=40_000)
    parser.add_argument("--judgments", type=int, default=3)
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    tmp = tempfile.TemporaryDirectory()
    os.environ.setdefault("DATABASE_URL", f"sqlite:///{tmp.name}/bench.sqlite3")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.dev")
    import django

    django.setup()
    from django.core.management import call_command

    from metrics_app.reports.benchmark import build_benchmark_project, time_project_report

    call_command("migrate", verbosity=0)
    project = build_benchmark_project(n_items=args.items, judgments_per_item=args.judgments,
                                      slug=f"bench-{os.getpid()}")
    print(json.dumps(time_project_report(project=project)))


if __name__ == "__main__":
    main()
