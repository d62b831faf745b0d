"""Every JSON a command or an export writes is strict JSON: a NaN or an infinity reaching a
writer becomes null, which jq, JSON.parse and jsonb read; Python's default writes the bare
tokens NaN and Infinity, which no strict parser reads."""
from __future__ import annotations

import io
import json
import math
import re
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from django.core.management import call_command

from core.json_limits import json_dumps_strict
from testing.factories import make_project

ROOT = Path(__file__).resolve().parents[2]


def strict_loads(text: str):
    def refuse(token):
        raise ValueError(f"{token} is not JSON")
    return json.loads(text, parse_constant=refuse)


def test_non_finite_numbers_are_written_as_null_and_the_rest_unchanged():
    value = {"alpha": math.nan, "ci": [-math.inf, np.float64("nan"), np.float32(0.5)],
             "n": np.int64(3), 2: "key as text", "text": "é"}
    written = json_dumps_strict(value, ensure_ascii=False, indent=1)
    assert strict_loads(written) == {"alpha": None, "ci": [None, None, 0.5], "n": 3,
                                     "2": "key as text", "text": "é"}
    finite = {"a": [1.5, 2], "b": "x"}
    assert json_dumps_strict(finite, sort_keys=True) == json.dumps(finite, sort_keys=True)
    with pytest.raises(TypeError):  # anything else not JSON still fails loudly
        json_dumps_strict({"a": object()})


def test_no_json_writer_of_a_command_or_an_export_uses_python_s_nan_tokens():
    """`json.dumps` (allow_nan=True) anywhere a command or an export writes JSON: the strict
    writer is the one way out."""
    writers = [*ROOT.glob("*/management/commands/*.py"),
               *ROOT.glob("annotation/services/*exports.py"),
               ROOT / "metrics_app/services/lerc/model_card.py"]
    offenders = [f"{path.relative_to(ROOT)}:{n}" for path in writers
                 for n, line in enumerate(path.read_text().splitlines(), 1)
                 if re.search(r"\bjson\.dumps?\(", line)]
    assert not offenders, offenders


@pytest.mark.django_db
def test_a_nan_reaching_report_metric_report_judge_report_and_export_is_written_as_null(
        monkeypatch, tmp_path):
    project = make_project(slug="nan-doors")
    poisoned = {"workers": [], "alpha": math.nan, "ci": [math.inf, 0.1]}
    monkeypatch.setattr("metrics_app.management.commands.report.report_refresh",
                        lambda **kwargs: dict(poisoned))
    out = io.StringIO()
    call_command("report", project.slug, "--json", "--refresh", stdout=out)
    assert strict_loads(out.getvalue())["alpha"] is None

    monkeypatch.setattr("metrics_app.management.commands.metric_report.metric_report_cached",
                        lambda **kwargs: (SimpleNamespace(data=dict(poisoned)), False))
    out = io.StringIO()
    call_command("metric_report", project.slug, "--json", stdout=out)
    assert strict_loads(out.getvalue())["ci"] == [None, 0.1]

    monkeypatch.setattr("metrics_app.management.commands.judge_report.judge_alignment_report",
                        lambda **kwargs: {**poisoned, "skipped": "nothing to compare"})
    call_command("judge_report", project.slug, "--json", str(tmp_path / "j.json"),
                 stdout=io.StringIO())
    assert strict_loads((tmp_path / "j.json").read_text())["alpha"] is None

    monkeypatch.setattr("annotation.services.exports.judgment_rows",
                        lambda **kwargs: iter([{"score": math.nan}, {"score": 2.0}]))
    out = io.StringIO()
    call_command("export_data", project.slug, "--no-progress", stdout=out)
    assert [strict_loads(line) for line in out.getvalue().splitlines()] == [
        {"score": None}, {"score": 2.0}]
