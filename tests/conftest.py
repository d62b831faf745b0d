"""Fixtures shared by the whole suite.

Real data lives in ../shared/data beside the checkout (QAJ_SHARED_DATA overrides). Tests that
need it skip with a reason when it is absent, except under CI=true, where they fail: CI always
has it, so a skip there would hide a broken path.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.paths import IN_CI, shared_data_path

pytest_plugins = ["tests.support.celery_workers"]


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The folder of real annotation data (onestopqa/, lfqa_experts/, ...)."""
    path = shared_data_path()
    if not path.is_dir():
        if IN_CI:
            pytest.fail(f"shared data folder {path} is missing in CI")
        pytest.skip(f"shared data folder {path} is absent")
    return path


@pytest.fixture
def researcher(django_user_model):
    return django_user_model.objects.create_user(
        username="researcher", password="pw-researcher-1", is_staff=True
    )
