"""A LERC model version's card as a page (linked from the Model versions admin): its validation
and test numbers against the baselines (tables and a chart), the data it was trained on per
project, its options and timings, and the promotion decision. Login required; only researchers
who see one of its projects (superusers: every version); others get 404, as in the admin."""
from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from metrics_app.access_selectors import access_model_version
from metrics_app.services.lerc import model_card_page


@login_required
def model_card_view(request: HttpRequest, version_id: int) -> HttpResponse:
    access = access_model_version(request.user, version_id)
    return render(request, "metrics_app/model_card.html",
                  model_card_page(access.version, visible_project_ids=access.visible_project_ids))
