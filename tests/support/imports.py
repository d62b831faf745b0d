"""Helpers shared by importer and exporter tests."""
from __future__ import annotations

import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from annotation.models import Item, Judgment, Project, Stage, Worker


def run_import(*args: str) -> str:
    out = StringIO()
    call_command("import_data", *args, "--no-progress", stdout=out)
    return out.getvalue()


def run_export(*args: str) -> str:
    out = StringIO()
    call_command("export_data", *args, "--no-progress", stdout=out)
    return out.getvalue()


def db_state() -> dict[str, int]:
    """Row counts of everything an import may write."""
    return {
        "projects": Project.objects.count(),
        "items": Item.objects.count(),
        "judgments": Judgment.objects.count(),
        "workers": Worker.objects.count(),
        "stages": Stage.objects.count(),
    }


def write_jsonl(path: Path, rows: list) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


LIKERT_ROW = {
    "external_id": "q1-c1",
    "dataset": "toy",
    "split": "dev",
    "content": {
        "passage": "The cat sat on the mat while the dog slept by the fire.",
        "question": "Where did the cat sit?",
        "references": ["on the mat"],
        "candidate": "on a mat",
    },
    "gold": {"score": 4.5},
    "judgments": [{"worker": "w1", "score": 4}, {"worker": "w2", "score": 5,
                                                 "time_spent_ms": 8200}],
}
AB_ROW = {
    "external_id": "ab-1",
    "domain": "Physics",
    "content": {
        "question": "Why is the sky blue?",
        "evidence": [],
        "answer_a": {"text": "Rayleigh scattering of short wavelengths.", "kind": "human",
                     "upvotes": 12},
        "answer_b": {"text": "It reflects the sea.", "kind": "model", "upvotes": None},
        "setting": "HM",
    },
    "judgments": [{"worker": "e1", "choice": "A", "difficult": False,
                   "justification": "A names the actual mechanism.", "aspects": ["factuality"],
                   "presented_order": ["B", "A"], "time_spent_ms": 61000}],
}
MC_ROW = {
    "external_id": "mc-1",
    "text_level": "Ele",
    "content": {
        "paragraph": "Bees make honey from nectar. They store it in wax cells.",
        "question": "What do bees make honey from?",
        "answers": ["Nectar", "Wax cells", "Stored honey", "Pollen from trees"],
        "critical_span": [0, 28],
        "distractor_span": [29, 56],
    },
    "gold": {"choice": "A"},
    "judgments": [{"worker": "p1", "choice": "B", "presented_order": ["C", "A", "D", "B"],
                   "extra": {"is_correct": False}}],
}


def import_fails(*args: str, match: str) -> str:
    before = db_state()
    with pytest.raises(CommandError, match=match) as info:
        run_import(*args)
    assert db_state() == before, "a failed import must leave the database unchanged"
    return str(info.value)
