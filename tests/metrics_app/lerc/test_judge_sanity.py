"""The served judge on real data: the packaged MiniLM trained briefly on EVOUNA judgments, with
its calibrated judge fitted on other EVOUNA questions, must put an empty answer and answers that
contradict the reference at the bottom, and answers equal to a reference at the top.

Small on purpose (a few hundred judgments, one epoch, about a minute on 2 cores): the sanity
rules must hold for any promoted model, including the first small one a new project trains.
"""
from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from metrics_app.lerc.config import TrainConfig
from metrics_app.lerc.data import LercExample
from metrics_app.lerc.inference import LercScorer
from metrics_app.lerc.training import train
from tests.support.paths import shared_data_path
from tests.support.shared_artifacts import REPO, built_once, content_key

DATA = shared_data_path() / "open_qa_judgments"

PROBES = [
    # (question, references, right answer, contradicting answer)
    ("who wrote the novel war and peace", ("Leo Tolstoy",),
     "War and Peace was written by the Russian author Leo Tolstoy.",
     "War and Peace was written by Fyodor Dostoevsky."),
    ("how many players are on a soccer team on the field", ("11", "eleven"),
     "Each team has 11 players on the field.", "Each team has 9 players on the field."),
    ("what is the capital city of australia", ("Canberra",),
     "The capital of Australia is Canberra.", "The capital of Australia is Sydney."),
    ("when did the first man land on the moon", ("1969", "July 20, 1969"),
     "Neil Armstrong landed on the Moon on July 20, 1969.",
     "The first Moon landing took place in 1972."),
]


def _examples() -> tuple[list[LercExample], list[LercExample]]:
    from annotation.importers import evouna

    records = [r for r in evouna.parse(DATA / "evouna_nq.json")
               if not r.excluded and r.judgments]
    train_set, val_set = [], []
    for record in records:
        content = record.content
        example = LercExample(question=content["question"],
                              references=tuple(content["references"]),
                              candidate=content["candidate"],
                              score=float(record.judgments[0].score), id=record.external_id,
                              group=content["question"])
        bucket = int(hashlib.sha256(content["question"].encode()).hexdigest()[:4], 16) % 10
        (val_set if bucket == 0 else train_set).append(example)
    return train_set[:480], val_set[:400]


@pytest.fixture(scope="module")
def judge() -> LercScorer:
    """Trained once per suite run: the two concurrent passes (SQLite, PostgreSQL) share it, as
    training never touches the database (tests/support/shared_artifacts.py)."""
    import torch
    import transformers

    def build(folder: Path) -> None:
        torch.set_num_threads(2)
        train_set, val_set = _examples()
        cfg = TrainConfig(output_dir=str(folder), epochs=1, learning_rate=3e-5,
                          max_length=128, device="cpu", seed=0)
        result = train(cfg, train_set, val_set)
        model_dir = Path(result["model_dir"])
        for leftover in folder.iterdir():  # epoch checkpoints: only the final model is read
            if leftover != model_dir and leftover.is_dir():
                shutil.rmtree(leftover)
        (folder / "result.json").write_text(json.dumps(
            {"folds": result["calibration"]["folds"],
             "model_dir": str(model_dir.relative_to(folder))}))

    # Everything the model is built from: the LERC code and what it imports from the project,
    # the parser that reads the examples, this file and the data.
    sources = [REPO / "metrics_app" / "lerc", REPO / "metrics_app" / "domain",
               REPO / "annotation" / "domain", REPO / "annotation" / "importers",
               Path(__file__), DATA / "evouna_nq.json"]
    key = content_key(sources,
                      extra=f"torch {torch.__version__} transformers {transformers.__version__}")
    folder = built_once("judge-sanity", key, build)
    result = json.loads((folder / "result.json").read_text())
    assert result["folds"] == 5
    return LercScorer(str(folder / result["model_dir"]), device="cpu")


def test_empty_and_exact_answers_sit_at_the_ends_of_the_scale(judge):
    probes = [LercExample(question=q, references=refs, candidate=candidate)
              for q, refs, _right, _wrong in PROBES for candidate in ("", " ", refs[0])]
    details = judge.score_details(probes)
    for empty, blank, exact in zip(details[0::3], details[1::3], details[2::3], strict=True):
        assert empty["score"] == blank["score"] == 1.0 and empty["probability"] == 0.0
        assert exact["score"] == 5.0 and exact["probability"] == 1.0


def test_contradicting_answers_score_below_the_right_ones_and_are_judged_wrong(judge):
    right = [LercExample(question=q, references=refs, candidate=r) for q, refs, r, _ in PROBES]
    wrong = [LercExample(question=q, references=refs, candidate=w) for q, refs, _, w in PROBES]
    right_details, wrong_details = judge.score_details(right), judge.score_details(wrong)
    for good, bad in zip(right_details, wrong_details, strict=True):
        assert 0.0 <= bad["probability"] < good["probability"] <= 1.0
        assert bad["score"] < 3.0 <= good["score"]
