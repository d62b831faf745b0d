"""Throttling researcher sign-ins (django-axes): after `AXES_FAILURE_LIMIT` wrong passwords for
one username from one client address, that pair is locked for `AXES_COOLOFF_TIME`, even with the
right password; a page (429) says what to do. Unlock earlier with
`manage.py axes_reset_username NAME` (or `axes_reset` for everyone), or by deleting the row
under Admin › Axes › Access attempts.

Annotators never sign in (their links and tokens are not passwords), and API tokens do not go
through `authenticate()`, so only the admin login (researchers) is throttled.
"""
from __future__ import annotations

import ipaddress

from axes.backends import AxesStandaloneBackend
from axes.handlers.database import AxesDatabaseHandler


class LoginThrottleBackend(AxesStandaloneBackend):
    """Axes' lockout check for every sign-in made through a request. `authenticate()` without a
    request (the test client's `login()`, a script) is not a sign-in attempt from a client and
    passes on to the next backend instead of raising."""

    def authenticate(self, request, username=None, password=None, **kwargs):
        if request is None:
            return None
        return super().authenticate(request, username=username, password=password, **kwargs)


def client_address(request) -> str | None:
    """The same client address as the rate limits (`QAJ_TRUSTED_PROXY_HEADER` honoured only
    when set): a client cannot pick a fresh address per attempt by sending X-Forwarded-For.
    None when the request has none (the test client's `force_login`) or it is not an IP
    address: the attempts table keeps addresses in an `inet` column on PostgreSQL, which
    refuses anything else (a DataError, a 500, on every admin request)."""
    from annotation.services.access import request_client_address

    address = request_client_address(meta=request.META)
    try:
        return str(ipaddress.ip_address(address.strip()))
    except ValueError:
        return None


class LoginThrottleHandler(AxesDatabaseHandler):
    """Axes' database handler, but a sign-in with no failed attempts on record writes nothing.

    Axes clears expired and (after a success) the user's attempts with `QuerySet.delete()`,
    which opens a transaction even when no row matches: on SQLite (IMMEDIATE transactions) each
    waited for the write lock behind a long job, and admin sign-in went past a second while a
    project was being scored (tests/reliability/test_pages_during_long_jobs.py). The table is
    empty almost always, so one read decides; with rows on record axes deletes as usual."""

    @staticmethod
    def _nothing_recorded() -> bool:
        from axes.models import AccessAttempt

        return not AccessAttempt.objects.exists()

    def clean_expired_user_attempts(self, request=None, credentials=None) -> int:
        if self._nothing_recorded():
            return 0
        return super().clean_expired_user_attempts(request, credentials)

    def reset_user_attempts(self, request, credentials=None) -> int:
        if self._nothing_recorded():
            return 0
        return super().reset_user_attempts(request, credentials)
