"""API plumbing shared by the REST endpoints of both apps: the documented error responses
(`with_errors`), model validation errors as 400s, and the one pagination (`paginated_response`)
and parser setup."""
from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ValidationError as DjangoValidationError
from drf_spectacular.utils import OpenApiResponse
from rest_framework import serializers
from rest_framework.exceptions import ParseError
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.parsers import JSONParser
from rest_framework.response import Response

from core.json_limits import (
    JsonTooDeep,
    json_loads_limited,
    refuse_duplicate_keys,
    without_byte_order_mark,
)


def django_to_drf(error: DjangoValidationError) -> serializers.ValidationError:
    """Model validation errors (full_clean in services) as a 400 naming the fields."""
    if hasattr(error, "message_dict"):
        return serializers.ValidationError(error.message_dict)
    return serializers.ValidationError({"non_field_errors": error.messages})


class ErrorDetailSerializer(serializers.Serializer):
    detail = serializers.CharField()


_ERRORS = {
    # One shape for every 400, whichever layer refuses: a serializer ({"field": ["msg"]}), a
    # service naming one input ({"project": "msg"}), or the JSON parser and whole-request
    # checks ({"detail": "msg"}). Clients read each key's message(s) the same way.
    400: OpenApiResponse(
        {"type": "object", "minProperties": 1, "additionalProperties": {"oneOf": [
            {"type": "string"},
            {"type": "array", "items": {"type": "string"}},
            {"type": "object", "description": "a bulk item's errors, keyed by its fields"},
        ]}},
        description="Invalid input: each offending field or query parameter (`detail` when "
        "the whole request is refused, e.g. JSON that does not parse) maps to its message or "
        "messages; bulk item errors are keyed by the item's index.",
    ),
    401: OpenApiResponse(ErrorDetailSerializer, description="No or invalid credentials."),
    403: OpenApiResponse(
        ErrorDetailSerializer,
        description="Not allowed (e.g. missing CSRF token with session auth, or changing "
        "the sharing of a project you do not own).",
    ),
    404: OpenApiResponse(
        ErrorDetailSerializer, description="No such project among yours, or no such object."
    ),
    409: OpenApiResponse(
        ErrorDetailSerializer,
        description="Conflicts with the object's state (e.g. cancelling a job that is already "
        "done, or queuing a judge run while another of it is in flight); `detail` says which.",
    ),
    415: OpenApiResponse(ErrorDetailSerializer, description="The body must be JSON."),
}


def with_errors(ok: dict, *codes: int) -> dict:
    """Success responses plus the documented error responses (401 and 403 always)."""
    return {**ok, **{code: _ERRORS[code] for code in sorted({401, 403, *codes})}}


# Digits of a limit or offset read as written; a longer one is read as 10**18 (a huge limit is
# capped at max_limit, a huge offset is past every row), never handed to int() whole.
MAX_DIGITS = 18


class ApiPagination(LimitOffsetPagination):
    default_limit = 100
    max_limit = 1000

    # DRF reads a limit or offset it cannot parse as the default: `?limit=abc` (and `?limit=0`)
    # would silently answer 100 rows. A bad value is a 400 naming the parameter and its range,
    # like every other bad input: a page holds at least one row, an offset may be 0.
    MINIMUMS = {"limit": 1, "offset": 0}

    def get_limit(self, request):
        limit = self._whole_number(request, self.limit_query_param, self.MINIMUMS["limit"])
        return self.default_limit if limit is None else min(limit, self.max_limit)

    def get_offset(self, request):
        offset = self._whole_number(request, self.offset_query_param, self.MINIMUMS["offset"])
        return offset or 0

    def get_schema_operation_parameters(self, view):
        parameters = super().get_schema_operation_parameters(view)
        minimums = {self.limit_query_param: self.MINIMUMS["limit"],
                    self.offset_query_param: self.MINIMUMS["offset"]}
        for parameter in parameters:
            if parameter["name"] in minimums:
                parameter["schema"] = {**parameter["schema"],
                                       "minimum": minimums[parameter["name"]]}
        return parameters

    @staticmethod
    def _whole_number(request, name: str, minimum: int) -> int | None:
        """The query parameter `name` as a whole number ≥ `minimum` (None when absent), or a 400
        naming it and the range."""
        value = request.query_params.get(name)
        if value is None:
            return None
        digits = value.lstrip("0") or "0"
        number = (int(digits) if len(digits) <= MAX_DIGITS else 10**MAX_DIGITS) \
            if value.isascii() and value.isdigit() else None
        if number is None or number < minimum:
            raise serializers.ValidationError(
                {name: [f"must be a whole number ({minimum} or more)"]})
        return number


class LimitedJSONParser(JSONParser):
    """DRF's JSON parser reading bodies by the rule the task pages use
    (core/json_limits.py:json_loads_limited): a nesting limit, so deeper bodies are a 400 that
    says so, never a RecursionError, and no NaN or Infinity. One function decides what JSON
    every door accepts, whatever DRF's STRICT_JSON setting says. A key given twice in one
    object is refused as the import files refuse it: JSON keeps the last, so a bulk item's
    field would be lost without a word."""

    def parse(self, stream, media_type=None, parser_context=None):
        encoding = (parser_context or {}).get("encoding", settings.DEFAULT_CHARSET)
        try:
            # A leading byte-order mark dropped, as every file door drops it.
            return json_loads_limited(without_byte_order_mark(stream.read().decode(encoding)),
                                      object_pairs_hook=refuse_duplicate_keys)
        except JsonTooDeep as exc:
            raise ParseError(str(exc)) from None
        except ValueError as exc:  # also UnicodeDecodeError and JsonNotStandard
            raise ParseError(f"JSON parse error - {exc}") from None


class JsonApiMixin:
    # JSON only: item content and settings are nested objects that form encoding cannot carry.
    parser_classes = (LimitedJSONParser,)
    pagination_class = ApiPagination


def paginated_response(*, request, view, queryset, serializer_class, on_page=None) -> Response:
    """One page of `queryset` (limit/offset, the envelope every list answers with) serialized
    with `serializer_class`; `on_page(page)` attaches what the rows need first (progress)."""
    paginator = view.pagination_class()
    page = paginator.paginate_queryset(queryset, request, view=view)
    if on_page is not None:
        on_page(page)
    return paginator.get_paginated_response(serializer_class(page, many=True).data)
