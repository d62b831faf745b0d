"""Researcher pages of metrics_app: the project dashboard (`dashboard`) and the metrics page
(`metrics_page`)."""
