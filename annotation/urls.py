"""Annotator-facing pages (task pages) and the landing page."""
from django.urls import path

from .views import annotator_home, home, task_pages

app_name = "annotation"

urlpatterns = [
    path("", home.home, name="home"),
    # Annotator task pages (annotation/task_pages.py) and the JSON calls their script makes.
    path("task/link/<str:token>/", task_pages.task_link, name="task-link"),
    path("task/home/<str:token>/", annotator_home.task_home, name="task-home"),
    path("task/home/<str:token>/stage/<int:stage_id>/", annotator_home.task_home_stage,
         name="task-home-stage"),
    path("task/mturk/<int:stage_id>/", task_pages.task_mturk, name="task-mturk"),
    path("task/prolific/<int:stage_id>/", task_pages.task_prolific, name="task-prolific"),
    path("task/complete/<str:token>/", task_pages.task_complete, name="task-complete"),
    path("task/api/autosave/", task_pages.task_autosave, name="task-autosave"),
    path("task/api/confirm/", task_pages.task_confirm, name="task-confirm"),
    path("task/api/submit/", task_pages.task_submit, name="task-submit"),
]
