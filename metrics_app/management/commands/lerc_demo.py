"""Queue the demo's LERC training run if no model version exists yet (rundemo calls this on
every start; only the first one queues a run, a later one only resumes a run the demo's stop
interrupted).

    python manage.py lerc_demo [--base-url http://127.0.0.1:8000]
"""
from __future__ import annotations

from django.core.management.base import BaseCommand
from django.urls import reverse

from metrics_app.services.lerc.demo import DEMO_PROJECT_SLUG, lerc_demo_training_ensure


class Command(BaseCommand):
    help = "Queue one small LERC training run on the demo's judgments if no model exists yet."

    def add_arguments(self, parser):
        parser.add_argument("--base-url", default="http://127.0.0.1:8000")
        parser.add_argument("--project", default=DEMO_PROJECT_SLUG)

    def handle(self, *args, base_url: str, project: str, **options):
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
