"""REST API routes for projects, items and judgments (see annotation/apis.py)."""
from django.urls import path  # noqa: F401

app_name = "annotation-api"

urlpatterns: list = []
