"""Score a project's items with registered metrics, in this process (no worker needed).

    python manage.py score_project SLUG --metric em,f1,meteor [--model V] [--batch-size N]
                                   [--no-progress] [--allow-missing]

Scores are stored per item, metric and version, as the metrics page's jobs store them; items
already scored at a metric's current version are skipped, so an interrupted run resumes where
it stopped. The run is a scoring job held here (the lease of the metrics page's jobs: its
progress shows there, it can be cancelled there; refused while a worker scores one of its
metrics on the project). A metric that cannot run here (METEOR without Java, LERC without a
promoted model) fails the command unless --allow-missing. Then `metric_report SLUG` reads them.
"""
from __future__ import annotations

import signal
import sys
import threading

from django.core.management.base import CommandError

from annotation.models import Project
from core.output_files import InterruptibleCommand
from metrics_app.domain.meta_evaluation import NO_REFERENCE
from metrics_app.management.scoring_options import scoring_options_check, unscorable_advice
from metrics_app.models import ScoringStatus
from metrics_app.registry import metric_names
from metrics_app.services.scoring import (
    DEFAULT_BATCH_SIZE,
    ScoringRunBusy,
    project_metric_inputs,
    scoring_job_run_here,
)


class Command(InterruptibleCommand):
    help = "Score a project's items with one or more metrics (resumable; no worker needed)."
    interrupted_note = ("the scores stored before the stop are kept (they are stored batch by "
                        "batch) and this run's scoring job is marked failed; run the same "
                        "command again to score the rest")

    def add_arguments(self, parser):
        parser.add_argument("slug")
        parser.add_argument("--metric", required=True,
                            help="Metric name(s), comma-separated, e.g. em,f1,meteor.")
        parser.add_argument("--model", default=None,
                            help="Model version, for metrics that take one (e.g. lerc).")
        parser.add_argument("--batch-size", type=int, default=DEFAULT_BATCH_SIZE)
        parser.add_argument("--no-progress", action="store_true")
        parser.add_argument("--allow-missing", action="store_true",
                            help="Go on when a metric cannot run here instead of failing.")

    def handle(self, *args, **options):
        from tqdm import tqdm

        project = Project.objects.filter(slug=options["slug"]).first()
        if project is None:
            raise CommandError(f"no project with slug {options['slug']!r}")
        names = [n.strip() for n in options["metric"].split(",") if n.strip()]
        known = metric_names()
        unknown = [n for n in names if n not in known]
        if not names or unknown:
            raise CommandError(f"unknown metric(s): {', '.join(unknown) or '(none given)'}; "
                               f"known metrics: {', '.join(known)}")
        scoring_options_check(metric_names=names, model=options["model"],
                              batch_size=options["batch_size"])
        if advice := unscorable_advice(project):
            raise CommandError(f"project {project.slug!r}: {advice}")
        n_inputs = len(project_metric_inputs(project=project))
        if not n_inputs:
            raise CommandError(f"project {project.slug!r} has no items to score")
        bar = tqdm(total=n_inputs * len(names), file=sys.stderr, unit="score",
                   disable=options["no_progress"], desc=f"scoring {project.slug}")
        # A stop by SIGTERM (a closed terminal, `timeout`, a supervisor) is a Ctrl-C here: the
        # job is marked failed instead of left running for the sweep to send to a worker.
        main = threading.current_thread() is threading.main_thread()
        before = signal.signal(signal.SIGTERM, signal.default_int_handler) if main else None
        try:
            # A scoring job held here: the lease of the metrics page's and the API's jobs.
            job = scoring_job_run_here(
                project=project, metric_names=names, model=options["model"],
                batch_size=options["batch_size"], progress=bar.update)
        except ScoringRunBusy as exc:
            raise CommandError(str(exc)) from None
        finally:
            bar.close()
            if main:  # None: a handler set outside Python, which stays the default's
                signal.signal(signal.SIGTERM, before if before is not None else signal.SIG_DFL)
        if job.status == ScoringStatus.CANCELLED:
            raise CommandError(f"scoring job {job.pk} was {job.error or 'cancelled'}; the scores "
                               "stored before it are kept, run the same command again to "
                               "score the rest")
        summary = job.detail
        for name, detail in summary.items():
            # `scored` counts every answer the metric was run on; those it gave no value
            # (an answer without references) are the unscorable ones, not scored ones.
            unscorable = detail["unscorable"]
            state = (f"not computed: {detail['error']}" if detail["error"] else
                     f"{detail['scored'] - unscorable} scored, {detail['cached']} already "
                     f"stored, {unscorable} unscorable"
                     + (f" ({NO_REFERENCE})" if unscorable else ""))
            self.stdout.write(f"{name} ({detail['version'] or '?'}): {state}")
        missing = [f"{name}: {d['error']}" for name, d in summary.items() if d["error"]]
        if missing and not options["allow_missing"]:
            raise CommandError("not computed: " + "; ".join(missing)
                               + " (--allow-missing goes on without them)")
        self.stdout.write(f"next: python manage.py metric_report {project.slug}")
