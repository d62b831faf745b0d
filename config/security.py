"""Security headers for every page that does not set its own (task pages set a CSP that lets
MTurk frame them, see annotation/views/task_pages.py)."""
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
