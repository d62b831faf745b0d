"""Run the whole product locally: web server, Celery worker and Celery beat, with demo data.

    python manage.py rundemo [--host 127.0.0.1] [--port 8000]     (make run PORT=8001 HOST=...)

Uses the embedded defaults (SQLite file and filesystem broker under var/), so nothing else has to
run. Ctrl-C stops every process it started.
"""
from __future__ import annotations

import contextlib
import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Start web server, Celery worker and beat with demo data; Ctrl-C stops them all."

    def add_arguments(self, parser):
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument(
            "--no-demo", action="store_true", help="Do not load the demo projects."
        )

    def handle(self, *args, host: str, port: int, no_demo: bool, **options):
        settings.VAR_DIR.mkdir(parents=True, exist_ok=True)
        call_command("migrate", interactive=False, verbosity=0)
        if not no_demo:
            from annotation.services.demo import demo_data_load

            projects = demo_data_load()
            self.stdout.write(f"Demo data: {len(projects)} projects ready.")
            from annotation.services.demo import demo_links, demo_walk_worker

            for project, worker, path in demo_links():
                if worker.external_id == demo_walk_worker(project.slug):
                    self.stdout.write(f"  {project.slug}: annotate as {worker} at "
                                      f"http://{host}:{port}{path}")
        password = self._ensure_admin()
        if not no_demo:
            self._load_real_data(host, port)
            # The demo's LERC model (first start only). The command lives in metrics_app, which
            # this app may not import (docs/ARCHITECTURE.md): called by name, like task_send.
            call_command("lerc_demo", base_url=f"http://{host}:{port}", stdout=self.stdout)

        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        # The links the admin hands out (in-house link CSVs, the link pages) start with
        # QAJ_PUBLIC_BASE_URL: unless it is set, it is where this command serves (it was the
        # default http://127.0.0.1:8000 on any --port, a dead or another instance's address).
        env.setdefault("QAJ_PUBLIC_BASE_URL", demo_public_base_url(host, port))
        python = sys.executable
        commands = {
            "web": [python, "manage.py", "runserver", f"{host}:{port}", "--noreload"],
            "worker": [
                python, "-m", "celery", "-A", "worker", "worker",
                "-Q", "default,gpu", "--concurrency", "1", "--loglevel", "INFO",
            ],
            "beat": [
                python, "-m", "celery", "-A", "worker", "beat", "--loglevel", "INFO",
                "--schedule", settings.QAJ_BEAT_SCHEDULE_FILE,
            ],
        }
        # `kill`/`timeout` send SIGTERM, not SIGINT: stop the children the same way as Ctrl-C.
        signal.signal(signal.SIGTERM, _raise_keyboard_interrupt)
        # And Ctrl-C even when started with SIGINT ignored (a job a shell put in the background).
        signal.signal(signal.SIGINT, _raise_keyboard_interrupt)
        # Each child in its own process group: Ctrl-C in the terminal reaches this command
        # only, which stops them in order; it used to reach beat too, which died first and
        # was reported as "beat stopped unexpectedly".
        processes = {
            name: subprocess.Popen(cmd, cwd=settings.BASE_DIR, env=env, process_group=0)
            for name, cmd in commands.items()
        }
        url = f"http://{host}:{port}/"
        self.stdout.write(
            self.style.SUCCESS(
                f"\nQA Judge is running at {url}\n"
                f"Admin: {url}admin/  user: admin  password: {password}\n"
                "Press Ctrl-C to stop the web server, the worker and beat.\n"
            )
        )
        try:
            while all(p.poll() is None for p in processes.values()):
                time.sleep(0.5)
            dead = [name for name, p in processes.items() if p.poll() is not None]
            self.stderr.write(f"{', '.join(dead)} stopped unexpectedly; stopping the rest.")
        except KeyboardInterrupt:
            self.stdout.write("Stopping ...")
        finally:
            children_stop(list(processes.values()))

    def _load_real_data(self, host: str, port: int) -> None:
        """The published judgments of ../shared/data (QAJ_DEMO_DATA_DIR), so the dashboards
        show agreement and the paper numbers at first sight."""
        from annotation.services.demo_real_data import demo_real_data_load

        admin = get_user_model().objects.get(username="admin")
        data_dir = Path(settings.QAJ_DEMO_DATA_DIR)
        projects, skipped = demo_real_data_load(data_dir=data_dir, owner=admin)
        for project in projects:
            self.stdout.write(f"  {project.slug}: {project.title} — cockpit "
                              f"http://{host}:{port}/metrics/{project.slug}/cockpit/ · dashboard "
                              f"http://{host}:{port}/metrics/{project.slug}/dashboard/")
        for reason in skipped:
            self.stdout.write(f"  skipped {reason}")
        # The dashboards' reports, computed now rather than on the first visit (the LFQA
        # dashboard took 18 s to open while the demo's LERC trained beside it). Only stale
        # ones: a restart with nothing new computes nothing. The task by name (layers).
        from core.background import task_run_here

        started = time.perf_counter()
        refreshed = task_run_here("worker.tasks.reports.reports_refresh_stale", args=[True])
        if refreshed:
            self.stdout.write(f"  dashboards of {len(refreshed)} project(s) precomputed in "
                              f"{time.perf_counter() - started:.0f} s")

    def _ensure_admin(self) -> str:
        """Create (once) the demo admin; its password is kept in var/ so reruns print it."""
        password_file = settings.VAR_DIR / "admin-password.txt"
        user_model = get_user_model()
        if password_file.exists() and user_model.objects.filter(username="admin").exists():
            return password_file.read_text().strip()
        password = secrets.token_urlsafe(12)
        user, _ = user_model.objects.get_or_create(
            username="admin", defaults={"is_staff": True, "is_superuser": True}
        )
        user.is_staff = user.is_superuser = True
        user.set_password(password)
        user.save()
        password_file.write_text(password + "\n")
        password_file.chmod(0o600)
        return password


def children_stop(processes: list[subprocess.Popen], *, grace_s: float = 15) -> None:
    """Stop the demo's children, each started in a process group of its own: SIGTERM, up to
    `grace_s` each to finish, then SIGKILL to the whole group. A worker stopped mid-task (the
    demo's LERC training) waits for its task and is killed; its pool process, in the same
    group, went on training with nobody left to stop it."""
    for process in processes:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
    for process in processes:
        try:
            process.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    for process in processes:
        group = getattr(process, "pid", None)  # the group each child leads (process_group=0)
        if not isinstance(group, int) or group <= 0:
            continue  # no child of ours (0 would be this command's own group)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(group, signal.SIGKILL)


def _raise_keyboard_interrupt(signum, frame):
    raise KeyboardInterrupt


def demo_public_base_url(host: str, port: int) -> str:
    """Where a browser on this machine reaches `runserver host:port` (0.0.0.0 and :: listen on
    every interface; 127.0.0.1 is one of them)."""
    browsable = "127.0.0.1" if host in {"0.0.0.0", "::", ""} else host
    if ":" in browsable:
        browsable = f"[{browsable}]"
    return f"http://{browsable}:{port}"
