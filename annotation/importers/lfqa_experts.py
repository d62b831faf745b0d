"""Expert A/B judgments of long-form answers (Xu et al. 2023): a folder of JSON files, one per
expert, named `<Domain>_<expert>_....json`, each a list of
`{q_id, question_text, answer1, answer2, answer1_label, BetterAnswer, DifficultToChoose,
comments, annotator, lead_time, id, annotation_id, created_at}`.

Items are deduplicated across experts by (question, answer1, answer2): 260 judgments of 140
answer pairs. (`q_id` cannot be the key: in the History files several questions share one.)

`answer1_label` = setting + what answer 1 is + upvotes, e.g. `HMH[9]`, `HHh[15][2]`:
- `HM`: human vs model (GPT-3 text-davinci-002). `HMH[n]`: answer 1 is the human answer
  (n upvotes), answer 2 the model's; `HMM[n]`: answer 1 is the model's, answer 2 the human
  answer with n upvotes.
- `HH`: two human answers. `HHH[x][y]`: answer 1 is the higher-voted one; `HHh[x][y]`: answer 1
  is the lower-voted one. The brackets give the upvotes of the higher-voted answer, then of the
  lower-voted one, in both cases. (Read this way, the labels reproduce the preference rates of
  the paper's Table 2 per domain; in 3 of the 70 H/H pairs the recorded counts contradict the
  letter, e.g. `HHh[5][10]` — the letter is kept, the counts are stored as recorded.)
Answer A of the item is answer1, B is answer2; each answer's `system` is `human-higher-voted`,
`human-lower-voted` or `text-davinci-002` (the leaderboard ranks them). Judgments: choice A/B from BetterAnswer,
difficult from DifficultToChoose, justification = comments, time_spent_ms = lead_time × 1000,
worker `lfqa-expert-<annotator>`. `<br />` in the texts becomes a line break.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from annotation.domain.item_content import answer_system, text_key
from annotation.domain.json_values import is_finite_number
from core.vocabulary import AB_CHOICES

from .base import (
    MAX_TIME_SPENT_MS,
    ImportFormatError,
    ItemRecord,
    JudgmentRecord,
    expect,
    load_json,
    validate_record,
)

KIND = "ab"
LABEL_PATTERN = re.compile(r"^(HH|HM)([HhM])((?:\[-?\d+\])+)$")
MODEL_NAME = "text-davinci-002"
MAX_LEAD_TIME_SECONDS = MAX_TIME_SPENT_MS // 1000  # lead_time × 1000 is the time_spent_ms


def parse_label(label: str) -> dict[str, Any]:
    """`answer1_label` → setting, answer_a/answer_b kind+upvotes, and which answer is which."""
    match = LABEL_PATTERN.match(label.strip()) if isinstance(label, str) else None
    if not match:
        raise ValueError(f"{label!r} is not like HMH[9], HMM[9], HHH[9][2] or HHh[9][2]")
    setting, role, brackets = match.groups()
    votes = [int(v) for v in re.findall(r"-?\d+", brackets)]
    if setting == "HM":
        if role not in "HM" or len(votes) != 1:
            raise ValueError(f"{label!r}: HM labels are HMH[n] or HMM[n]")
        human = {"kind": "human", "upvotes": votes[0]}
        model = {"kind": "model", "upvotes": None}
        a, b = (human, model) if role == "H" else (model, human)
        return {"setting": "HM", "answer_a": a, "answer_b": b,
                "model_answer": "B" if role == "H" else "A"}
    if role not in "Hh" or len(votes) != 2:
        raise ValueError(f"{label!r}: HH labels are HHH[x][y] or HHh[x][y]")
    higher = {"kind": "human", "upvotes": votes[0]}
    lower = {"kind": "human", "upvotes": votes[1]}
    a, b = (higher, lower) if role == "H" else (lower, higher)
    return {"setting": "HH", "answer_a": a, "answer_b": b,
            "higher_voted": "A" if role == "H" else "B"}


def _text(value: str) -> str:
    return re.sub(r"<br\s*/?>", "\n", value).strip()


def _yes_no(value: Any) -> bool | None:
    if value is None:
        return None
    normalized = str(value).strip().rstrip(".").lower()
    if normalized in ("yes", "true"):
        return True
    if normalized in ("no", "false"):
        return False
    raise ValueError(f"{value!r} is not Yes./No.")


def parse(path: Path, *, kind: str = KIND, split: str | None = None) -> list[ItemRecord]:
    path = Path(path)
    if not path.exists():
        raise ImportFormatError(path, "folder not found")
    files = sorted(path.glob("*.json")) if path.is_dir() else [path]
    if not files:
        raise ImportFormatError(path, "holds no .json files")
    items: dict[tuple, ItemRecord] = {}
    for file in files:
        domain = file.stem.split("_")[0]
        document = load_json(file)
        expect(document, list, path=file, record=None, field="(top level)", what="a list")
        for index, raw in enumerate(document):
            _add(items, file, domain, index, raw, split)
    records = list(items.values())
    for record in records:
        validate_record(record, path=path, index=record.external_id)
    return records


def _add(items: dict, file: Path, domain: str, index: int, raw: Any, split: str | None) -> None:
    label = f"{index} (id {raw.get('id')})" if isinstance(raw, dict) else index
    expect(raw, dict, path=file, record=label, field="(record)", what="an object")

    def text(name: str) -> str:
        if name not in raw:
            raise ImportFormatError(file, "is missing", record=label, field=name)
        return expect(raw[name], str, path=file, record=label, field=name, what="a string")

    question, answer1, answer2 = text("question_text"), text("answer1"), text("answer2")
    try:
        parsed = parse_label(raw.get("answer1_label"))
    except ValueError as exc:
        raise ImportFormatError(file, str(exc), record=label, field="answer1_label") from None
    better = text("BetterAnswer").strip()
    if better not in ("Answer A", "Answer B"):
        raise ImportFormatError(file, f"{better!r} is not 'Answer A' or 'Answer B'",
                                record=label, field="BetterAnswer")
    try:
        difficult = _yes_no(raw.get("DifficultToChoose"))
    except ValueError as exc:
        raise ImportFormatError(file, str(exc), record=label, field="DifficultToChoose") from None
    lead_time = raw.get("lead_time")
    if lead_time is not None:
        expect(lead_time, (int, float), path=file, record=label, field="lead_time",
               what="a number of seconds")
        # Stored as time_spent_ms: a whole number of milliseconds a database column holds.
        if not is_finite_number(lead_time) or not 0 <= lead_time <= MAX_LEAD_TIME_SECONDS:
            raise ImportFormatError(
                file, f"must be a number of seconds from 0 to {MAX_LEAD_TIME_SECONDS:g}, got "
                      f"{lead_time!r}", record=label, field="lead_time")
    annotator = raw.get("annotator")
    if annotator is None:
        annotator = file.stem.split("_")[1] if "_" in file.stem else file.stem
    judgment = _judgment(raw, file, label, annotator=annotator, better=better,
                         difficult=difficult, lead_time=lead_time)
    key = (question, answer1, answer2)
    record = items.get(key)
    if record is None:
        items[key] = record = _item(raw, key, parsed=parsed, domain=domain, split=split)
    elif record.metadata["answer1_label"] != raw["answer1_label"]:
        raise ImportFormatError(
            file, f"differs from {record.metadata['answer1_label']!r} given for the same pair",
            record=label, field="answer1_label",
        )
    earlier = next((j for j in record.judgments if j.worker == judgment.worker), None)
    if earlier is not None:
        # Named by file: a folder holding a file twice (a browser's "Biology_12_Common20
        # (1).json") gives every pair of it a second judgment by the same expert.
        where = (f"in this file (id {earlier.extra.get('id')})"
                 if earlier.extra["file"] == file.name else
                 f"in {earlier.extra['file']!r} (id {earlier.extra.get('id')}): is one file a "
                 "copy of the other?")
        raise ImportFormatError(file, f"expert {annotator!r} judged this pair already {where}",
                                record=label, field="annotator")
    record.judgments.append(judgment)


def _judgment(raw: dict, file: Path, label, *, annotator: str, better: str,
              difficult: bool | None, lead_time) -> JudgmentRecord:
    """One expert's preference as a judgment of the pair."""
    return JudgmentRecord(
        worker=f"lfqa-expert-{annotator}",
        choice=better[-1],
        difficult=difficult,
        justification=(expect(raw.get("comments") or "", str, path=file, record=label,
                              field="comments", what="a string")).strip(),
        time_spent_ms=None if lead_time is None else round(lead_time * 1000),
        extra={
            key: raw[key] for key in ("id", "annotation_id", "created_at") if key in raw
        } | {"file": file.name},
    )


