"""`manage.py rundemo --port N` (`make run PORT=N`): the links the admin hands out to annotators
(in-house link CSVs, the link pages) start with QAJ_PUBLIC_BASE_URL, which the web server it
starts must read as its own address; they pointed at the default http://127.0.0.1:8000 on any
other port, where nothing (or another instance) answers."""
from __future__ import annotations

import io

import pytest
from django.core.management import call_command

from annotation.management.commands import rundemo


class _ExitedProcess:
    def __init__(self, cmd, *, env, **kwargs):
        self.cmd, self.env = cmd, env
        _ExitedProcess.started.append(self)

    def poll(self):
        return 0

    def send_signal(self, signal):  # pragma: no cover - never alive
        pass

    def wait(self, timeout=None):
        return 0


def _started_env(monkeypatch, *args) -> dict[str, str]:
    _ExitedProcess.started = []
    monkeypatch.setattr(rundemo.subprocess, "Popen", _ExitedProcess)
    call_command("rundemo", "--no-demo", *args, stdout=io.StringIO(), stderr=io.StringIO())
    web = next(p for p in _ExitedProcess.started if "runserver" in p.cmd)
    return web.env


@pytest.mark.django_db
def test_the_web_server_hands_out_links_to_the_port_it_serves(monkeypatch):
    monkeypatch.delenv("QAJ_PUBLIC_BASE_URL", raising=False)
    env = _started_env(monkeypatch, "--port", "8109")
    assert env["QAJ_PUBLIC_BASE_URL"] == "http://127.0.0.1:8109"
    env = _started_env(monkeypatch, "--host", "0.0.0.0", "--port", "8001")
    assert env["QAJ_PUBLIC_BASE_URL"] == "http://127.0.0.1:8001"


@pytest.mark.django_db
def test_a_public_base_url_the_user_set_is_kept(monkeypatch):
    monkeypatch.setenv("QAJ_PUBLIC_BASE_URL", "https://judge.example.org")
    env = _started_env(monkeypatch, "--port", "8109")
    assert env["QAJ_PUBLIC_BASE_URL"] == "https://judge.example.org"
