"""Annotator pages. Views stay thin: they check access, call services, render templates."""
from django.shortcuts import render

from annotation.models import Project


def home(request):
    projects = Project.objects.none()
    if request.user.is_authenticated:
        projects = Project.objects.order_by("title")
    return render(request, "annotation/home.html", {"projects": projects})
