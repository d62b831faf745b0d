"""Export a project's judgments (one row each), per-item aggregates or spot checks.

    python manage.py export_data SLUG --format jsonl|csv [--output FILE] [--aggregate]
                                 [--aggregation MODEL] [--stage NAME|ID] [--no-progress]
                                 [--include-qualification] [--include-rejected]
    python manage.py export_data SLUG --preferences [--min-agreement X] [--include-ties]
                                 [--include-contested] [--include-gold-checks]
                                 [--aggregation MODEL] [--output FILE]
    python manage.py export_data SLUG --spot-checks --format jsonl|csv [--stage NAME|ID]
                                 [--output FILE]

Writes to standard output unless --output is given. Only the judgments that count
(`annotation.selectors.judgments_that_count`), like every report; practice and qualification
answers with --include-qualification, unaccepted work with --include-rejected (audits).
--spot-checks writes every spot check recorded on the project (the spot-check page's), as the
workers table counts them. An option that would change nothing in the export asked for is
refused, naming it (the pairs' options without --preferences). --preferences leaves gold
checks out as the leaderboard does (`preference_rows`) and says on standard error how many
items it left out and why. Columns: docs/DATA_FORMATS.md.
"""
from __future__ import annotations

from django.core.management.base import CommandError

from annotation.access_selectors import project_stage_by_ref
from annotation.domain.aggregation import AGGREGATION_MODELS, resolve_aggregation
from annotation.models import Project
from annotation.services.exports import (
    EXPORT_FORMATS,
    export_note,
    export_write,
    non_data_stage_error,
    spot_checks_write,
)
from annotation.services.preference_exports import (
    PreferenceExportError,
    preference_left_out_note,
    preference_write,
)
from annotation.spot_check_selectors import spot_check_list
from core.output_files import InterruptibleCommand, OutputPathError, output_file

# What a spot-check export cannot take: it writes the checks recorded, not judgments.
NOT_WITH_SPOT_CHECKS = ("aggregate", "aggregation", "preferences", "include_qualification",
                        "include_rejected")
# What chooses the pairs of a --preferences export only: elsewhere it would change nothing.
PREFERENCES_ONLY = ("min_agreement", "include_ties", "include_contested", "include_gold_checks")
# What a --preferences export cannot take: its pairs are built from the judgments that count.
NOT_WITH_PREFERENCES = ("include_qualification", "include_rejected")


def _option(name: str) -> str:
    """An option as typed (`include_ties` → `--include-ties`)."""
    return f"--{name.replace('_', '-')}"


def _given(options: dict, names: tuple[str, ...]) -> list[str]:
    """The options of `names` given on the command line, spelled as typed (`--include-ties`)."""
    # `is`, not `in`: 0.0 == False, and `--min-agreement 0` was given all the same.
    return [_option(name) for name in names
            if options[name] is not None and options[name] is not False]


def _output_open(path: str, *, newline: str | None = None):
    """The --output file, written whole or not at all (`core.output_files.output_file`), or a
    CommandError naming it and why (a missing folder, a directory), before anything is read."""
    try:
        return output_file(path, newline=newline)
    except OutputPathError as error:
        raise CommandError(f"--output {error}") from None


