"""Errors that reach the top of a request answered the way the rest of the API answers: JSON
with a reason for API calls, never a bare HTML 400 or a 500 traceback.

- A body larger than DATA_UPLOAD_MAX_MEMORY_SIZE: 413 (Django's own answer is an HTML 400).
- A busy SQLite database: 503 with Retry-After and advice (core/db_busy.py).
"""
from __future__ import annotations

import logging

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpResponse, JsonResponse

from core.db_busy import BUSY_MESSAGE, is_database_busy

logger = logging.getLogger(__name__)

RETRY_AFTER_SECONDS = 5


def _wants_json(request) -> bool:
    return (request.path.startswith("/api/")
            or "application/json" in request.headers.get("Accept", "")
            or request.content_type == "application/json")


def _answer(request, message: str, *, status: int, code: str):
    if _wants_json(request):
        return JsonResponse({"detail": message, "code": code}, status=status)
    return HttpResponse(message, status=status, content_type="text/plain")


class ExplainedErrorsMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_exception(self, request, exception):
        if isinstance(exception, RequestDataTooBig):
            limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
            return _answer(request, f"The request body is larger than {limit:,} bytes; send "
                           "fewer items per request.", status=413, code="body_too_large")
        if is_database_busy(exception):
            logger.warning("database busy on %s %s: %s", request.method, request.path, exception)
            response = _answer(request, BUSY_MESSAGE, status=503, code="database_busy")
            response["Retry-After"] = str(RETRY_AFTER_SECONDS)
            return response
        return None
