"""The qualification → trial → full stages of a study on one provider."""
from __future__ import annotations

from annotation.models import StageKind, StageStatus
from testing.factories import make_stage


def make_stages(project, provider: str):
    qualification = make_stage(project, kind=StageKind.QUALIFICATION, status=StageStatus.DRAFT,
                               provider=provider, order=1, settings={"max_workers": 6})
    trial = make_stage(project, kind=StageKind.TRIAL, status=StageStatus.DRAFT, provider=provider,
                       order=2, requires_stage=qualification, judgments_per_item=3,
                       settings={"n_items": 10})
    full = make_stage(project, kind=StageKind.FULL, status=StageStatus.DRAFT, provider=provider,
                      order=3, requires_stage=qualification, agreement_threshold=0.5)
    return qualification, trial, full
