"""A tiny randomly initialised BERT config, fast training options (tests only) and a toy data
set whose gold score is a function of the candidate/reference relation."""
from __future__ import annotations

from annotation.models import TaskKind
from metrics_app.lerc.data import LercExample
from testing.factories import make_item, make_judgment, make_project, make_stage, make_worker

TINY_BERT = {
    "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
    "intermediate_size": 64, "max_position_embeddings": 128,
}


# Memorise fast: high learning rate, no dropout, no warmup (tests only; never for real data).
TINY_TRAIN_OPTIONS = {
    "backbone_config": TINY_BERT, "batch_size": 4, "epochs": 20, "learning_rate": 1e-3,
    "max_length": 64, "warmup_ratio": 0.0, "dropout": 0.0, "progress_every": 1,
    # The same numbers on machines with and without native bf16 (test_precision.py
    # asks for bf16 itself): fp32 training steps and scoring.
    "bf16": False, "scoring_precision": "fp32",
    # A randomly initialised tiny BERT has no pre-trained word embeddings to keep: they learn
    # (test_training.py checks the frozen default on its own).
    "freeze_word_embeddings": False,
}


COLORS = ["red", "blue", "green", "yellow", "black", "white", "purple", "orange"]


def toy_examples(n: int = 24, offset: int = 0) -> list[LercExample]:
    """Exact copy of the reference → 5, hedged → 3, another colour → 1."""
    examples = []
    for i in range(offset, offset + n):
        ref = COLORS[i % 8]
        kind = i % 3
        candidate = [ref, f"maybe {ref} or {COLORS[(i + 1) % 8]}", COLORS[(i + 3) % 8]][kind]
        examples.append(LercExample(
            question=f"What color is thing {i}?", references=(ref,), candidate=candidate,
            passage=f"Thing {i} is {ref}.", score=[5.0, 3.0, 1.0][kind], id=str(i),
        ))
    return examples


def likert_project_from_toy(n: int = 24, *, dev_copies: bool = True):
    """Train items from the toy fixture; dev items repeat their contents (the tiny model only
    has to memorise), so a trained version has a high validation Pearson."""
    project = make_project(kind=TaskKind.LIKERT)
    stage = make_stage(project)
    worker = make_worker()
    for split in ("train", "dev") if dev_copies else ("train",):
        for example in toy_examples(n):
            item = make_item(project, split=split, dataset="toy", content={
                "passage": example.passage, "question": example.question,
                "references": list(example.references), "candidate": example.candidate,
            })
            make_judgment(item=item, stage=stage, worker=worker, score=example.score)
    return project, stage
