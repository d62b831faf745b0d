"""Import a judge's verdicts from a file (JSONL or CSV; see
metrics_app/services/judges/imports.py for the columns).

    python manage.py import_verdicts SLUG FILE --judge NAME --judge-version V

The whole file is checked first; any problem (unknown item ids, duplicates, out-of-range
values) is listed and nothing is stored.
"""
from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from metrics_app.management.projects import projects_by_slug
from metrics_app.services.judges.imports import (
    IMPORT_REFUSED,
    verdicts_import,
    verdicts_import_summary,
)


class Command(BaseCommand):
    help = "Import a judge's verdicts (JSONL/CSV: item_id, verdict, score, probability)."

    def add_arguments(self, parser):
        parser.add_argument("slug")
        parser.add_argument("file", type=Path)
        parser.add_argument("--judge", default=None)
        parser.add_argument("--judge-version", dest="judge_version", default=None)
        parser.add_argument("--description", default="")

    def handle(self, *args, **options):
        (project,) = projects_by_slug([options["slug"]])
        try:
            result = verdicts_import(project=project, path=options["file"],
                                     judge=options["judge"], version=options["judge_version"],
                                     description=options["description"])
        except IMPORT_REFUSED as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(verdicts_import_summary(result, project))
