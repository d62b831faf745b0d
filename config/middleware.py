"""A busy SQLite database answers 503 with advice instead of a 500 (annotation/db_busy.py)."""
from __future__ import annotations

import logging

from django.http import HttpResponse, JsonResponse

from annotation.db_busy import BUSY_MESSAGE, is_database_busy

logger = logging.getLogger(__name__)

RETRY_AFTER_SECONDS = 5


class DatabaseBusyMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_exception(self, request, exception):
        if not is_database_busy(exception):
            return None
        logger.warning("database busy on %s %s: %s", request.method, request.path, exception)
        wants_json = (request.path.startswith("/api/")
                      or "application/json" in request.headers.get("Accept", "")
                      or request.content_type == "application/json")
        if wants_json:
            response = JsonResponse({"detail": BUSY_MESSAGE, "code": "database_busy"}, status=503)
        else:
            response = HttpResponse(BUSY_MESSAGE, status=503, content_type="text/plain")
        response["Retry-After"] = str(RETRY_AFTER_SECONDS)
        return response
