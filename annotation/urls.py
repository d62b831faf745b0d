"""Annotator-facing pages (task pages) and the landing page."""
from django.urls import path

from . import task_views, views

app_name = "annotation"

urlpatterns = [
    path("", views.home, name="home"),
    # Annotator task pages (annotation/task_views.py) and the JSON calls their script makes.
    path("task/link/<str:token>/", task_views.task_link, name="task-link"),
    path("task/mturk/<int:stage_id>/", task_views.task_mturk, name="task-mturk"),
    path("task/prolific/<int:stage_id>/", task_views.task_prolific, name="task-prolific"),
    path("task/complete/<str:token>/", task_views.task_complete, name="task-complete"),
    path("task/api/autosave/", task_views.task_autosave, name="task-autosave"),
    path("task/api/confirm/", task_views.task_confirm, name="task-confirm"),
    path("task/api/submit/", task_views.task_submit, name="task-submit"),
]
