"""Django choices built from the vocabulary's enums (core/vocabulary.py), so the models' choices
are the vocabulary and never a second spelling of it."""
from __future__ import annotations

from django.db import models

from core.vocabulary import LabelledStrEnum


def django_choices(vocabulary: type[LabelledStrEnum], *, module: str) -> type[models.TextChoices]:
    """A `TextChoices` with the same member names, values and labels as `vocabulary` (migrations
    see exactly the choices they saw when they were spelled out). `module` is the defining
    module's `__name__`, so the class pickles and prints like one written there."""
    return models.TextChoices(
        vocabulary.__name__,
        [(member.name, (member.value, member.label)) for member in vocabulary],
        module=module,
    )
