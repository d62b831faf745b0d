"""Fixtures for the annotator pages: a published stage of each kind with a few items."""
from __future__ import annotations

import pytest

from annotation.models import TaskKind
from testing.factories import (
    make_worker,
)
from tests.support.tasks import make_task


@pytest.fixture
def likert_task(db):
    return make_task(TaskKind.LIKERT, group="passage-1")


@pytest.fixture
def ab_task(db):
    return make_task(TaskKind.AB)


@pytest.fixture
def worker(db):
    return make_worker()
