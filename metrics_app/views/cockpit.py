"""The study cockpit of a project: its pipeline of stages, progress, work waiting for review,
the agreement gates, and money against the budget, with links to the pages that act (the
admin's stage actions, the dashboard, the review pages). Login required; only projects the
user owns or shares (others answer 404)."""
from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from annotation.access_selectors import access_project
from annotation.cockpit_selectors import study_cockpit


@login_required
def project_cockpit(request: HttpRequest, slug: str) -> HttpResponse:
    project = access_project(request.user, slug)
    return render(request, "metrics_app/cockpit.html",
                  {"project": project, "cockpit": study_cockpit(project=project)})
