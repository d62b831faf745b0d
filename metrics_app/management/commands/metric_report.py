"""How well each metric tracks the human judgments of a project.

    python manage.py metric_report SLUG [--json] [--znormalize] [--drop-exact-matches]
                                        [--drop-number-pairs] [--resamples N] [--refresh]

Per metric and group (overall, dataset:..., source:...): {pearson, spearman, kendall, n} with
bootstrap intervals; plus `minimal_pairs` and `pairwise` (A/B) sections where the project has
them. Uses the cached report unless it is stale or --refresh is given; scores must have been
computed first (metrics page, API, or `score_project`).
"""
from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandError

from annotation.models import Project
from metrics_app.services.meta_evaluation_report import (
    metric_report_cached,
    metric_report_refresh,
)


def _fmt(value) -> str:
    return "   –  " if value is None else f"{value:6.3f}"


class Command(BaseCommand):
    help = "Correlations of automatic metrics with the human judgments of a project."

    def add_arguments(self, parser):
        parser.add_argument("slug")
        parser.add_argument("--json", action="store_true", help="Print the report as JSON.")
        parser.add_argument("--znormalize", action="store_true",
                            help="z-normalize each annotator's scores before averaging.")
        parser.add_argument("--drop-exact-matches", action="store_true")
        parser.add_argument("--drop-number-pairs", action="store_true")
        parser.add_argument("--resamples", type=int, default=1000,
                            help="Bootstrap resamples for the intervals (0: none).")
        parser.add_argument("--refresh", action="store_true", help="Ignore the cached report.")

    def handle(self, *args, **options):
        try:
            project = Project.objects.get(slug=options["slug"])
        except Project.DoesNotExist as exc:
            raise CommandError(f"no project with slug {options['slug']!r}") from exc
        params = {"znormalize": options["znormalize"],
                  "drop_exact_matches": options["drop_exact_matches"],
                  "drop_number_pairs": options["drop_number_pairs"],
                  "n_resamples": options["resamples"]}
        report, stale = metric_report_cached(project=project, params=params)
        if report is None or stale or options["refresh"]:
            report = metric_report_refresh(project=project, params=params)
        data = report.data
        if options["json"]:
            self.stdout.write(json.dumps(data, indent=2, ensure_ascii=False))
            return
        if not data.get("metrics"):
            self.stdout.write("No metric scores yet: compute them first (metrics page or API).")
        for name, groups in data.get("correlations", {}).items():
            self.stdout.write(f"\n{name} ({data['metrics'][name]})")
            self.stdout.write(f"  {'group':32} pearson spearman kendall      n")
            for group, row in groups.items():
                self.stdout.write(f"  {group:32} {_fmt(row['pearson'])} {_fmt(row['spearman'])}"
                                  f"  {_fmt(row['kendall'])} {row['n']:6d}")
        for name, groups in data.get("minimal_pairs", {}).items():
            cells = ", ".join(f"{g} {_fmt(r['accuracy']).strip()} (n={r['n']})"
                              for g, r in groups.items())
            self.stdout.write(f"minimal pairs {name}: {cells}")
        pairwise = data.get("pairwise")
        if pairwise:
            rows = {**{f"[{k}]": v for k, v in pairwise["baselines"].items()},
                    **pairwise["metrics"]}
            for name, groups in rows.items():
                cells = ", ".join(f"{g} {_fmt(groups[g]['accuracy']).strip()}"
                                  for g in pairwise["groups"])
                self.stdout.write(f"pairwise {name}: {cells}")
