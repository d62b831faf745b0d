"""Who may use the researcher API: one rule, the REST framework's default permission."""
from __future__ import annotations

from rest_framework.permissions import BasePermission


class IsResearcher(BasePermission):
    """Staff researchers and superusers. Any other account (a token handed to a non-staff user,
    an annotator who was given a login) is refused with 403: the API creates projects, imports
    items and queues scoring, which only the people running studies may do. Requests without
    credentials still get 401 from authentication first."""

    message = "The API is for researchers: this account is not a staff user."

    def has_permission(self, request, view) -> bool:
        user = request.user
        return bool(user and user.is_authenticated and user.is_active
                    and (user.is_staff or user.is_superuser))
