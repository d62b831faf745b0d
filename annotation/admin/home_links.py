"""Project admin action: one personal link per in-house annotator for the whole project.

Each link opens the annotator's home page (annotation/views/annotator_home.py), from which they
start every in-house stage of the project; revoke or re-issue it under In-house links.
"""
from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.helpers import ActionForm

from .actions import links_csv_response


class AnnotatorNamesActionForm(ActionForm):
    reason = forms.CharField(required=False, label="Annotators (comma-separated names)",
                             widget=forms.TextInput(attrs={"size": 40}))


@admin.action(description="In-house: one personal link per annotator for the whole project "
                          "(names, comma-separated, in the annotators field)")
def create_home_links(modeladmin, request, queryset):
    from django.conf import settings

    from annotation.services.access import inhouse_home_links

    names = [name.strip() for name in request.POST.get("reason", "").split(",") if name.strip()]
    if not names:
        modeladmin.message_user(request, "Type the annotators' names, comma-separated.",
                                messages.ERROR)
        return None
    base = settings.QAJ_PUBLIC_BASE_URL.rstrip("/")
    rows = []
    for project in queryset.order_by("slug"):
        for name, path in inhouse_home_links(project=project, names=names):
            rows.append((project.slug, "", name, f"{base}{path}"))
    return links_csv_response(rows, filename="inhouse-home-links.csv")


class ProjectHomeLinksMixin:
    action_form = AnnotatorNamesActionForm

    def get_actions(self, request):
        actions = super().get_actions(request)
        actions["create_home_links"] = (create_home_links, "create_home_links",
                                        create_home_links.short_description)
        return actions
