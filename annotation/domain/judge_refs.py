"""The form of a judge reference (pure): `metric:NAME` (a registered metric's stored scores),
or `NAME` / `NAME@VERSION` (an LLM or imported judge). Whether the judge exists and has
scores on the project is checked where it is used (metrics_app/judge_selectors.py)."""
from __future__ import annotations

import re

JUDGE_REF = re.compile(r"^(metric:[A-Za-z0-9_-]+|[A-Za-z0-9_-]+(@[^\s@]{1,50})?)$")
JUDGE_REF_HELP = "metric:NAME (e.g. metric:lerc_prob), or an LLM or imported judge's NAME[@VERSION]"


def judge_ref_error(value: str, *, field: str) -> str | None:
    """None when `value` reads as a judge reference (blank is allowed: the default judge),
    else a message naming the field and the accepted forms."""
    if not value or JUDGE_REF.match(value):
        return None
    return f"{field}: {value!r} is not a judge reference ({JUDGE_REF_HELP})"