def _item(raw: dict, key: tuple[str, str, str], *, parsed: dict, domain: str,
          split: str | None) -> ItemRecord:
    """The A/B item of a (question, answer 1, answer 2) pair, first seen in `raw`."""
    question, answer1, answer2 = key
    setting = parsed["setting"]
    metadata = {"q_id": raw.get("q_id"), "answer1_label": raw["answer1_label"]}
    metadata.update({k: parsed[k] for k in ("higher_voted", "model_answer") if k in parsed})
    source = "human" if setting == "HH" else MODEL_NAME
    content = {
        "question": _text(question),
        "evidence": [],
        "answer_a": {"text": _text(answer1), **parsed["answer_a"]},
        "answer_b": {"text": _text(answer2), **parsed["answer_b"]},
        "setting": setting,
    }
    for side in AB_CHOICES:
        # The system each answer comes from, for the leaderboard.
        content[f"answer_{side.lower()}"]["system"] = answer_system(
            content, side, source=source, metadata=metadata)
    return ItemRecord(
        external_id=f"lfqa-{domain.lower()}-{text_key(chr(31).join(key))[:12]}",
        kind=KIND,
        content=content,
        dataset="lfqa",
        source=source,
        split=split or "",
        domain=domain,
        metadata=metadata,
    )
