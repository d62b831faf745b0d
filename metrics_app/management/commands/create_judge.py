"""Create an LLM judge, or a new version of one, from a JSON config file.

    python manage.py create_judge NAME CONFIG.json [--description TEXT]

CONFIG: {"base_url": "http://localhost:8000/v1", "model": "...", "api_key_env": "OPENAI_API_KEY",
"task": "likert" | "ab" | "mc", "prompt": "...<candidate>{candidate}</candidate>...", "system": "...", "temperature": 0,
"max_tokens": 256, "parse": "likert" | "yes_no" | "ab" | "choice" | "json" | "regex",
"logprobs": true, "price": {"prompt_per_million": 0.15, "completion_per_million": 0.6}}.
Only base_url and model are required. The same config finds the version it has; any edit (a
prompt, a temperature) makes the next version. The key itself is never stored.
"""
from __future__ import annotations

import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from metrics_app.domain.judge_prompts import JudgeConfigError
from metrics_app.services.judges.versions import judge_version_create


class Command(BaseCommand):
    help = "Create an LLM judge version from a JSON config (same config = same version)."

    def add_arguments(self, parser):
        parser.add_argument("name")
        parser.add_argument("config", type=Path)
        parser.add_argument("--description", default="")

    def handle(self, *args, **options):
        try:
            config = json.loads(options["config"].read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise CommandError(f"{options['config']}: {exc}") from None
        try:
            version, created = judge_version_create(name=options["name"], config=config,
                                                    description=options["description"])
        except JudgeConfigError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"{version.label} {'created' if created else 'exists (same config)'}"
                          f"; next: python manage.py run_judge SLUG {version.label}")
