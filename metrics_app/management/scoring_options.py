"""What the scoring commands (`score`, `score_project`) share: their --batch-size and --model
checked by the scoring services' own rules (the ones the APIs apply), before anything is
scored; and what they and `metric_report` say of a project metrics cannot score."""
from __future__ import annotations

from collections.abc import Sequence

from django.core.management.base import CommandError

from metrics_app.services.scoring import (
    ScoringModelError,
    batch_size_check,
    project_unscorable_reason,
    scoring_model_check,
)


def scoring_options_check(*, metric_names: Sequence[str], model: str | None,
                          batch_size: int) -> None:
    """CommandError naming the flag: --batch-size below 1, or a --model that names no trained
    version of each learned metric's own model (`scoring_model_check`; a command has no user,
    so every version is visible)."""
    try:
        batch_size_check(batch_size)
    except ValueError:
        raise CommandError("--batch-size must be at least 1") from None
    try:
        scoring_model_check(metric_names=metric_names, model=model)
    except ScoringModelError as exc:
        raise CommandError(f"--model: {exc}") from None


def unscorable_advice(project) -> str | None:
    """What `score_project` and `metric_report` say of a project automatic metrics cannot
    score (`project_unscorable_reason`, the web's and API's rule), with where its numbers
    are instead; None when they can score it."""
    reason = project_unscorable_reason(project)
    if reason is None:
        return None
    return (f"{reason}; metrics score Likert and A/B answers (its accuracy and answer choices: "
            f"python manage.py report {project.slug})")
