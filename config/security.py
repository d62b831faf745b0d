"""Security headers for every page that does not set its own (task pages set a CSP that lets
MTurk frame them, see annotation/views/task_pages.py), and what a deployment requires of its
secret key (`secret_key_problem`, `secret_key_require`: production always, the development
settings whenever DEBUG is off)."""
from __future__ import annotations

DEFAULT_CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'self'; "
    "form-action 'self'; frame-ancestors 'none'"
)


class DefaultCSPMiddleware:
    """Adds a strict Content-Security-Policy (no framing, scripts only from our origin) unless
    the view already set one. Inline styles stay allowed: the admin uses style attributes."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        if "Content-Security-Policy" not in response:
            response["Content-Security-Policy"] = DEFAULT_CSP
        return response


MIN_SECRET_KEY_LENGTH = 50
MIN_SECRET_KEY_CHARACTERS = 5


def secret_key_problem(key: str, *, dev_key: str) -> str:
    """What makes `key` unfit for production ("" when it is fine): empty, the development key,
    Django's generated insecure key, or too short or too uniform (Django's W009 limits)."""
    if not key.strip():
        return "is not set or empty"
    if key == dev_key or key.startswith("django-insecure-"):
        return "is the development key"
    if len(key) < MIN_SECRET_KEY_LENGTH:
        return f"is {len(key)} characters long; at least {MIN_SECRET_KEY_LENGTH} are needed"
    if len(set(key)) < MIN_SECRET_KEY_CHARACTERS:
        return f"uses fewer than {MIN_SECRET_KEY_CHARACTERS} different characters"
    return ""


def secret_key_require(key: str, *, dev_key: str, where: str = "") -> None:
    """Refuse to start (ImproperlyConfigured) when `key` is unfit (`secret_key_problem`): Django
    would only warn (W009), and an empty key fails later, at the first signed link or session,
    with a traceback nobody connects to the setting. `where` says why a key is needed here."""
    from django.core.exceptions import ImproperlyConfigured

    problem = secret_key_problem(key, dev_key=dev_key)
    if problem:
        raise ImproperlyConfigured(
            f"DJANGO_SECRET_KEY {problem}{where}. Set it to a long random value, e.g. "
            "python -c 'import secrets; print(secrets.token_urlsafe(64))'"
        )
