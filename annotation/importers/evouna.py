"""EVOUNA open-QA judgments (Wang et al. 2023): `evouna_nq.json` / `evouna_tq.json`, a list of
`{question, golden_answer, answer_<system>, judge_<system>, ..., improper}` for the systems
fid, gpt35, chatgpt, gpt4 and newbing.

One Likert item per (question, system) with an answer: external id
`<dataset>/<question index>/<system>`, dataset `evouna_nq` / `evouna_tq` (from the file name),
source = system, references = golden_answer split on "/" (empty parts dropped), candidate = the
answer. Each boolean judge_<system> becomes one judgment by the synthetic worker `evouna-judge`
on the 1–5 scale, true → 5 and false → 1, with extra {"binary": true|false}.

Questions marked `improper` (unusable) give items with metadata {"improper": true},
excluded=True and no judgments. Answers that are null get no item unless they were judged (one
NQ answer), then the candidate is empty and metadata.missing_answer is true. Judgments that are
null or "nan" are not imported.
"""
from __future__ import annotations

from pathlib import Path

from .base import (
    ImportFormatError,
    ItemRecord,
    JudgmentRecord,
    Records,
    expect,
    left_out_note,
    load_json,
    validate_record,
)

KIND = "likert"
JUDGE = "evouna-judge"
SCORE_TRUE, SCORE_FALSE = 5, 1


def dataset_name(path: Path) -> str:
    stem = path.stem.lower()
    return stem if stem.startswith("evouna") else f"evouna_{stem}"


def parse(path: Path, *, kind: str = KIND, split: str | None = None) -> list[ItemRecord]:
    path = Path(path)
    document = load_json(path)
    expect(document, list, path=path, record=None, field="(top level)",
           what="a list of questions")
    dataset = dataset_name(path)
    records = []
    unusable_questions = unjudged_missing = improper_judgments = 0
    for index, entry in enumerate(document):
        label = f"{index}"
        expect(entry, dict, path=path, record=label, field="(question)", what="an object")
        question = entry.get("question")
        expect(question, str, path=path, record=label, field="question", what="a string")
        improper = entry.get("improper", False)
        expect(improper, bool, path=path, record=label, field="improper", what="true or false")
        golden = entry.get("golden_answer")
        if golden is None and improper:
            unusable_questions += 1
            continue  # an unusable question without a reference cannot become an item
        expect(golden, str, path=path, record=label, field="golden_answer", what="a string")
        references = [part.strip() for part in golden.split("/") if part.strip()]
        systems = [key[len("answer_"):] for key in entry if key.startswith("answer_")]
        for key in entry:
            # A judgment without its answer would vanish with nothing said.
            if key.startswith("judge_") and f"answer_{key[len('judge_'):]}" not in entry:
                raise ImportFormatError(path, f"judges an answer the question does not have "
                                              f"(no answer_{key[len('judge_'):]})",
                                        record=label, field=key)
        for system in systems:
            answer = entry[f"answer_{system}"]
            judge = entry.get(f"judge_{system}")
            if answer is not None:
                expect(answer, str, path=path, record=label, field=f"answer_{system}",
                       what="a string or null")
            if judge is not None and not isinstance(judge, bool) and judge != "nan":
                raise ImportFormatError(path, f"must be true, false or null, got {judge!r}",
                                        record=label, field=f"judge_{system}")
            judged = isinstance(judge, bool)
            if answer is None and not judged:
                unjudged_missing += 1
                continue
            metadata = {"question_index": index, "improper": improper}
            if answer is None:
                metadata["missing_answer"] = True
            judgments = []
            improper_judgments += judged and improper
            if judged and not improper:
                judgments.append(JudgmentRecord(
                    worker=JUDGE, score=SCORE_TRUE if judge else SCORE_FALSE,
                    extra={"binary": judge},
                ))
            record = ItemRecord(
                external_id=f"{dataset}/{index}/{system}",
                kind=KIND,
                content={
                    "passage": "",
                    "question": question,
                    "references": references,
                    "candidate": answer or "",
                },
                dataset=dataset,
                source=system,
                split=split or "",
                excluded=improper,
                exclusion_reason="improper question (EVOUNA)" if improper else "",
                metadata=metadata,
                judgments=judgments,
            )
            records.append(validate_record(record, path=path, index=f"{label}/{system}"))
    return Records(records, left_out=[
        left_out_note(improper_judgments, "true/false judgment(s) of answers to improper "
                      "questions: their items are imported excluded, without judgments"),
        left_out_note(unjudged_missing, "answer(s) that are null and were not judged: no item"),
        left_out_note(unusable_questions, "improper question(s) without a golden answer: no "
                      "items"),
    ])
