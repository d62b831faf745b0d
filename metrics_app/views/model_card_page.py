"""A LERC model version's card as a page (linked from the Model versions admin): its validation
and test numbers against the baselines (tables and a chart), the data it was trained on per
project, its options and timings, and the promotion decision. Login required; only researchers
who see one of its projects (superusers: every version); others get 404, as in the admin."""
from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render

from annotation.selectors import projects_visible_to
from metrics_app.models import ModelVersion
from metrics_app.services.lerc import model_card_page


@login_required
def model_card_view(request: HttpRequest, version_id: int) -> HttpResponse:
    if request.user.is_superuser:
        versions, visible_ids = ModelVersion.objects.all(), None
    else:
        visible = projects_visible_to(request.user)
        versions = ModelVersion.objects.filter(projects__in=visible).distinct()
        visible_ids = set(visible.values_list("pk", flat=True))
    version = get_object_or_404(versions, pk=version_id)
    return render(request, "metrics_app/model_card.html",
                  model_card_page(version, visible_project_ids=visible_ids))
