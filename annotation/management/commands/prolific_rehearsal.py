"""Rehearse a Prolific study on this machine: the local Prolific fake with a participant side.

    python manage.py prolific_rehearsal [--port 8444] [--host 127.0.0.1] [--token T (default: random)]

The server (`testing/prolific_server.py`) answers QA Judge's Prolific client under /api/v1/
like Prolific's API (studies, submissions, participant groups, bonuses, messages, users/me) and
serves the participant pages a researcher opens as several made-up participants: the active
studies at `/participant/?pid=P`, "Take part" (which starts a submission and opens our entry URL
with PROLIFIC_PID, STUDY_ID and SESSION_ID), and the completion redirect
`/submissions/complete?cc=CODE`, which records the code. Its state lives in memory until
Ctrl-C. The command prints the settings the product needs to use it; the step by step is in
docs/PROVIDERS.md ("Rehearse a study locally").

Like `mturk_rehearsal`, it imports the `testing` package when run (the contract
"product-does-not-import-testing" in .importlinter allows exactly this import).
"""
from __future__ import annotations

import secrets

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from annotation.management.rehearsal import announce_settings, serve_until_stopped


def rehearsal_env(*, site_url: str, public_base_url: str,
                  token: str) -> dict[str, str]:
    """The environment QA Judge (runserver, Celery worker and beat) needs to use the server."""
    site_url = site_url.rstrip("/")
    return {
        "PROLIFIC_API_URL": f"{site_url}/api/v1/",
        "PROLIFIC_API_TOKEN": token,
        # Where the task page sends a participant who finished: the fake records the code.
        "PROLIFIC_COMPLETION_URL": f"{site_url}/submissions/complete",
        "QAJ_PUBLIC_BASE_URL": public_base_url,
    }


def rehearsal_first_id() -> int:
    """Where a run's study, submission and group ids start: random, so that a restarted
    rehearsal (which forgets everything) never hands out an id of an earlier run that the
    database still holds — a new study under an old stage's `prolific_study_id` would be synced
    into that stage, and a new session under an old assignment's id refused as someone else's."""
    return secrets.randbits(64) << 16


class Command(BaseCommand):
    help = ("Run the local Prolific fake with participant pages (studies, take part, "
            "completion) to rehearse qualification → trial → full. Runs until Ctrl-C.")

    def add_arguments(self, parser):
        parser.add_argument("--port", type=int, default=8444,
                            help="Port of the server (0: any free port). Default 8444.")
        parser.add_argument("--host", default="127.0.0.1",
                            help="Address to listen on. Default 127.0.0.1 (this machine only).")
        parser.add_argument("--token", default=None,
                            help="The API token the server accepts (PROLIFIC_API_TOKEN). "
                                 "Default: a new random one each run, printed with the settings "
                                 "(so nothing else on this machine can drive the fake).")

    def handle(self, *args, port: int, host: str, token: str | None, **options):
        if token is None:
            token = secrets.token_urlsafe(16)
        if not token.strip():
            raise CommandError("--token must not be empty (QA Judge sends it as "
                               "PROLIFIC_API_TOKEN).")
        try:
            from testing.prolific_server import ProlificServer
        except ImportError as exc:  # a deployment that left the testing/ folder out
            raise CommandError(f"The local Prolific server is not available here: {exc}") from exc
        try:
            server = ProlificServer(token=token, port=port, host=host,
                                    first_id=rehearsal_first_id())
        except OSError as exc:
            raise CommandError(f"Cannot listen on {host}:{port}: {exc}") from exc
        serve_until_stopped(server.httpd, announce=lambda: self._announce(server.site_url, token))
        state = server.state
        completed = sum(1 for s in state.submissions.values() if s["completed_at"])
        self.stdout.write(f"Stopped: {len(state.studies)} studies, {len(state.submissions)} "
                          f"submissions ({completed} completed).")

    def _announce(self, url: str, token: str) -> None:
        """The server's address, the participant page and the settings QA Judge needs."""
        public_base = settings.QAJ_PUBLIC_BASE_URL.rstrip("/")
        env = rehearsal_env(site_url=url, public_base_url=public_base, token=token)
        out = self.stdout
        out.write(self.style.SUCCESS(f"Local Prolific server (API): {env['PROLIFIC_API_URL']}"))
        out.write(f"Participant pages: {url}/participant/?pid=REHEARSAL-P1  (any participant id)")
        mismatched = [name for name in ("PROLIFIC_API_URL", "PROLIFIC_API_TOKEN",
                                        "PROLIFIC_COMPLETION_URL")
                      if str(getattr(settings, name, "") or "").rstrip("/")
                      != env[name].rstrip("/")]
        announce_settings(self, env=env, mismatched=mismatched,
                          forgets="Studies, submissions and participant groups")

