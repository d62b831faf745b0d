"""Admin for metrics_app. Cached scores and reports are computed, never edited by hand, so
they are read-only; researchers see only rows of projects visible to them."""
from __future__ import annotations

from django.contrib import admin

from annotation.admin import ReadOnlyAdmin

from .models import MetricScore, Report


@admin.register(MetricScore)
class MetricScoreAdmin(ReadOnlyAdmin):
    project_path = "item__project"
    list_display = ("item", "metric", "version", "side", "value", "created_at")
    list_filter = ("metric", "version", "side")
    list_select_related = ("item__project",)
    search_fields = ("item__external_id", "metric", "version")


@admin.register(Report)
class ReportAdmin(ReadOnlyAdmin):
    list_display = ("kind", "project", "stage", "judgment_watermark", "computed_at")
    list_filter = ("kind", ("project", admin.RelatedOnlyFieldListFilter))
    list_select_related = ("project", "stage__project")
    search_fields = ("kind", "project__slug", "project__title")
