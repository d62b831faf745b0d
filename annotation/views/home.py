"""The landing page: where to go, and a logged-in researcher's own projects (owned or shared;
all for superusers) with their cockpit, dashboard and metrics. Views stay thin."""
from django.shortcuts import render

from annotation.access_selectors import projects_visible_to
from annotation.models import Project


def home(request):
    projects = Project.objects.none()
    if request.user.is_authenticated:
        projects = projects_visible_to(request.user).order_by("title")
    return render(request, "annotation/home.html", {"projects": projects})
