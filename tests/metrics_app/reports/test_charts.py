"""Server-rendered charts read the right way round."""
from __future__ import annotations

import re

from metrics_app.reports.charts import worker_scatter


def _tick_positions(svg: str, labels: list[str]) -> dict[str, float]:
    """y coordinate (SVG: larger is lower on the page) of each y tick label's <text>."""
    positions = {}
    for label in labels:
        match = re.search(r'<text[^>]*\by="([0-9.]+)"[^>]*>' + re.escape(label) + "</text>", svg)
        if match:
            positions[label] = float(match.group(1))
    return positions


def test_likert_worker_scatter_runs_upwards_and_says_which_way_is_better():
    workers = [{"external_id": f"w{i}", "agreement_with_others": value, "median_time_s": 10 + i,
                "flags": []} for i, value in enumerate([0.2, 0.6, 1.0, 1.4])]
    svg = worker_scatter(workers, kind="likert")
    assert "lower: closer to the others" in svg
    ticks = _tick_positions(svg, ["0.4", "1.2"])
    assert set(ticks) == {"0.4", "1.2"}
    assert ticks["0.4"] > ticks["1.2"]       # small distances at the bottom, not the top
    nominal = worker_scatter([{**w, "agreement_with_others": w["agreement_with_others"] / 2}
                              for w in workers], kind="ab")
    assert "higher: closer to the others" in nominal
