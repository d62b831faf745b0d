"""OneStopQA (`onestop_qa.json`): `{"data": [{title, paragraphs: [{Ele|Int|Adv: {context,
a_spans, d_spans}, qas: [{question, answers, references}]}]}]}`.

One multiple-choice item per question × text level (30 articles, 162 paragraphs, 486 questions
→ 1,458 items). Answers stay in STARC role order A–D (A correct, B misreading of the critical
span, C refers to the distractor span, D unsupported); gold is {"choice": "A"}.

Spans: the file's `a_spans` (critical) and `d_spans` (distractor) are *word* spans — indices of
whitespace-separated tokens of that level's paragraph, end inclusive; a few are discontinuous
(four numbers: two segments). They are stored as character spans `[start, end)` of the paragraph
in content.critical_span / distractor_span (covering all segments); the exact character segments
and the original word spans are kept in item.metadata.char_segments / word_spans.

External ids follow the in-lab experiment files (`in_lab_qa.tsv`):
`os<article>_<paragraph>_<question>_<level>`, paragraph and question counted from 1, article
numbered as in the experiments' README (the 20 articles used there are 1–20, listed below by
title); the 10 other articles get 21–30 in the order of the file. The design unit of the STARC
Latin square (Item.design_unit) is the paragraph, `os<article>_<paragraph>`: its three questions
at its three levels are nine conditions of one unit, and a participant gets one of them.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from .base import ImportFormatError, ItemRecord, expect, load_json, validate_record

KIND = "mc"
LEVELS = ("Ele", "Int", "Adv")

# Article numbers of berzak/onestop-qa human_experiments/README.md (in-lab and Prolific runs).
IN_LAB_ARTICLE_NUMBERS = {
    "Google Introduces its Driverless Car": 1,
    "Love Hormone Helps Autistic Children Bond with Others": 2,
    "Spain's Robin Hood": 3,
    "Will Drones Soon Be Delivering Packages to Your Doorstep": 4,
    "Philip Pullman Illegal Downloading Is Moral Squalor": 5,
    "Swarthy Blue-Eyed Caveman Revealed": 6,
    "Inky the Octopus Escapes from Aquarium": 7,
    "Autumn-Born Children Better at Sports Says Study": 8,
    "Why You Should Start Work at 10AM": 9,
    "The Greek Island Where Time Is Running Out": 10,
    "The Secrets of the Mystery Shopper": 11,
    "On the Trail of the Wolf": 12,
    "Why is Sweden Closing its Prisons?": 13,
    "Four New Elements Find a Place on Periodic Table": 14,
    "A New Form of Lie Detector Test": 15,
    "Vienna Named World's Top City for Quality of Life": 16,
    "Wealth Therapy for the Rich": 17,
    "Rwandan Women Whip up Popular Ice Cream Business": 18,
    "Bolivians Demand the Right to Chew Coca Leaves": 19,
    "Insects Could be the Planets Next Food Source": 20,
}


def _title_key(title: str) -> str:
    return re.sub(r"[^a-z0-9]", "", title.lower())


_NUMBER_BY_KEY = {_title_key(title): number for title, number in IN_LAB_ARTICLE_NUMBERS.items()}


def article_numbers(titles: list[str]) -> list[int]:
    """In-lab numbers for known titles; the others 21, 22, ... in file order."""
    next_number = max(IN_LAB_ARTICLE_NUMBERS.values()) + 1
    numbers = []
    for title in titles:
        number = _NUMBER_BY_KEY.get(_title_key(title))
        if number is None:
            number, next_number = next_number, next_number + 1
        numbers.append(number)
    return numbers


def word_span_to_chars(text: str, span: Any) -> list[list[int]]:
    """Word span(s) → character segments `[[start, end), ...]`.

    A span is [first word, last word] (inclusive, whitespace tokens); 60 of the 2,916 spans in
    OneStopQA are discontinuous and list two segments: [first1, last1, first2, last2].
    """
    if not (
        isinstance(span, list)
        and span
        and len(span) % 2 == 0
        and all(isinstance(v, int) and not isinstance(v, bool) for v in span)
    ):
        raise ValueError("must be [first word, last word] (or several such pairs)")
    words = [match.span() for match in re.finditer(r"\S+", text)]
    segments = []
    for first, last in zip(span[::2], span[1::2], strict=True):
        if not 0 <= first <= last < len(words):
            raise ValueError(f"{span} is outside the paragraph's {len(words)} words")
        segments.append([words[first][0], words[last][1]])
    return segments


def parse(path: Path, *, kind: str = KIND, split: str | None = None) -> list[ItemRecord]:
    path = Path(path)
    document = load_json(path)
    expect(document, dict, path=path, record=None, field="(top level)",
           what='an object {"data": [...]}')
    articles = expect(document.get("data"), list, path=path, record=None, field="data",
                      what="a list of articles")
    for index, article in enumerate(articles):
        expect(article, dict, path=path, record=f"article {index + 1}", field="(article)",
               what="an object")
        expect(article.get("title"), str, path=path, record=f"article {index + 1}",
               field="title", what="a string")
    numbers = article_numbers([article["title"] for article in articles])
    records = []
    for article, number in zip(articles, numbers, strict=True):
        paragraphs = expect(article.get("paragraphs"), list, path=path,
                            record=f"article {number}", field="paragraphs", what="a list")
        for p_index, paragraph in enumerate(paragraphs, start=1):
            label = f"os{number}_{p_index}"
            expect(paragraph, dict, path=path, record=label, field="(paragraph)",
                   what="an object")
            questions = expect(paragraph.get("qas"), list, path=path, record=label,
                               field="qas", what="a list")
            for q_index, qa in enumerate(questions, start=1):
                for level in LEVELS:
                    external_id = f"os{number}_{p_index}_{q_index}_{level}"
                    records.append(_item(path, article["title"], paragraph, qa, q_index - 1,
                                         level, external_id, number, p_index, q_index, split))
    return records


def _item(path, title, paragraph, qa, q_pos, level, external_id, number, p_index, q_index,
          split) -> ItemRecord:
    level_data = paragraph.get(level)
    expect(level_data, dict, path=path, record=external_id, field=level, what="an object")
    context = expect(level_data.get("context"), str, path=path, record=external_id,
                     field=f"{level}.context", what="a string")
    expect(qa, dict, path=path, record=external_id, field=f"qas[{q_pos}]", what="an object")
    spans: dict[str, list[int] | None] = {}
    word_spans = {}
    segments = {}
    for source, target in (("a_spans", "critical"), ("d_spans", "distractor")):
        all_spans = expect(level_data.get(source), list, path=path, record=external_id,
                           field=f"{level}.{source}", what="a list")
        if q_pos >= len(all_spans):
            raise ImportFormatError(path, f"has no span for question {q_index}",
                                    record=external_id, field=f"{level}.{source}")
        try:
            segments[target] = word_span_to_chars(context, all_spans[q_pos])
        except ValueError as exc:
            raise ImportFormatError(path, str(exc), record=external_id,
                                    field=f"{level}.{source}[{q_pos}]") from None
        word_spans[target] = all_spans[q_pos]
        # content holds one [start, end) span: the whole stretch from the first segment's start
        # to the last one's end; the exact segments stay in metadata.char_segments.
        spans[target] = [segments[target][0][0], segments[target][-1][1]]
    record = ItemRecord(
        external_id=external_id,
        kind=KIND,
        content={
            "paragraph": context,
            "question": qa.get("question"),
            "answers": qa.get("answers"),
            "critical_span": spans["critical"],
            "distractor_span": spans["distractor"],
        },
        dataset="onestopqa",
        split=split or "",
        text_level=level,
        group_key=f"os{number}_{p_index}_{level}",
        design_unit=f"os{number}_{p_index}",  # the paragraph, at any level: the STARC unit
        gold={"choice": "A"},
        metadata={
            "article": number,
            "article_title": title,
            "paragraph": p_index,
            "question": q_index,
            "references": qa.get("references"),
            "word_spans": word_spans,
            "char_segments": segments,
        },
    )
    return validate_record(record, path=path, index=external_id)
