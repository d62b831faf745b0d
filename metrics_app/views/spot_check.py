"""Random spot checks of a project's judgments: a reproducible random sample of the submitted
or approved work that counts and nobody has checked yet (annotation/spot_check_selectors.py),
each with the item as the worker saw it and the worker's answer, and a form to record "looks
right" or "problem" once per judgment (annotation/services/spot_checks.py). Login required;
only projects the user owns or shares (others: 404)."""
from __future__ import annotations

import secrets
from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from annotation.access_selectors import access_judgment, access_project, access_stage
from annotation.domain.numbers import ascii_whole_number, row_id_of
from annotation.models import SpotCheckVerdict
from annotation.services.spot_checks import SpotCheckInvalid, spot_check_record
from annotation.spot_check_selectors import (
    DEFAULT_SAMPLE_SIZE,
    MAX_SAMPLE_SIZE,
    spot_check_pool,
    spot_check_sample,
)

SEED_CHARS = 32


def _sample_params(request: HttpRequest, project, source) -> dict:
    """The seed, size and stage of the sample: from the query (or the form that posted), a new
    random seed on ?new=1, else the seed this session keeps for the project (so a reload shows
    the same sample)."""
    key = f"spot_check_seed_{project.pk}"
    seed = (source.get("seed") or "").strip()[:SEED_CHARS]
    if source.get("new"):
        seed = secrets.token_hex(4)
    elif not seed:
        seed = request.session.get(key) or secrets.token_hex(4)
    request.session[key] = seed
    asked = (source.get("size") or "").strip()
    size = ascii_whole_number(asked)
    if size is None or not 1 <= size <= MAX_SAMPLE_SIZE:
        if asked:
            messages.warning(request, f"The sample size must be a whole number from 1 to "
                                      f"{MAX_SAMPLE_SIZE}; showing {DEFAULT_SAMPLE_SIZE}.")
        size = DEFAULT_SAMPLE_SIZE
    stage = access_stage(project, source["stage"]) if source.get("stage") else None
    return {"seed": seed, "size": size, "stage": stage}


def _page_url(project, params: dict) -> str:
    query = {"seed": params["seed"], "size": params["size"]}
    if params["stage"] is not None:
        query["stage"] = params["stage"].pk
    return f"{reverse('metrics:spot-check', args=[project.slug])}?{urlencode(query)}"


@login_required
def spot_check_page(request: HttpRequest, slug: str) -> HttpResponse:
    project = access_project(request.user, slug)
    params = _sample_params(request, project, request.GET)
    sample = spot_check_sample(project=project, **params)
    return render(request, "metrics_app/spot_check.html", {
        "project": project, **params, "sample": sample, "max_size": MAX_SAMPLE_SIZE,
        "remaining": spot_check_pool(project=project, stage=params["stage"]).count(),
        "stages": project.stages.all(), "verdicts": SpotCheckVerdict.choices,
    })


@login_required
@require_POST
def spot_check_submit(request: HttpRequest, slug: str) -> HttpResponse:
    project = access_project(request.user, slug)
    params = _sample_params(request, project, request.POST)
    target = _page_url(project, params)
    judgment_id = row_id_of(request.POST.get("judgment"))
    if judgment_id is None:
        messages.error(request, "No such judgment in this project.")
        return redirect(target)
    judgment = access_judgment(project, judgment_id)
    try:
        check, created = spot_check_record(judgment=judgment,
                                           verdict=request.POST.get("verdict"),
                                           note=request.POST.get("note", ""), user=request.user)
    except SpotCheckInvalid as exc:
        messages.error(request, f"Judgment {judgment.pk}: {exc}.")
        return redirect(f"{target}#judgment-{judgment.pk}")
    if created:
        messages.success(request, f"Judgment {judgment.pk}: recorded "
                                  f"“{check.get_verdict_display()}”.")
    else:
        messages.info(request, f"Judgment {judgment.pk} was already spot-checked "
                               f"(“{check.get_verdict_display()}”); nothing changed.")
    return redirect(target)
