"""The README's run command as a new user meets it: `manage.py rundemo` on the embedded
defaults (SQLite file, filesystem broker, demo data) serves the admin with every task kind and
a working annotator link, runs a Celery worker and beat, and SIGTERM (like Ctrl-C) stops all
of them."""
from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.support.paths import REPO_ROOT

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _children(pid: int) -> set[int]:
    """Every live descendant of `pid` (read from /proc)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if fields[0] != "Z":
                parents[int(entry.name)] = int(fields[1])
    found, frontier = set(), {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def _wait_for(predicate, *, seconds: float, what: str, log: Path):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.5)
    pytest.fail(f"rundemo: {what} not seen within {seconds:.0f} s; output:\n"
                + log.read_text()[-4000:])


def test_rundemo_serves_the_demo_and_stops_everything_on_sigterm(tmp_path):
    port = _free_port()
    var = tmp_path / "var"
    env = {key: value for key, value in os.environ.items()
           if key not in {"DATABASE_URL", "CELERY_BROKER_URL", "QAJ_TEST_DB_NAME"}}
    env |= {"DJANGO_SETTINGS_MODULE": "config.settings.dev", "QAJ_VAR_DIR": str(var),
            "PYTHONUNBUFFERED": "1"}
    log = tmp_path / "rundemo.log"
    with log.open("w") as out:
        # Its own session, like a terminal's foreground job: Ctrl-C reaches the whole group.
        demo = subprocess.Popen([sys.executable, "manage.py", "rundemo", "--port", str(port)],
                                cwd=REPO_ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    try:
        _wait_for(lambda: "QA Judge is running" in log.read_text(), seconds=240,
                  what="the start-up banner", log=log)
        text = log.read_text()
        password = re.search(r"user: admin\s+password: (\S+)", text).group(1)
        link = re.search(r"annotate as .+? at (http://\S+)", text).group(1)
        _wait_for(lambda: "celery@" in log.read_text() and " ready." in log.read_text(),
                  seconds=120, what="the Celery worker's ready line", log=log)
        base = f"http://127.0.0.1:{port}"

        def answers():
            try:
                return httpx.get(f"{base}/admin/login/", timeout=5).status_code == 200
            except httpx.HTTPError:
                return False

        _wait_for(answers, seconds=60, what="the web server", log=log)
        with httpx.Client(base_url=base, timeout=30, follow_redirects=True) as client:
            login_page = client.get("/admin/login/")
            token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"',
                              login_page.text).group(1)
            client.post("/admin/login/?next=/admin/", data={
                "csrfmiddlewaretoken": token, "username": "admin", "password": password,
                "next": "/admin/"})
            projects = client.get("/admin/annotation/project/")
            assert projects.status_code == 200 and "/admin/login/" not in str(projects.url)
            for kind in ("Likert", "A/B", "multiple choice"):
                assert kind.lower() in projects.text.lower(), kind
            task = client.get(link)
            assert task.status_code == 200 and 'id="task-form"' in task.text
            # The published judgments of ../shared/data are there at first sight.
            for slug in ("demo-lfqa-experts", "demo-onestopqa", "demo-evouna-nq"):
                assert f"/metrics/{slug}/cockpit/" in text, slug
            dashboard = client.get("/metrics/demo-lfqa-experts/dashboard/")
            assert dashboard.status_code == 200 and "Fleiss" in dashboard.text
        alive = _children(demo.pid)
        assert len(alive) >= 3, "web server, worker and beat run as child processes"
    finally:
        # Ctrl-C in a terminal: SIGINT to the foreground process group. The children run in
        # groups of their own, so only rundemo gets it and stops them (beat used to get it
        # too, die first and be reported as "stopped unexpectedly").
        os.killpg(demo.pid, signal.SIGINT)
        try:
            demo.wait(timeout=60)
        except subprocess.TimeoutExpired:
            demo.kill()
            pytest.fail("rundemo did not stop within 60 s of Ctrl-C")
    assert "Stopping" in log.read_text()
    assert "stopped unexpectedly" not in log.read_text()
    time.sleep(1)
    left = {pid for pid in alive if Path(f"/proc/{pid}").exists()
            and "Z" not in (Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[:1])}
    assert not left, f"processes left running after SIGTERM: {left}"
