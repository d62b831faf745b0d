"""OpenAPI schema generation (drf-spectacular) tuned to the project's API style."""
from __future__ import annotations

from drf_spectacular.openapi import AutoSchema as SpectacularAutoSchema


class AutoSchema(SpectacularAutoSchema):
    """Names components of nested serializers after the API class that holds them.

    HackSoft-style APIs nest `InputSerializer` / `OutputSerializer` inside each API class, so
    several APIs have a serializer called `InputSerializer`; drf-spectacular would give them
    all the component name "Input" (a broken schema and a warning). `MetricScoreApi.
    InputSerializer` becomes "MetricScoreInput" instead; top-level serializers keep their names.
    """

    def get_serializer_name(self, serializer, direction):
        name = super().get_serializer_name(serializer, direction)
        qualname = type(serializer).__qualname__
        if "." not in qualname or "<locals>" in qualname:
            return name
        outer = qualname.rsplit(".", 1)[0].replace(".", "")
        outer = outer.removesuffix("Api")
        return name if name.startswith(outer) else f"{outer}{name}"

    def _get_paginator(self):
        # Only GETs are paginated (`core.api.paginated_response`). A list-creating POST
        # (scoring-jobs/ answers 202 with the jobs it queued, a bare list) is not: without this
        # its 202 was documented as a page envelope and it took limit/offset parameters.
        return super()._get_paginator() if self.method == "GET" else None
