"""A restarted rehearsal server forgets everything it held but the database does not: each run
of `mturk_rehearsal` and `prolific_rehearsal` hands out ids no earlier run gave. The rehearsal
found the seeded server of the second run reissuing the first run's HIT and assignment ids: a
new worker's page was refused ("This assignment belongs to another worker or HIT", the id was
an old row's) and the old stage's sync would have read the new HIT as its own."""
from __future__ import annotations

import pytest
from django.core.management import call_command

import testing.mturk_server
import testing.prolific_server
from annotation.management.commands import mturk_rehearsal, prolific_rehearsal

pytestmark = [pytest.mark.reliability]


def _runs(monkeypatch, module, server_module, class_name: str, command: str, *args) -> list:
    """Run the command twice without serving; returns the servers it built."""
    built = []
    original = getattr(server_module, class_name)

    class Recording(original):
        def __init__(self, *a, **kw):
            super().__init__(*a, **kw)
            built.append(self)

    monkeypatch.setattr(server_module, class_name, Recording)
    monkeypatch.setattr(module, "serve_until_stopped", lambda httpd, announce: httpd.server_close())
    for _ in range(2):
        call_command(command, "--port", "0", *args)
    return built


def test_each_mturk_rehearsal_run_issues_new_hit_and_assignment_ids(monkeypatch):
    first, second = _runs(monkeypatch, mturk_rehearsal, testing.mturk_server, "MTurkServer",
                          "mturk_rehearsal")
    ids = [[testing.mturk_server._new_id(server.state.rng) for _ in range(5)]
           for server in (first, second)]
    assert not set(ids[0]) & set(ids[1])


def test_each_prolific_rehearsal_run_issues_new_study_and_session_ids(monkeypatch):
    first, second = _runs(monkeypatch, prolific_rehearsal, testing.prolific_server,
                          "ProlificServer", "prolific_rehearsal", "--token", "t")
    ids = [[server.state.new_id("st") for _ in range(5)] for server in (first, second)]
    assert not set(ids[0]) & set(ids[1])
    assert all(len(i) == 24 for i in ids[0] + ids[1])  # Prolific's id length
