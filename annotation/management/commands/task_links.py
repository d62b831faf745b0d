"""Print task-page links for open stages, each through its own provider's entry point.

    python manage.py task_links [--project SLUG ... | --all-projects] [--worker NAME]
                                [--base-url URL] [--no-mturk]

Every link it prints is live (an in-house link admits its holder; a simulated HIT is a row in
the stage), so by default it covers the demo projects only (those `rundemo` creates); a real
project needs its slug (`--project SLUG`) or `--all-projects`.

An in-house stage gets a personal in-house link (what a researcher sends an expert: signed,
revocable in the admin). An MTurk stage gets a simulated HIT: the page the way MTurk's
ExternalQuestion iframe opens it, with a local HIT row (provider "in-house", so no provider sync
ever touches it) and a made-up worker id, plus its preview URL. A Prolific stage gets the URL
Prolific would open, with a made-up participant. Entry points serve only their own provider's
stages, so an in-house stage has no MTurk URL.

A simulated HIT is a look at the page only, made only in a stage without HITs on MTurk (one
beside them would count in the stage's cost and in the work its collection waits for:
`stage_simulated_hit_refusal`): to rehearse publishing, accepting, submitting, sync
and review with several workers, use `manage.py mturk_rehearsal` (docs/PROVIDERS.md).
"""
from __future__ import annotations

import secrets
from urllib.parse import urlencode

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction
from django.urls import reverse

from annotation.models import Hit, HitItem, Project, Provider, Stage, Worker
from annotation.services.access import (
    inhouse_annotator,
    inhouse_link_create,
    stage_link_problem,
)
from annotation.services.assignments import (
    OPEN_STAGE_STATUSES,
    assignment_size,
    items_pick_next,
)
from annotation.stage_plan_selectors import stage_simulated_hit_refusal


class Command(BaseCommand):
    help = "Print a task link for every open stage (in-house, simulated MTurk or Prolific)."

    def add_arguments(self, parser):
        parser.add_argument("--project", action="append", default=[],
                            help="Project slug (repeatable); default: the demo projects only.")
        parser.add_argument("--all-projects", action="store_true",
                            help="Every project with an open stage, real studies included "
                                 "(creates live links and simulated HITs in each).")
        parser.add_argument("--worker", default="demo-annotator",
                            help="External id of the in-house annotator the links are for.")
        parser.add_argument("--base-url", default="",
                            help="Public base URL (default: settings.QAJ_PUBLIC_BASE_URL).")
        parser.add_argument("--no-mturk", action="store_true",
                            help="Do not create simulated MTurk HITs.")

    def handle(self, *args, project: list[str], worker: str, base_url: str, no_mturk: bool,
               all_projects: bool, **options):
        from annotation.services.demo import demo_project_slugs

        if project and all_projects:
            raise CommandError("give --project SLUG or --all-projects, not both")
        base = (base_url or settings.QAJ_PUBLIC_BASE_URL).rstrip("/")
        projects = Project.objects.order_by("slug")
        if project:
            projects = projects.filter(slug__in=project)
            unknown = sorted(set(project) - set(projects.values_list("slug", flat=True)))
            if unknown:
                raise CommandError(f"no project with slug {', '.join(unknown)}")
        elif not all_projects:
            projects = projects.filter(slug__in=demo_project_slugs())
            if not projects.exists():
                raise CommandError("no demo projects here (manage.py rundemo creates them); "
                                   "name a project with --project SLUG, or --all-projects "
                                   "for every open stage of every project")
        closed: list[str] = []
        for proj in projects:
            stages = proj.stages.filter(status__in=OPEN_STAGE_STATUSES).order_by("order", "pk")
            if not stages.exists():
                closed.append(proj.slug)
                continue
            # The project owner's annotator of that name (another researcher's is another).
            annotator = inhouse_annotator(project=proj, name=worker, external_id=worker)
            self.stdout.write(self.style.MIGRATE_HEADING(f"{proj.title} [{proj.slug}]"))
            for stage in stages:
                problem = stage_link_problem(
                    stage=stage, worker=annotator if stage.provider == Provider.INHOUSE else None)
                if problem:
                    self.stdout.write(self.style.WARNING(f"  {stage.name}: warning: {problem}"))
                if stage.provider == Provider.INHOUSE:
                    _, path = inhouse_link_create(worker=annotator, project=proj, stage=stage)
                    self.stdout.write(f"  {stage.name}: in-house  {base}{path}")
                elif stage.provider == Provider.PROLIFIC:
                    page = base + reverse("annotation:task-prolific",
                                          kwargs={"stage_id": stage.pk})
                    params = {"PROLIFIC_PID": f"SIMPID{secrets.token_hex(4).upper()}",
                              "STUDY_ID": (stage.settings or {}).get("prolific_study_id")
                              or "SIMSTUDY",
                              "SESSION_ID": f"SIMSESSION{secrets.token_hex(4).upper()}"}
                    self.stdout.write(f"  {stage.name}: Prolific  {page}?{urlencode(params)}")
                elif stage.provider == Provider.MTURK and not no_mturk:
                    refusal = stage_simulated_hit_refusal(stage)
                    if refusal:
                        self.stdout.write(self.style.WARNING(
                            f"  {stage.name}: no simulated MTurk HIT: {refusal}"))
                        continue
                    hit = self._simulated_hit(stage)
                    if hit is None:
                        self.stdout.write(f"  {stage.name}: (no items left for a simulated HIT)")
                        continue
                    page = base + reverse("annotation:task-mturk", kwargs={"stage_id": stage.pk})
                    preview = {"assignmentId": "ASSIGNMENT_ID_NOT_AVAILABLE",
                               "hitId": hit.external_id}
                    accepted = {"assignmentId": f"SIMASG{secrets.token_hex(6).upper()}",
                                "hitId": hit.external_id,
                                "workerId": f"SIMWORKER{secrets.token_hex(3).upper()}"}
                    self.stdout.write(f"  {stage.name}: MTurk preview   {page}?{urlencode(preview)}")
                    self.stdout.write(f"  {stage.name}: MTurk accepted  {page}?{urlencode(accepted)}")
                    self.stdout.write(f"  {stage.name}: (a local HIT no sync touches; to "
                                      "rehearse the stage with sync and review: "
                                      "manage.py mturk_rehearsal)")
        if closed:  # said, not a silent exit 0 with no link
            message = (f"no open stage in {', '.join(closed)}: a link opens a published or "
                       "running stage; publish one in the admin (or the project's stages page)")
            if len(closed) == len(projects):
                raise CommandError(message)
            self.stdout.write(self.style.WARNING(message))

    @transaction.atomic
    def _simulated_hit(self, stage: Stage) -> Hit | None:
        picker, _ = Worker.objects.get_or_create(provider=Provider.INHOUSE,
                                                 external_id="simulated-hit-builder")
        # The items one assignment of the stage holds (a qualification: all of them), as
        # a worker's own page would get.
        items = items_pick_next(stage=stage, worker=picker, limit=assignment_size(stage))
        if not items:
            return None
        hit = Hit.objects.create(
            stage=stage, provider=Provider.INHOUSE, reward=stage.reward,
            external_id=f"SIMHIT{secrets.token_hex(6).upper()}", max_assignments=1,
        )
        HitItem.objects.bulk_create(
            [HitItem(hit=hit, item=item, position=n) for n, item in enumerate(items)]
        )
        return hit
