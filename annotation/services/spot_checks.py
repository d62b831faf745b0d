"""Recording a researcher's spot check of one judgment ("looks right" or "problem", with an
optional note). Once per judgment: a second submission of the same judgment (a double click,
a second tab, another researcher) returns the decision already stored and stores nothing.
The sample to check is drawn by annotation/spot_check_selectors.py."""
from __future__ import annotations

from django.db import IntegrityError, transaction

from annotation.domain.control_characters import MAX_NOTE_CHARS, note_problem
from annotation.models import Judgment, SpotCheck, SpotCheckVerdict


class SpotCheckInvalid(ValueError):
    """The decision is not one of the verdicts, or its note is too long or holds a control
    character."""


def spot_check_record(*, judgment: Judgment, verdict, note: str = "",
                      user=None) -> tuple[SpotCheck, bool]:
    """(the judgment's spot check, whether this call stored it). SpotCheckInvalid names what
    is wrong; nothing is stored then."""
    verdict = str(verdict or "").strip().lower()
    if verdict not in SpotCheckVerdict.values:
        raise SpotCheckInvalid(
            f"the verdict must be one of {', '.join(SpotCheckVerdict.values)}")
    note = (note or "").strip()
    problem = note_problem(note, MAX_NOTE_CHARS)
    if problem:
        raise SpotCheckInvalid(problem)
    existing = SpotCheck.objects.filter(judgment=judgment).first()
    if existing is not None:
        return existing, False
    try:
        with transaction.atomic():
            return SpotCheck.objects.create(judgment=judgment, verdict=verdict, note=note,
                                            checked_by=user), True
    except IntegrityError:  # a concurrent submission of the same judgment won
        return SpotCheck.objects.get(judgment=judgment), False
