"""An in-house annotator's home page: one personal link for the whole project.

The page lists the annotator's open stages with their own progress and their history; each
stage starts from here, through the same link, so a researcher sends one link per annotator per
project rather than one per stage. The link is checked on every request: a revoked or expired
link stops working at once. Only the annotator's own counts are shown (never items or gold).
"""
from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from annotation.annotator_home_selectors import annotator_home
from annotation.selectors import worker_is_blocked_for
from annotation.services import access
from annotation.services.assignments import AssignmentRefused, more_work_for

from . import task_pages


@require_GET
@task_pages.task_page
def task_home(request: HttpRequest, token: str) -> HttpResponse:
    try:
        link = access.inhouse_link_resolve(token=token)
    except AssignmentRefused as exc:
        return task_pages.task_refused(request, exc)
    home = annotator_home(link=link)
    # A blocked annotator's stages all refuse them ("can no longer take tasks"); the home page
    # said only "nothing more for you here" beside a batch still "In progress".
    blocked = worker_is_blocked_for(worker=link.worker, project=link.project)
    for row in home.stages:
        # A stage they finished, or whose qualification they did not pass, offers no Start
        # that only leads to "Nothing more to do" (the entry's and completion page's rule).
        row.has_more = (not blocked and row.is_open
                        and more_work_for(stage=row.stage, worker=link.worker))
    context = {"link": link, "project": link.project, "worker": link.worker, "token": token,
               "home": home, "blocked": blocked}
    return render(request, "annotation/task/home.html", context)


@require_GET
@task_pages.task_page
def task_home_stage(request: HttpRequest, token: str, stage_id: int) -> HttpResponse:
    """Start (or continue) a stage from the home page."""
    try:
        link = access.inhouse_link_resolve(token=token)
        stage = access.inhouse_link_stage_choose(link=link, stage_id=stage_id)
    except AssignmentRefused as exc:
        return task_pages.task_refused(request, exc)
    return task_pages.task_start(request, stage=stage, worker=link.worker, link_id=link.pk)
