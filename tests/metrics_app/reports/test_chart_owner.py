"""Charts have one owner: metrics_app/reports/charts.py draws every figure the product shows
(the dashboard's and model card's inline SVGs, the metrics and judges pages' PNG plots)."""
from __future__ import annotations

import pathlib

from metrics_app.reports.charts import metric_scatter_png, reliability_png, roc_png

ROOT = pathlib.Path(__file__).resolve().parents[3]
PRODUCT = ("annotation", "metrics_app", "worker", "config", "core")


def test_only_the_chart_module_renders_figures():
    rendering = sorted(
        str(path.relative_to(ROOT)) for package in PRODUCT
        for path in (ROOT / package).rglob("*.py")
        if "savefig(" in path.read_text(encoding="utf-8"))
    assert rendering == ["metrics_app/reports/charts.py"]


def test_the_png_plots_are_png_images():
    scatter = metric_scatter_png([0.1, 0.5, 0.9], [1.0, 3.0, 5.0], total=3, metric="f1",
                                 znormalize=False)
    roc = roc_png({"f1": {"fpr": [0.0, 0.5, 1.0], "tpr": [0.0, 0.8, 1.0], "auc": 0.7, "n": 9}})
    reliability = reliability_png({"ece": 0.05, "reliability": [
        {"mean_probability": 0.2, "observed": 0.25, "n": 4},
        {"mean_probability": 0.8, "observed": 0.75, "n": 4}]}, label="ext@1")
    for png in (scatter, roc, reliability):
        assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 1000
