"""Rehearse an MTurk study on this machine: a local MTurk-protocol server with a worker side.

    python manage.py mturk_rehearsal [--port 8443] [--host 127.0.0.1] [--public-url URL]

The server (`testing/mturk_server.py`) answers QA Judge's boto3 client like MTurk's requester
API and serves the worker pages a researcher opens as several made-up workers: the HIT list at
`/worker/?workerId=W`, accept (MTurk's qualification rules), the ExternalQuestion page opened with
assignmentId, hitId, turkSubmitTo and workerId, and `/mturk/externalSubmit`. Its state lives in
memory until Ctrl-C. The command prints the settings the product needs to use it; the step by
step is in docs/PROVIDERS.md ("Rehearse a study locally").

This is the one product module that imports the `testing` package (the contract
"product-does-not-import-testing" in .importlinter allows exactly this import); it imports it
when run, so a deployment without the folder only loses this command.
"""
from __future__ import annotations

import secrets

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from annotation.management.rehearsal import announce_settings, serve_until_stopped


def rehearsal_env(*, server_url: str, public_base_url: str) -> dict[str, str]:
    """The environment QA Judge (runserver, Celery worker and beat) needs to use the server."""
    return {
        "MTURK_ENDPOINT_URL": server_url,
        "QAJ_MTURK_SUBMIT_HOSTS": server_url,
        # boto3 signs every request; the local server only checks that it is signed.
        "AWS_ACCESS_KEY_ID": "rehearsal",
        "AWS_SECRET_ACCESS_KEY": "rehearsal",
        "QAJ_PUBLIC_BASE_URL": public_base_url,
    }


class Command(BaseCommand):
    help = ("Run a local MTurk-protocol server with worker pages (HIT list, accept, submit) to "
            "rehearse qualification → trial → full before the sandbox. Runs until Ctrl-C.")

    def add_arguments(self, parser):
        parser.add_argument("--port", type=int, default=8443,
                            help="Port of the server (0: any free port). Default 8443.")
        parser.add_argument("--host", default="127.0.0.1",
                            help="Address to listen on. Default 127.0.0.1 (this machine only).")
        parser.add_argument("--public-url", default="",
                            help="The server's address as browsers and QA Judge reach it "
                                 "(default http://HOST:PORT).")
        parser.add_argument("--throttle-rate", type=float, default=0.0,
                            help="Answer this share of API calls with 'Rate exceeded' (to "
                                 "watch the retries). Default 0.")

    def handle(self, *args, port: int, host: str, public_url: str, throttle_rate: float,
               **options):
        try:
            from testing.mturk_server import MTurkServer
        except ImportError as exc:  # a deployment that left the testing/ folder out
            raise CommandError(f"The local MTurk server is not available here: {exc}") from exc
        try:
            # A fresh id space each run (the tests' servers are seeded for repeatability): a
            # restarted rehearsal forgets its HITs, and reissuing an earlier run's HIT and
            # assignment ids, which the database still holds, refused the new workers' pages
            # ("belongs to another worker or HIT") and synced new HITs into old stages.
            server = MTurkServer(port=port, host=host, throttle_rate=throttle_rate,
                                 seed=secrets.randbits(64))
        except OSError as exc:
            raise CommandError(f"Cannot listen on {host}:{port}: {exc}") from exc
        if public_url:
            server.state.site_url = public_url.rstrip("/")
        serve_until_stopped(server.httpd, announce=lambda: self._announce(server.state.site_url))
        state = server.state
        self.stdout.write(f"Stopped: {len(state.hits)} HITs, {len(state.assignments)} assignments, "
                  f"{len(state.scores)} qualification scores.")

    def _announce(self, url: str) -> None:
        """The server's address, the worker page and the settings QA Judge needs."""
        public_base = settings.QAJ_PUBLIC_BASE_URL.rstrip("/")
        env = rehearsal_env(server_url=url, public_base_url=public_base)
        out = self.stdout
        out.write(self.style.SUCCESS(f"Local MTurk server (requester API): {url}"))
        out.write(f"Worker pages: {url}/worker/?workerId=REHEARSAL-W1  (any worker id)")
        mismatched = []
        if (settings.MTURK_ENDPOINT_URL or "").rstrip("/") != url:
            mismatched.append("MTURK_ENDPOINT_URL")
        if url not in [h.rstrip("/") for h in settings.QAJ_MTURK_SUBMIT_HOSTS]:
            mismatched.append("QAJ_MTURK_SUBMIT_HOSTS")
        announce_settings(self, env=env, mismatched=mismatched,
                          forgets="HITs, assignments and qualifications")

