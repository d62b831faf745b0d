"""Researcher dashboards for agreement, metrics and learned models."""
from django.urls import path  # noqa: F401

app_name = "metrics"

urlpatterns: list = []
