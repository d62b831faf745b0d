"""`manage.py lerc_demo --project SLUG` with a slug that names no project is a CommandError
naming it (before: no output, exit 0, nothing queued: as if training had started)."""
from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command

from metrics_app.models import ModelVersion

pytestmark = pytest.mark.django_db


def test_an_unknown_project_is_named_not_a_silent_success():
    with pytest.raises(CommandError, match="no project with slug 'typo'"):
        call_command("lerc_demo", "--project", "typo")
    call_command("lerc_demo")  # rundemo's call: without the demo's real data, nothing to do
    assert not ModelVersion.objects.exists()
