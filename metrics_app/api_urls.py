"""REST API routes for reports, metric scoring and model versions."""
from django.urls import path  # noqa: F401

app_name = "metrics-api"

urlpatterns: list = []
