"""Queue the demo's LERC training run if no model version exists yet (rundemo calls this on
every start; only the first one queues a run, a later one only resumes a run the demo's stop
interrupted).

    python manage.py lerc_demo [--base-url http://127.0.0.1:8000]
"""
from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError
from django.urls import reverse

from annotation.models import Project
from metrics_app.services.lerc.demo import DEMO_PROJECT_SLUG, lerc_demo_training_ensure


class Command(BaseCommand):
    help = "Queue one small LERC training run on the demo's judgments if no model exists yet."

    def add_arguments(self, parser):
        parser.add_argument("--base-url", default="http://127.0.0.1:8000")
        parser.add_argument("--project", default=None,
                            help=f"the project to train on (default: {DEMO_PROJECT_SLUG}, "
                                 "when the demo's real data is loaded)")

    def handle(self, *args, base_url: str, project: str | None, **options):
        # A project named and missing was a silent exit 0; the demo's own (rundemo's call)
        # may be absent when its real data is (nothing to train on, rundemo says why).
        if project is not None and not Project.objects.filter(slug=project).exists():
            raise CommandError(f"no project with slug {project!r}")
        project = project or DEMO_PROJECT_SLUG
        training = lerc_demo_training_ensure(project_slug=project)
        if training is None:
            return
        version = training.version
        base = base_url.rstrip("/")
        change = reverse("admin:metrics_app_modelversion_change", args=[version.pk])
        what = ("resumes training (the last run stopped before it finished)" if training.resumed
                else "is training")
        slugs = ", ".join(p.slug for p in version.projects.order_by("slug"))
        self.stdout.write(
            f"LERC: {version.name} v{version.number} {what} in the background worker on "
            f"{slugs}'s judgments (a few minutes on a CPU); watch its progress at "
            f"{base}{change} — once promoted, `manage.py score --metric lerc` serves it.")
