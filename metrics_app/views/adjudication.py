"""The adjudication queue of a project: the items its annotators disagree on most, each with
every answer, and a form to record the item's label with a note (annotation/services/
adjudication.py). Login required; only projects the user owns or shares (others: 404)."""
from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from annotation.access_selectors import access_item, access_project
from annotation.domain.numbers import row_id_of
from annotation.models import TaskKind
from annotation.services.adjudication import (
    AdjudicationInvalid,
    adjudication_choices,
    adjudication_queue,
    adjudication_record,
)

QUEUE_LENGTH = 50


@login_required
def adjudication_page(request: HttpRequest, slug: str) -> HttpResponse:
    project = access_project(request.user, slug)
    include_decided = request.GET.get("decided") == "1"
    queue = adjudication_queue(project=project, limit=QUEUE_LENGTH,
                               include_decided=include_decided)
    return render(request, "metrics_app/adjudicate.html", {
        "project": project, "queue": queue, "choices": adjudication_choices(project),
        "include_decided": include_decided,
        "measure": "spread of the scores (standard deviation)" if project.kind == TaskKind.LIKERT
        else "entropy of the answers (bits)",
    })


@login_required
@require_POST
def adjudication_submit(request: HttpRequest, slug: str) -> HttpResponse:
    project = access_project(request.user, slug)
    item_id = row_id_of(request.POST.get("item"))
    item = access_item(project, item_id) if item_id is not None else None
    target = reverse("metrics:adjudicate", args=[project.slug])
    if item is None:
        messages.error(request, "No such item in this project.")
        return redirect(target)
    try:
        decision = adjudication_record(item=item, value=request.POST.get("label"),
                                       note=request.POST.get("note", ""), user=request.user)
    except AdjudicationInvalid as exc:
        messages.error(request, f"{item.external_id}: {exc}.")
        return redirect(f"{target}#item-{item.pk}")
    messages.success(request, f"{item.external_id} is now labelled {decision.label}.")
    return redirect(target)
