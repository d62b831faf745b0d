"""The ground-floor utilities live in core/ with one owner each: the API plumbing (core/api.py),
task sending (core/background.py), the database-busy guard (core/db_busy.py) and the JSON-limit
guard (core/json_limits.py). Their old homes in annotation/ are gone, and what uses them takes
them from core."""
from __future__ import annotations

import importlib.util

import pytest
from django.conf import settings
from django.db import OperationalError

from config import middleware
from core import api, background, db_busy, json_limits


@pytest.mark.parametrize("old_home", [
    "annotation.api_common", "annotation.services.background", "annotation.db_busy",
    "annotation.domain.json_limits",
])
def test_old_homes_are_gone(old_home):
    assert importlib.util.find_spec(old_home) is None


def test_the_api_and_the_middleware_use_core():
    assert settings.REST_FRAMEWORK["DEFAULT_PARSER_CLASSES"][0] == "core.api.LimitedJSONParser"
    assert api.JsonApiMixin.parser_classes == (api.LimitedJSONParser,)
    assert middleware.is_database_busy is db_busy.is_database_busy


@pytest.mark.parametrize(("error", "busy"), [
    (OperationalError("database is locked"), True),
    (OperationalError("Database is LOCKED"), True),
    (OperationalError("no such table: annotation_item"), False),
    (ValueError("database is locked"), False),
])
def test_database_busy_is_sqlites_lock_only(error, busy):
    assert db_busy.is_database_busy(error) is busy


def test_json_deeper_than_the_limit_is_refused():
    at_limit = "[" * json_limits.MAX_JSON_DEPTH + "]" * json_limits.MAX_JSON_DEPTH
    assert json_limits.json_depth(json_limits.json_loads_limited(at_limit)) == 64
    with pytest.raises(json_limits.JsonTooDeep, match="more than 64 levels"):
        json_limits.json_loads_limited("[" + at_limit + "]")


def test_sending_an_unregistered_task_names_it():
    with pytest.raises(LookupError, match="no Celery task is registered as 'no.such.task'"):
        background.task_send("no.such.task")
