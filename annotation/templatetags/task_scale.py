"""The Likert score scale of a task page, rendered once per page and copied for each item.

The scale (one radio button per label) is the same for every item of a page but its ids and
names carry the item id; rendered through the template engine for each item it was half of a
page's rendering time. `likert_scale` renders `_likert_scale.html` once per page with a
placeholder for the item id and substitutes each item's id. The placeholder contains `<`, which
autoescaping turns into `&lt;` in every label, so it can only come from the fragment's own
markup; the id put in its place is an integer.
"""
from __future__ import annotations

from django import template
from django.template.loader import render_to_string
from django.utils.safestring import SafeString, mark_safe

register = template.Library()

ITEM_PLACEHOLDER = mark_safe("<qaj-item-id>")
_RENDERED_KEY = "qaj-likert-scale"


@register.simple_tag(takes_context=True)
def likert_scale(context, item_id) -> SafeString:
    fragment = context.render_context.get(_RENDERED_KEY)
    if fragment is None:
        fragment = render_to_string("annotation/task/_likert_scale.html",
                                    {"labels": context.get("labels") or [],
                                     "item_id": ITEM_PLACEHOLDER})
        context.render_context[_RENDERED_KEY] = fragment
    return mark_safe(fragment.replace(ITEM_PLACEHOLDER, str(int(item_id))))
