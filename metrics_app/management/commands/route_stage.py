"""Send a draft stage's items to humans by LERC's uncertainty (active routing), or, in A/B
projects, by adaptive pairing of the systems (metrics_app/services/pairing.py).

    python manage.py route_stage SLUG STAGE --budget N

Draws which items humans judge (expected N), with probabilities that grow where the promoted
LERC is unsure, records every probability (the system estimates weight by them) and makes the
drawn items the stage's items. See metrics_app/services/routing.py.
"""
from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from annotation.access_selectors import project_stage_by_ref
from annotation.models import Project, TaskKind
from annotation.stage_errors import StageError
from metrics_app.services.pairing import stage_draw_adaptive_pairs
from metrics_app.services.routing import stage_route_by_uncertainty


class Command(BaseCommand):
    help = "Route a draft stage's items to humans by LERC's uncertainty, recording the odds."

    def add_arguments(self, parser):
        parser.add_argument("slug")
        parser.add_argument("stage", help="the stage's name or id")
        parser.add_argument("--budget", type=int,
                            help="expected human-judged items (default: the stage's "
                                 "routing_budget setting)")
        parser.add_argument("--judge", default=None,
                            help="route on this judge (metric:NAME, an LLM or imported judge's "
                                 "NAME[@VERSION]; default: the stage's routing_judge "
                                 "setting, else LERC)")

    def handle(self, *args, **options):
        project = Project.objects.filter(slug=options["slug"]).first()
        if project is None:
            raise CommandError(f"project {options['slug']!r} does not exist")
        stage = project_stage_by_ref(project=project, ref=options["stage"])
        if stage is None:
            names = ", ".join(project.stages.values_list("name", flat=True)) or "none"
            raise CommandError(f"no stage {options['stage']!r} (stages: {names})")
        try:
            if project.kind == TaskKind.AB:
                if options["judge"]:
                    raise CommandError("--judge chooses the scores of uncertainty routing; an "
                                       "A/B stage is drawn by adaptive pairing, from the "
                                       "leaderboard of its judgments")
                summary = stage_draw_adaptive_pairs(stage=stage, budget=options["budget"])
            else:
                summary = stage_route_by_uncertainty(stage=stage, budget=options["budget"],
                                                     judge=options["judge"])
        except StageError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(f"{stage}: {summary.as_text()}")
