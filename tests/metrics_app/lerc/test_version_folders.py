"""Every version keeps its own weights: a version trains in a folder no other version's files
are in, so a folder that another database's version of the same number left under the
artifact root (a database started afresh or restored from a backup, a staging and a
production deployment sharing one artifact root or bucket) is neither resumed from nor
overwritten.

Before: the folder was named by the version's number alone (`lerc/lerc-v1`): the new v1
trained into the old v1's folder, resumed from its checkpoint when the options matched, and
wrote its weights over the old ones that the other database's v1 still served."""
from __future__ import annotations

from pathlib import Path

import pytest

from metrics_app.models import ModelStatus
from metrics_app.services.lerc import model_version_create, model_version_train
from tests.support.lerc import likert_project_from_toy

pytestmark = [pytest.mark.django_db, pytest.mark.reliability]


def test_a_version_never_trains_in_or_over_a_folder_another_version_left(lerc_settings):
    root = Path(lerc_settings.QAJ_ARTIFACT_ROOT)
    # What another database's v1 left: its weights (served there) and its card.
    other = root / "lerc" / "lerc-v1" / "model"
    other.mkdir(parents=True)
    (other / "model.safetensors").write_bytes(b"the other deployment's served weights")
    (other / "MODEL_CARD.md").write_text("lerc v1 of the other deployment\n")

    project, _ = likert_project_from_toy(6)
    version = model_version_train(model_version=model_version_create(projects=[project]))
    assert version.number == 1
    assert version.status in (ModelStatus.PROMOTED, ModelStatus.REJECTED), version.error
    assert (other / "model.safetensors").read_bytes() == b"the other deployment's served weights"
    assert (other / "MODEL_CARD.md").read_text() == "lerc v1 of the other deployment\n"
    assert Path(version.artifact_uri).resolve() != other.resolve()
    assert (Path(version.artifact_uri) / "model.safetensors").is_file()
