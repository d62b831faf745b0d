"""Annotator-facing pages (task pages) and the landing page."""
from django.urls import path

from . import views

app_name = "annotation"

urlpatterns = [
    path("", views.home, name="home"),
]
