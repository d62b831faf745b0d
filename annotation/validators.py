"""Django validators on model fields for researcher-entered display text, so that every
ModelForm (the admin) and ModelSerializer (the REST API) that sets such a field, and every
service that `full_clean`s a model (project create and update, the import's --create), refuse
the same characters with the same message. The rule: `annotation.domain.control_characters.
display_text_error`."""
from __future__ import annotations

from django.core.exceptions import ValidationError

from .domain.control_characters import display_text_error


def validate_one_line_text(value: str) -> None:
    """A name or title: no control characters, no line breaks or tabs."""
    if (error := display_text_error(value, multiline=False)) is not None:
        raise ValidationError(error[0].upper() + error[1:] + ".", code="control_characters")


def validate_multiline_text(value: str) -> None:
    """Instructions, a description: no control characters but tab, line feed and carriage
    return."""
    if (error := display_text_error(value, multiline=True)) is not None:
        raise ValidationError(error[0].upper() + error[1:] + ".", code="control_characters")
