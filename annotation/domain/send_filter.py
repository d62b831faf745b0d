"""What is never sent out to annotators (MOCHA): a Likert candidate that matches a reference
exactly after normalization, or a number-vs-number pair on DROP (`core.text_match`'s
`send_filter_reason`). Such an item is stored excluded, the rule's reason as its
`exclusion_reason`, by every door that writes an item's text (the importers' service, the
items API, the item admin; the demo data through the importers' service), so every door that
releases items (stage lists, HIT plans, picking, qualification, previews) leaves it out by the
one `excluded` flag, and every report and export says why beside it. An item imported with
judgments is a published study's measurement and is kept as the file gives it (EVOUNA judged
exact matches; leaving them out would bias what exact match is measured against)."""
from __future__ import annotations

from typing import Any

from core.text_match import SEND_FILTER_PREFIX, send_filter_reason
from core.vocabulary import TaskKind


def item_send_filter(*, kind: str, content: Any, dataset: str | None, excluded: bool,
                     exclusion_reason: str, gold_check: bool = False) -> tuple[bool, str]:
    """(excluded, exclusion_reason) the item is stored with: the rule's when it filters the
    item; none when the rule excluded it before and no longer does (its candidate or
    references were corrected); else as given (a researcher's own exclusion stays).

    A gold/attention check (`gold_check`: "a perfect answer scores 5" is a common one) is the
    researcher's test of the workers, chosen for its known answer, not a candidate to be
    judged: it is sent as the researcher chose. (An answer key alone says nothing of the
    kind: the MOCHA importer stores the published mean score as every item's gold.)"""
    reason = ""
    if kind == TaskKind.LIKERT and isinstance(content, dict) and not gold_check:
        reason = send_filter_reason(dataset=dataset, candidate=content.get("candidate"),
                                    references=content.get("references"))
    if reason:
        return True, reason
    if (exclusion_reason or "").startswith(SEND_FILTER_PREFIX):
        return False, ""
    return excluded, exclusion_reason
