"""Admin sign-in throttling (issue #32, point 7): twelve wrong passwords, then the right one,
signed a researcher in. Now (django-axes, config/login_throttle.py) the fifth wrong password
for one username from one address locks that pair: the right password is refused with a page
that says what to do, until the lock lifts or an administrator runs `axes_reset_username`.
Other users, other addresses, `force_login` and the annotator pages are unaffected."""
from __future__ import annotations

import pytest
from django.conf import settings
from django.core.management import call_command
from django.urls import reverse

from annotation.models import TaskKind
from annotation.services.access import inhouse_link_create
from testing.factories import make_user, make_worker
from tests.support.tasks import make_task

pytestmark = [pytest.mark.reliability, pytest.mark.django_db]

PASSWORD = "correct horse battery staple"


def _sign_in(client, username, password, address="10.0.0.1", **headers):
    return client.post(reverse("admin:login") + "?next=/admin/",
                       {"username": username, "password": password},
                       REMOTE_ADDR=address, **headers)


def _signed_in(client) -> bool:
    return client.get("/admin/").status_code == 200


def _user(name: str):
    return make_user(name, staff=True, password=PASSWORD)


def test_the_right_password_after_too_many_wrong_ones_is_refused_with_what_to_do(client):
    _user("alice")
    limit = settings.AXES_FAILURE_LIMIT
    assert 3 <= limit <= 10
    for _ in range(12):
        response = _sign_in(client, "alice", "wrong")
    assert response.status_code == 429
    response = _sign_in(client, "alice", PASSWORD)
    assert response.status_code == 429 and not _signed_in(client)
    page = response.content.decode()
    assert "Sign-in locked" in page and "axes_reset_username alice" in page
    # Sending another X-Forwarded-For does not make a fresh address (no trusted proxy set).
    response = _sign_in(client, "alice", PASSWORD, HTTP_X_FORWARDED_FOR="203.0.113.9")
    assert response.status_code == 429

    # Another user from the same address, and the same user from another address, sign in.
    _user("bob")
    assert _sign_in(client, "bob", PASSWORD).status_code == 302 and _signed_in(client)
    client.logout()
    assert _sign_in(client, "alice", PASSWORD, address="10.0.0.2").status_code == 302
    client.logout()

    # An administrator lifts the lock.
    call_command("axes_reset_username", "alice")
    assert _sign_in(client, "alice", PASSWORD).status_code == 302 and _signed_in(client)


def test_fewer_failures_than_the_limit_do_not_lock_and_a_success_starts_the_count_again(client):
    _user("carol")
    for _ in range(2):
        for _ in range(settings.AXES_FAILURE_LIMIT - 1):
            assert _sign_in(client, "carol", "wrong").status_code == 200  # the form again
        assert _sign_in(client, "carol", PASSWORD).status_code == 302 and _signed_in(client)
        client.logout()


def test_force_login_and_annotator_pages_are_not_throttled(client):
    user = _user("dave")
    for _ in range(settings.AXES_FAILURE_LIMIT + 2):
        _sign_in(client, "dave", "wrong")
    client.force_login(user)  # tests and scripts: no sign-in attempt, no lockout
    assert _signed_in(client)
    client.logout()
    # Annotators never sign in: their link opens the task from the locked-out address too.
    project, _stage, _items = make_task(TaskKind.LIKERT)
    _link, path = inhouse_link_create(worker=make_worker(), project=project)
    assert client.get(path, REMOTE_ADDR="10.0.0.1").status_code == 200


@pytest.mark.parametrize(("meta", "expected"), [
    ({"REMOTE_ADDR": "10.1.2.3"}, "10.1.2.3"), ({"REMOTE_ADDR": "::1"}, "::1"),
    ({}, None), ({"REMOTE_ADDR": ""}, None), ({"REMOTE_ADDR": "unix:/run/gunicorn.sock"}, None),
])
def test_the_throttle_keys_on_a_real_address_or_none(meta, expected):
    """PostgreSQL keeps the attempts' addresses in an `inet` column: anything but an address
    (a request without REMOTE_ADDR, as `force_login` makes) was a DataError on every admin
    test there."""
    from django.http import HttpRequest

    from config.login_throttle import client_address

    request = HttpRequest()
    request.META.update(meta)
    assert client_address(request) == expected


@pytest.mark.parametrize("unsafe_next", [
    "https://evil.example/x", "//evil.example/x", "/\\evil.example", "https:evil.example", "",
])
def test_signing_in_with_an_unsafe_or_no_next_lands_on_the_landing_page(client, unsafe_next):
    """Django refuses a `next` on another host, and then falls back to LOGIN_REDIRECT_URL,
    whose default (/accounts/profile/) is no page here: a researcher who followed a tampered
    sign-in link was signed in onto a 404."""
    _user("alice")
    response = client.post(reverse("admin:login"),
                           {"username": "alice", "password": PASSWORD, "next": unsafe_next},
                           REMOTE_ADDR="10.0.0.1")
    assert response.status_code == 302
    assert response["Location"] == "/"
    assert client.get(response["Location"]).status_code == 200