class Command(InterruptibleCommand):
    # Data commands need the models only: skip the URL/admin checks (seconds on a busy machine).
    requires_system_checks: list[str] = []
    help = "Export judgments (or per-item aggregates) of a project as JSON Lines or CSV."
    interrupted_note = "no --output file written (an existing one is left as it was)"

    def add_arguments(self, parser):
        parser.add_argument("project", help="project slug")
        parser.add_argument("--format", default="jsonl", choices=EXPORT_FORMATS)
        parser.add_argument("--output", help="file to write (default: standard output)")
        parser.add_argument("--aggregate", action="store_true",
                            help="one row per item: number of judgments, mean score, choice "
                                 "counts, and the label and confidence of the project's "
                                 "aggregation model")
        parser.add_argument("--aggregation", metavar="MODEL",
                            help="with --aggregate: this model instead of the project's setting "
                                 f"({', '.join(AGGREGATION_MODELS)}; must fit the project's kind)")
        parser.add_argument("--stage", help="only judgments of this stage, its name or id (a "
                                                 "practice or qualification stage needs "
                                                 "--include-qualification)")
        parser.add_argument("--include-qualification", action="store_true",
                            help="also practice and qualification judgments: those stages' "
                                 "and the practice items' in any stage (they test workers, "
                                 "not items; stage_kind and is_practice say which is which), "
                                 "and the answers on items excluded from the study (excluded)")
        parser.add_argument("--no-progress", action="store_true", help="no progress bar")
        parser.add_argument("--preferences", action="store_true",
                            help="A/B projects: JSON Lines {prompt, chosen, rejected, metadata} "
                                 "for preference training (DPO), items with a clear human "
                                 "preference only")
        parser.add_argument("--min-agreement", type=float, default=None, metavar="X",
                            help="with --preferences: leave out items where fewer than this "
                                 "share of the judgments chose the label (0-1)")
        parser.add_argument("--include-ties", action="store_true",
                            help="with --preferences: also items whose label is a tie")
        parser.add_argument("--include-contested", action="store_true",
                            help="with --preferences: also items without a clear majority")
        parser.add_argument("--include-gold-checks", action="store_true",
                            help="with --preferences: also gold-check items (attention checks "
                                 "with a known answer, left out as the leaderboard leaves "
                                 "them out; metadata.gold_check says which)")
        parser.add_argument("--spot-checks", action="store_true",
                            help="one row per spot check recorded on the project (the "
                                 "spot-check page's): judgment, item, worker, verdict, note, "
                                 "who checked it and when")
        parser.add_argument("--include-rejected", action="store_true",
                            help="audit export: also rejected, returned and flagged work and "
                                 "blocked workers' judgments (assignment_status says which)")

    def handle(self, *args, project: str, **options):
        instance = Project.objects.filter(slug=project).first()
        if instance is None:
            raise CommandError(f"project {project!r} does not exist")
        stage = None
        if options["stage"]:
            # The one rule for naming a stage (`report --stage`, the report URLs): id or name.
            stage = project_stage_by_ref(project=instance, ref=options["stage"])
            if stage is None:
                names = ", ".join(instance.stages.values_list("name", flat=True)) or "none"
                raise CommandError(
                    f"project {project!r} has no stage {options['stage']!r} (stages: {names})"
                )
        aggregation = options["aggregation"]
        if not options["preferences"] and (given := _given(options, PREFERENCES_ONLY)):
            # As --aggregation without --aggregate: an option that would change nothing here is
            # refused, not ignored (an export taken for one with ties was the plain judgments).
            raise CommandError(f"{', '.join(given)} {'chooses' if len(given) == 1 else 'choose'}"
                               " the pairs of a --preferences export; add --preferences, or "
                               "drop " + ("it" if len(given) == 1 else "them"))
        if options["spot_checks"]:
            self._spot_checks(instance, stage, options)
            return
        if options["preferences"]:
            self._preferences(instance, stage, options)
            return
        if aggregation is not None:
            if not options["aggregate"]:
                raise CommandError("--aggregation chooses the model of an --aggregate export; "
                                   "add --aggregate")
            try:
                if not aggregation:
                    raise ValueError("give a model name, e.g. --aggregation "
                                     + resolve_aggregation(instance.kind, ""))
                resolve_aggregation(instance.kind, aggregation)
            except ValueError as error:
                raise CommandError(f"--aggregation: {error}") from None
        progress = False if options["no_progress"] else None
        kwargs = dict(project=instance, fmt=options["format"], aggregate=options["aggregate"],
                      stage=stage, progress=progress,
                      include_rejected=options["include_rejected"], aggregation=aggregation,
                      include_qualification=options["include_qualification"])
        if why := non_data_stage_error(stage,
                                       include_qualification=options["include_qualification"]):
            raise CommandError(f"{why}; add --include-qualification to export them")
        # What the file holds and leaves out, beside it (standard error: the rows stay the
        # data), as the dashboard and progress say it.
        note = export_note(project=instance, stage=stage,
                           include_qualification=options["include_qualification"],
                           include_rejected=options["include_rejected"],
                           per_judgment_rows=not options["aggregate"])
        if options["output"]:
            with _output_open(options["output"], newline="") as handle:
                count = export_write(out=handle, **kwargs)
            self.stderr.write(f"{count} rows written to {options['output']}: {note}")
        else:
            try:
                export_write(out=self.stdout, **kwargs)
            except BrokenPipeError:  # `export_data ... | head`: the reader has seen enough
                return
            self.stderr.write(f"exported {instance.slug}: {note}")

    def _spot_checks(self, instance, stage, options):
        if given := _given(options, NOT_WITH_SPOT_CHECKS):
            raise CommandError(f"--spot-checks writes the spot checks recorded, every one: "
                               f"drop {', '.join(given)}")
        checks = spot_check_list(project=instance, stage=stage)
        if options["output"]:
            with _output_open(options["output"], newline="") as handle:
                count = spot_checks_write(checks=checks, out=handle, fmt=options["format"])
            self.stderr.write(f"{count} spot checks written to {options['output']}")
        else:
            try:
                count = spot_checks_write(checks=checks, out=self.stdout, fmt=options["format"])
            except BrokenPipeError:
                return
            self.stderr.write(f"exported {count} spot checks of {instance.slug}")

    def _preferences(self, instance, stage, options):
        if options["aggregate"] or options["format"] != "jsonl":
            raise CommandError("--preferences writes JSON Lines pairs: drop --aggregate and "
                               "--format csv")
        if given := _given(options, NOT_WITH_PREFERENCES):
            raise CommandError(f"--preferences builds its pairs from the judgments that count "
                               f"(data stages, accepted work): drop {', '.join(given)}")
        if options["aggregation"] is not None:
            try:
                resolve_aggregation(instance.kind, options["aggregation"])
            except ValueError as error:
                raise CommandError(f"--aggregation: {error}") from None
        kwargs = dict(project=instance, stage=stage,
                      min_agreement=options["min_agreement"] or 0.0,
                      include_ties=options["include_ties"],
                      include_contested=options["include_contested"],
                      include_gold_checks=options["include_gold_checks"],
                      aggregation=options["aggregation"] or None)
        try:
            if options["output"]:
                with _output_open(options["output"]) as handle:
                    count, left_out = preference_write(out=handle, **kwargs)
                where = f"written to {options['output']}"
            else:
                try:
                    count, left_out = preference_write(out=self.stdout, **kwargs)
                except BrokenPipeError:  # `export_data ... | head`: the reader has seen enough
                    return
                where = f"of {instance.slug} exported"
        except PreferenceExportError as error:
            raise CommandError(str(error)) from None
        # What the pairs leave out, beside them (standard error: the rows stay the data).
        self.stderr.write(f"{count} preference pair{'s' if count != 1 else ''} {where}; "
                          + preference_left_out_note(left_out, spell=_option))
