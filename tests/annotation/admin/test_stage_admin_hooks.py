"""annotation/hooks.py: a higher app adds stage admin actions by registering them (metrics_app
does in its AppConfig.ready), not by patching the StageAdmin class; the admin lists its own
actions first, then the registered ones, each once."""
from __future__ import annotations

import pytest
from django.contrib import admin
from django.test import RequestFactory

from annotation import hooks
from annotation.admin.actions import STAGE_ACTIONS
from annotation.models import Stage
from metrics_app.stage_admin_actions import STAGE_ADMIN_ACTIONS
from testing.factories import make_user

pytestmark = pytest.mark.django_db


@pytest.fixture
def request_of_a_researcher():
    request = RequestFactory().get("/admin/annotation/stage/")
    request.user = make_user("researcher")
    return request


@pytest.fixture
def registry(monkeypatch):
    """The registry as the apps left it, restored after the test."""
    monkeypatch.setattr(hooks, "_stage_admin_actions", list(hooks._stage_admin_actions))
    return hooks


def test_metrics_app_registered_its_actions_at_ready_after_the_stage_admins_own(
        request_of_a_researcher):
    stage_admin = admin.site.get_model_admin(Stage)
    names = list(stage_admin.get_actions(request_of_a_researcher))
    own = [action.__name__ for action in STAGE_ACTIONS]
    added = [action.__name__ for action in STAGE_ADMIN_ACTIONS]
    assert added == ["route_by_uncertainty", "draw_adaptive_pairs"]
    assert [name for name in names if name in own + added] == own + added
    assert hooks.stage_admin_actions_registered() == STAGE_ADMIN_ACTIONS


def test_an_action_registered_later_is_listed_once(registry, request_of_a_researcher):
    @admin.action(description="Say hello")
    def say_hello(modeladmin, request, queryset):
        modeladmin.message_user(request, "hello")

    registry.stage_admin_action_register(say_hello)
    registry.stage_admin_action_register(say_hello)
    stage_admin = admin.site.get_model_admin(Stage)
    actions = stage_admin.get_actions(request_of_a_researcher)
    assert list(actions)[-1] == "say_hello"
    assert list(actions).count("say_hello") == 1
    assert actions["say_hello"][2] == "Say hello"
