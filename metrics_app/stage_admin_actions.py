"""The stage admin actions metrics_app adds to annotation's stage admin: routing by LERC
uncertainty and adaptive A/B pairing read LERC scores and fit the leaderboard, which the
annotation layer cannot import. metrics_app/apps.py registers them through annotation/hooks.py;
each calls one service."""
from __future__ import annotations

from django.contrib import admin, messages


def _run_on_each_stage(modeladmin, request, queryset, service) -> None:
    """One service call per selected stage; a refusal (StageError) is reported for its stage
    and the others still run."""
    from annotation.stage_errors import StageError

    for stage in queryset:
        try:
            summary = service(stage=stage)
        except StageError as exc:
            modeladmin.message_user(request, str(exc), messages.ERROR)
            continue
        modeladmin.message_user(request, f"{stage}: {summary.as_text()}", messages.SUCCESS)


@admin.action(description="Route by LERC uncertainty (draft trial/full stages; budget from the "
                          "stage's routing_budget setting, judge from routing_judge when set)")
def route_by_uncertainty(modeladmin, request, queryset):
    """metrics_app/services/routing.py, on each selected stage."""
    from metrics_app.services.routing import stage_route_by_uncertainty

    _run_on_each_stage(modeladmin, request, queryset, stage_route_by_uncertainty)


@admin.action(description="Draw A/B pairs adaptively (draft trial/full stages; budget from the "
                          "stage's pairing_budget setting)")
def draw_adaptive_pairs(modeladmin, request, queryset):
    """metrics_app/services/pairing.py, on each selected stage."""
    from metrics_app.services.pairing import stage_draw_adaptive_pairs

    _run_on_each_stage(modeladmin, request, queryset, stage_draw_adaptive_pairs)


STAGE_ADMIN_ACTIONS = (route_by_uncertainty, draw_adaptive_pairs)
