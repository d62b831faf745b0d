"""A stored LERC version whose files are damaged on disk (a truncated copy, a config that is
not JSON) says so at serving time, and does not block the next version's promotion decision:
the reader's own error (safetensors' "invalid header length") used to escape every door."""
from __future__ import annotations

from pathlib import Path

import pytest

from metrics_app.models import ModelStatus
from metrics_app.registry import MetricInput, MetricUnavailable, get_metric
from metrics_app.services.lerc import evaluation as lerc_evaluation
from metrics_app.services.lerc import (
    model_version_create,
    model_version_train,
    promoted_model_version,
)
from tests.support.lerc import likert_project_from_toy

pytestmark = [pytest.mark.django_db, pytest.mark.reliability]

ANSWER = MetricInput(id="1", question="What color is thing 0?", references=["red"],
                     candidate="blue", passage="Thing 0 is red.")


def _damage(folder: Path, how: str) -> None:
    if how == "truncated weights":
        weights = folder / "model.safetensors"
        weights.write_bytes(weights.read_bytes()[:1000])
    else:
        (folder / "config.json").write_text("")
    lerc_evaluation._SCORERS.clear()  # a fresh worker process: nothing loaded yet


@pytest.mark.parametrize("how", ["truncated weights", "empty config"])
def test_a_damaged_model_folder_is_a_clear_error_at_serving_and_does_not_block_the_next_version(
        lerc_settings, how):
    lerc_settings.QAJ_LERC_TRAIN_OPTIONS = {**lerc_settings.QAJ_LERC_TRAIN_OPTIONS, "epochs": 1}
    lerc_settings.QAJ_LERC_PROMOTION_BASELINES = []
    project, _ = likert_project_from_toy(6)
    v1 = model_version_train(model_version=model_version_create(projects=[project]))
    assert v1.status == ModelStatus.PROMOTED, v1.error
    _damage(Path(v1.artifact_uri), how)

    with pytest.raises(MetricUnavailable, match=(
            f"lerc v{v1.number}: model folder .* cannot be loaded, its files are damaged or "
            "incomplete .*; restore the folder or train a new version")):
        get_metric("lerc").score_batch([ANSWER])

    # The next version is decided: the unreadable incumbent cannot be compared (recorded),
    # and the new version serves instead of failing its decision again and again.
    v2 = model_version_train(model_version=model_version_create(projects=[project]))
    assert v2.status == ModelStatus.PROMOTED, v2.error
    assert "damaged or incomplete" in v2.metrics["promotion_decision"]["incumbent_error"]
    assert promoted_model_version(projects=[project]).pk == v2.pk
    assert isinstance(get_metric("lerc").score_batch([ANSWER])[0], float)
