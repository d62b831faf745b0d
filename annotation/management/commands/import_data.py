"""Import items (and their judgments) from a file into a project.

    python manage.py import_data FORMAT PATH --project SLUG [--create --kind K --title T]
                                 [--owner USER] [--share USER ...]
                                 [--split S] [--keep-existing-items] [--no-progress] [--no-report]

Formats: see docs/DATA_FORMATS.md. The import is atomic (a bad record stops it and nothing is
written) and idempotent (importing the same file again creates nothing and says so).
"""
from __future__ import annotations

import time
from pathlib import Path

from django.core.management.base import CommandError
from django.db import transaction

from annotation.importers import FORMAT_MODULES, importer_for
from annotation.models import Project, TaskKind
from annotation.services.import_files import (
    ImportRefused,
    ImportWrongFormat,
    NewProject,
    import_file,
    import_file_empty_check,
    import_project_create,
    new_project_kind,
    wrong_format_check,
)
from annotation.services.projects import (
    ProjectOwnershipError,
    project_owner_and_share,
    users_by_username,
)
from core.background import task_run_here
from core.output_files import InterruptibleCommand

REPORT_REFRESH_TASK = "worker.tasks.reports.report_refresh"


class Command(InterruptibleCommand):
    # Data commands need the models only: skip the URL/admin checks (seconds on a busy machine).
    requires_system_checks: list[str] = []
    interrupted_note = "nothing imported (the import is one transaction: the project is as it was)"
    help = "Import a data file (jsonl, mocha, onestopqa, lfqa-experts, evouna, ...) into a project."

    def add_arguments(self, parser):
        parser.add_argument("format", help=f"one of: {', '.join(FORMAT_MODULES)}")
        parser.add_argument("path", help="the file (or, for lfqa-experts, the folder)")
        parser.add_argument("--project", required=True, help="slug of the target project")
        parser.add_argument("--create", action="store_true",
                            help="create the project when it does not exist")
        parser.add_argument("--kind", choices=TaskKind.values,
                            help="task kind of a created project (default: the format's)")
        parser.add_argument("--title", help="title of a created project, shown to annotators (default: made from "
                                 "the slug and the kind, e.g. 'Starc: reading comprehension')")
        parser.add_argument("--owner", metavar="USER",
                            help="username of the researcher the project belongs to (given to a "
                                 "project that has no owner yet)")
        parser.add_argument("--share", metavar="USER", action="append", default=[],
                            help="username of a collaborator who may see the project "
                                 "(repeat for several; adds, never removes)")
        parser.add_argument("--split", help="split of every item (default: from the file name)")
        parser.add_argument(
            "--keep-existing-items", action="store_true",
            help="attach judgments to items whose external id exists even if their texts differ",
        )
        parser.add_argument("--no-progress", action="store_true", help="no progress bar")
        parser.add_argument(
            "--no-report", action="store_true",
            help="do not precompute the project report after importing (the beat refresh or "
                 "the first dashboard visit computes it)")

    def handle(self, *args, **options):
        format_name = options["format"]
        try:
            importer = importer_for(format_name)
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        path = Path(options["path"])
        if not path.exists():
            raise CommandError(f"{path}: file not found")
        try:  # before the project's kind is read from the file, or a project created for it
            import_file_empty_check(path)
        except ImportRefused as exc:
            raise CommandError(f"nothing imported: {exc}") from None

        slug = options["project"]
        project = Project.objects.filter(slug=slug).first()
        if project is None and not options["create"]:
            raise CommandError(f"project {slug!r} does not exist; pass --create to create it")
        kind = options["kind"] or (project.kind if project
                                   else new_project_kind(importer, path, None))
        if kind is None:
            self._refuse_if_another_format(path, format_name, slug)
            raise CommandError(f"--kind is required to create a project from {format_name} "
                               "(its first line states no kind)")
        if project is not None and options["kind"] and options["kind"] != project.kind:
            raise CommandError(f"project {slug!r} is of kind {project.kind!r}, not {kind!r}")
        if importer.KIND is not None and importer.KIND != kind:
            self._refuse_if_another_format(path, format_name, slug)
            raise CommandError(
                f"format {format_name} holds {importer.KIND} items; project {slug!r} is {kind}"
            )

        try:
            users = users_by_username([*([options["owner"]] if options["owner"] else []),
                                       *options["share"]])
        except ProjectOwnershipError as exc:
            raise CommandError(f"nothing imported: {exc}") from None
        owner = users.get(options["owner"]) if options["owner"] else None

        progress = False if options["no_progress"] else None
        created = project is None
        try:
            with transaction.atomic():
                if created:
                    project = import_project_create(NewProject(
                        slug=slug, title=options["title"] or ""), kind)
                project_owner_and_share(project=project, owner=owner,
                                        share=[users[name] for name in options["share"]])
                # The same service as the admin's browser import (parse, then store).
                outcome = import_file(
                    format_name=format_name, path=path, project=project, progress=progress,
                    split=options["split"], keep_existing_items=options["keep_existing_items"],
                )
                summary = outcome.summary
        except ImportWrongFormat as exc:
            raise CommandError(_run_instead(exc, slug)) from None
        except ImportRefused as exc:
            raise CommandError(f"nothing imported: {exc}") from None
        except ProjectOwnershipError as exc:
            raise CommandError(f"nothing imported: {path}: {exc}") from None
        self.interrupted_note = ("the import is complete and stored; only the report precompute "
                                 "was stopped (the first dashboard visit computes it)")
        if created:
            self.stdout.write(f"Created project {slug!r} ({kind}), titled {project.title!r} "
                              f"(what annotators see; --title or the admin changes it).")
        if project.owner_id is None:
            self.stdout.write(self.style.WARNING(
                f"Project {slug!r} has no owner: only superusers see it. Pass --owner USERNAME "
                "(or set the owner in the admin) so its researcher finds it."))
        self.stdout.write(f"{format_name} {path} → project {slug!r}: {summary.as_text()}")
        for note in outcome.left_out:  # what the format leaves out of the counts, and why
            self.stdout.write(self.style.WARNING(f"Not imported: {note}."))
        if summary.filtered_note():
            self.stdout.write(self.style.WARNING(f"{summary.filtered_note()}."))
        if outcome.identical_answers:
            self.stdout.write(self.style.WARNING(outcome.identical_answers))
        if summary.created_anything and not options["no_report"]:
            # The job that changes the data precomputes what the dashboard shows, so its first
            # visitor does not wait for the report (the task by name: reports sit above us).
            started = time.perf_counter()
            task_run_here(REPORT_REFRESH_TASK, args=[project.pk])
            self.stdout.write(f"Project report precomputed in {time.perf_counter() - started:.1f} "
                              "s (the dashboard opens from it).")


    @staticmethod
    def _refuse_if_another_format(path: Path, format_name: str, slug: str) -> None:
        """Before a refusal about the kind: the file's own format may be the one to give."""
        try:
            wrong_format_check(path, format_name)
        except ImportWrongFormat as exc:
            raise CommandError(_run_instead(exc, slug)) from None
        except ImportRefused as exc:  # a CSV export, which no format imports
            raise CommandError(f"nothing imported: {exc}") from None


def _run_instead(refusal: ImportWrongFormat, slug: str) -> str:
    """The refusal of a file of another format, naming the command that imports it."""
    detected = refusal.mismatch.detected
    return (f"nothing imported: {refusal.mismatch.reason(refusal.path)}: give the format "
            f"{detected} instead (`manage.py import_data {detected} {refusal.path} --project "
            f"{slug} ...`)")
