"""Site-wide error views."""
from __future__ import annotations

from django.http import JsonResponse
from django.views import defaults


def page_not_found(request, exception=None):
    """API clients get JSON for every 404, including URLs no route matches (e.g. a
    path parameter outside its converter's pattern); pages keep the HTML 404."""
    if request.path.startswith("/api/"):
        return JsonResponse({"detail": "Not found."}, status=404)
    return defaults.page_not_found(request, exception)
