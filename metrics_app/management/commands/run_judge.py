"""Run an LLM judge over a project's items.

    python manage.py run_judge SLUG NAME[@VERSION] [--budget USD] [--concurrency N] [--queue]

Without --queue it runs in this process (no worker needed) with a progress bar, as a judge job
held here; with --queue it creates a judge job that a Celery worker runs (progress on the job).
Either way one run of a judge version on a project at a time (--queue while a job of it is
queued or running names that job instead of queuing a second one). Verdicts already stored
for this version are not asked again; the budget stops the run before a request could exceed
it. Then `judge_report SLUG` compares the judges with the human labels.
"""
from __future__ import annotations

import sys

from django.core.management.base import CommandError

from core.leases import job_in_flight
from core.output_files import InterruptibleCommand
from metrics_app.domain.judge_prompts import JudgeConfigError
from metrics_app.judge_selectors import judge_version_get
from metrics_app.management.projects import projects_by_slug
from metrics_app.models import JudgeJob
from metrics_app.services.judges.client import EndpointError
from metrics_app.services.judges.runs import (
    DEFAULT_CONCURRENCY,
    judge_job_create,
    judge_job_run_here,
)


class Command(InterruptibleCommand):
    help = "Run an LLM judge version over a project's items (cached, budgeted, resumable)."
    interrupted_note = "nothing was asked or queued"

    def add_arguments(self, parser):
        parser.add_argument("slug")
        parser.add_argument("judge", help="NAME or NAME@VERSION (default: the latest version).")
        parser.add_argument("--budget", type=float, default=None, help="USD cap.")
        parser.add_argument("--concurrency", type=int, default=DEFAULT_CONCURRENCY)
        parser.add_argument("--queue", action="store_true",
                            help="Create a job for a Celery worker instead of running here.")
        parser.add_argument("--no-progress", action="store_true")

    def handle(self, *args, **options):
        from tqdm import tqdm

        (project,) = projects_by_slug([options["slug"]])
        try:
            version = judge_version_get(options["judge"])
        except LookupError as exc:
            raise CommandError(str(exc)) from None
        try:
            if options["queue"]:
                before = job_in_flight(JudgeJob, project=project, judge_version=version)
                job = judge_job_create(project=project, version=version,
                                       budget=options["budget"],
                                       concurrency=options["concurrency"])
                self.interrupted_note = f"judge job {job.pk} is queued"
                if before is not None and before.pk == job.pk:
                    self.stdout.write(f"judge job {job.pk} is already {job.status} "
                                      f"({version.label} on {project.slug}); nothing queued")
                    return
                self.stdout.write(f"judge job {job.pk} queued ({version.label} on "
                                  f"{project.slug})")
                return
            bar = tqdm(file=sys.stderr, unit="verdict", disable=options["no_progress"],
                       desc=f"{version.label} on {project.slug}")

            def progress(done, detail):
                bar.total = detail["requests"]
                bar.n = done
                bar.refresh()

            self.interrupted_note = (
                "the verdicts answered before the stop are stored and this run's judge job is "
                "marked failed; run the same command again to ask only the rest (stored "
                "verdicts are reused, not paid for again)")
            try:
                # A judge job run here: the same lease, and refused while a worker runs this
                # judge on this project (it would pay again for what that run asks).
                detail = judge_job_run_here(project=project, version=version,
                                            budget=options["budget"],
                                            concurrency=options["concurrency"],
                                            progress=progress).detail
            finally:
                bar.close()
        except (JudgeConfigError, EndpointError) as exc:
            raise CommandError(str(exc)) from None
        cost = "no price" if detail["cost"] is None else f"${detail['cost']:.4f}"
        self.stdout.write(
            f"{version.label}: {detail['calls']} calls, {detail['cached']} cached, "
            f"{detail['unparseable']} unparseable ({detail['truncated']} truncated), "
            f"{detail['failed']} failed, {detail['retries']} retries, "
            f"{detail['prompt_tokens']}+{detail['completion_tokens']} tokens, {cost}"
            + (f" (with {unusable} answered 200s whose bodies were unusable, each charged its "
               "worst case)" if (unusable := detail.get("paid_unusable", 0)) else ""))
        for error in detail["errors"]:
            self.stdout.write(f"  {error}")
        if detail["stopped"]:
            self.stdout.write(f"stopped: {detail['stopped']}")
        self.stdout.write(f"next: python manage.py judge_report {project.slug}")
