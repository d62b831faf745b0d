"""What a browser posts for an admin change page as rendered: the main form's values and every
inline formset's (management form included), so a test changes only what it names."""
from __future__ import annotations

from django import forms


def _form_values(form) -> dict:
    data = {}
    for bound in form:
        value = bound.value()
        if isinstance(bound.field.widget, forms.NullBooleanSelect):
            value = {True: "true", False: "false"}.get(value, "unknown")
        if isinstance(bound.field.widget, forms.CheckboxInput):
            if value:
                data[bound.html_name] = "on"
            continue
        if isinstance(value, list | tuple):
            data[bound.html_name] = [str(v) for v in value]
        else:
            data[bound.html_name] = "" if value is None else str(value)
    return data


def admin_form_as_posted(response, **changes) -> dict:
    """The POST body of the admin form in `response` (a GET of an add or change page), with
    `changes` (field name → posted value) applied."""
    data = _form_values(response.context["adminform"].form)
    for inline in response.context.get("inline_admin_formsets", []):
        formset = inline.formset
        data.update(_form_values(formset.management_form))
        for form in formset.forms:
            data.update(_form_values(form))
    data.update(changes)
    return data
