"""The calibrated judge stacked on the learned score.

A fine-tuned encoder alone decides "correct / incorrect" no better than token F1 with a tuned
threshold on answers it never saw: its raw score is uncalibrated (its scale drifts with the
training data's share of correct answers) and it misses what simple string facts say reliably
(the reference stated inside a long answer, a different number, a refusal). The calibrator is a
logistic regression over the encoder's raw score and the lexical features of `features.py`
(which read the question too),
fitted on the validation judgments (never on training or test ones), which gives

- `probability`: P(the answer is judged correct), calibrated on held-out judgments;
- `score` on the 1–5 scale: 1 + 4·probability when the gold is binary (correct at ≥ 3 then
  means probability ≥ 0.5), or a ridge regression of the gold onto the same inputs, clipped to
  1–5, when the gold is graded (MOCHA's mean Likert scores).

Whether the encoder's score is an input at all, and the regularisation strength, are chosen by
cross-validation on the validation judgments that holds out one answering system at a time (one
question group when fewer than three systems are named): on EVOUNA a fine-tuned MiniLM helped on
the answer styles it was trained on and hurt on another dataset, and leaving a system out is
how validation data can show that. The same cross-fitted predictions give honest validation
numbers. Saved as plain JSON beside the weights
(`calibration.json`): no pickle, readable in a model card.
"""
from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .features import DEFAULT_FEATURES, FEATURE_NAMES, lexical_features

CALIBRATION_FILE = "calibration.json"
CORRECT_AT = 3.0  # gold ≥ 3 on the 1–5 scale counts as correct (binary judgments are 1 or 5)
C_GRID = (0.01, 0.1, 1.0, 10.0)
MIN_EXAMPLES_PER_CLASS = 5


@dataclass
class Calibrator:
    """A fitted logistic (and, for graded gold, ridge) model over [raw score, *features]."""

    input_names: list[str]
    mean: list[float]
    scale: list[float]
    coef: list[float]
    intercept: float
    raw_fill: float  # the raw score used when the encoder could not score an input
    c: float
    score_map: str = "probability"  # or "linear" (graded gold)
    linear_coef: list[float] = field(default_factory=list)
    linear_intercept: float = 0.0
    threshold: float = 0.5
    fitted_on: dict = field(default_factory=dict)

    # ---- use -------------------------------------------------------------------------------

    def _rows(self, raw: Sequence[float | None], candidates: Sequence[str],
              references: Sequence[Sequence[str]],
              questions: Sequence[str] | None) -> list[list[float]]:
        # A calibrator names the features it was fitted on (older ones fewer); it reads only
        # those, so one fitted without the long-answer features never computes them.
        names = self.input_names[1:]
        rows = []
        for value, candidate, refs, question in zip(raw, candidates, references,
                                                    questions or [""] * len(raw), strict=True):
            row = [self.raw_fill if value is None else float(value),
                   *lexical_features(candidate, refs, question, names)]
            rows.append([(x - m) / s for x, m, s in zip(row, self.mean, self.scale,
                                                        strict=True)])
        return rows

    def probabilities(self, raw, candidates, references, questions=None) -> list[float]:
        return [_sigmoid(self.intercept + sum(w * x for w, x in zip(self.coef, row, strict=True)))
                for row in self._rows(raw, candidates, references, questions)]

    def scores(self, raw, candidates, references, probabilities=None,
               questions=None) -> list[float]:
        """1–5 scores (see the module docstring)."""
        if self.score_map == "linear":
            return [min(5.0, max(1.0, self.linear_intercept + sum(
                w * x for w, x in zip(self.linear_coef, row, strict=True))))
                for row in self._rows(raw, candidates, references, questions)]
        probabilities = probabilities or self.probabilities(raw, candidates, references,
                                                            questions)
        return [1.0 + 4.0 * p for p in probabilities]

    # ---- storage ---------------------------------------------------------------------------

    def save(self, folder: str | Path) -> Path:
        path = Path(folder) / CALIBRATION_FILE
        path.write_text(json.dumps(asdict(self), indent=2, sort_keys=True))
        return path

    @classmethod
    def load(cls, folder: str | Path) -> Calibrator | None:
        path = Path(folder) / CALIBRATION_FILE
        if not path.is_file():
            return None
        return cls(**json.loads(path.read_text()))


def _sigmoid(z: float) -> float:
    if z >= 0:
        return 1.0 / (1.0 + math.exp(-z))
    e = math.exp(z)
    return e / (1.0 + e)


def is_binary(gold: Sequence[float]) -> bool:
    return len({float(g) for g in gold}) <= 2


def fit_calibrator(raw: Sequence[float | None], candidates: Sequence[str],
                   references: Sequence[Sequence[str]], gold: Sequence[float],
                   groups: Sequence[str], *, sources: Sequence[str] | None = None,
                   questions: Sequence[str] | None = None,
                   use_encoder: bool | None = None, seed: int = 0,
                   feature_names: Sequence[str] | None = None
                   ) -> tuple[Calibrator | None, dict]:
    """(calibrator, report), fitted on validation judgments.

    Whether the encoder's score is an input at all is decided here, on the same validation
    judgments (`use_encoder=None`): by cross-validation that holds out one answering system at a
    time when the judgments name at least three (`sources`), else one question group at a time.
    The encoder is kept only if it raises that cross-validated accuracy: a learned score that
    helps on the answer styles it was trained on but not on another system's is what fails on
    new data. The report holds the cross-fitted numbers (`cv_accuracy`, `cv_log_loss`, and
    `cv_probabilities` in input order) and the choice. None (with the reason in the report) when
    the judgments hold too few of either class. `feature_names` (default `DEFAULT_FEATURES`)
    are the lexical inputs, any of `features.FEATURE_NAMES`."""
    import numpy as np

    feature_names = list(DEFAULT_FEATURES if feature_names is None else feature_names)
    unknown = [name for name in feature_names if name not in FEATURE_NAMES]
    if unknown:
        raise ValueError(f"unknown calibrator features: {', '.join(unknown)}")

    labels = np.array([float(g) >= CORRECT_AT for g in gold], dtype=int)
    positives = int(labels.sum())
    negatives = len(labels) - positives
    if min(positives, negatives) < MIN_EXAMPLES_PER_CLASS:
        return None, {"skipped": f"{positives} correct and {negatives} incorrect validation "
                                 f"judgments; at least {MIN_EXAMPLES_PER_CLASS} of each needed"}
    x, mean, scale, raw_fill = _standardized_inputs(raw, candidates, references, questions,
                                                    feature_names)
    by_system = len(set(sources or ())) >= 3
    splits, folds = _group_folds(x, labels, list(sources) if by_system else list(groups))
    options = [False, True] if use_encoder is None else [bool(use_encoder)]
    tried = {with_encoder: _best_c(x, labels, splits, with_encoder) for with_encoder in options}
    accuracy = {w: (None if cv is None else float(((cv >= 0.5) == labels).mean()))
                for w, (_c, cv) in tried.items()}
    with_encoder = options[0]
    if len(options) == 2 and accuracy[True] is not None and accuracy[False] is not None:
        with_encoder = accuracy[True] > accuracy[False]
    c, cv = tried[with_encoder]
    calibrator = _final_calibrator(x, labels, gold, c=c, with_encoder=with_encoder, mean=mean,
                                   scale=scale, raw_fill=raw_fill, feature_names=feature_names)
    report: dict = {"c": c, "folds": folds, "uses_encoder": with_encoder,
                    "cv_held_out": "system" if by_system else "question group",
                    "cv_accuracy_by_inputs": {("lexical+encoder" if w else "lexical"): a
                                              for w, a in accuracy.items()}}
    if cv is not None:
        report.update(cv_accuracy=accuracy[with_encoder], cv_log_loss=_log_loss(cv, labels),
                      cv_probabilities=cv.tolist())
    return calibrator, report


def _standardized_inputs(raw, candidates, references, questions=None, feature_names=None):
    """The encoder's raw score (median for unscored inputs) and the lexical features,
    standardized: (inputs, mean, scale, the fill for a missing raw score)."""
    import numpy as np

    known = [float(v) for v in raw if v is not None]
    raw_fill = float(np.median(known)) if known else 0.0
    matrix = np.array([[raw_fill if v is None else float(v),
                        *lexical_features(c, r, q, feature_names)]
                       for v, c, r, q in zip(raw, candidates, references,
                                             questions or [""] * len(raw), strict=True)])
    mean = matrix.mean(axis=0)
    scale = matrix.std(axis=0)
    scale[scale == 0] = 1.0
    return (matrix - mean) / scale, mean, scale, raw_fill


def _group_folds(x, labels, fold_groups: list[str]) -> tuple[list, int]:
    """Up to five folds that never split a group (a system or a question group)."""
    import numpy as np
    from sklearn.model_selection import GroupKFold

    group_ids = np.unique(np.asarray(fold_groups), return_inverse=True)[1]
    folds = min(5, len(set(group_ids.tolist())))
    splits = list(GroupKFold(n_splits=folds).split(x, labels, group_ids)) if folds >= 2 else []
    return splits, folds


def _columns(x, with_encoder: bool):
    return x if with_encoder else x[:, 1:]


def _cross_fitted(x, labels, splits, c: float, with_encoder: bool):
    """Each example's probability from a model fitted on the other folds."""
    import numpy as np
    from sklearn.linear_model import LogisticRegression

    inputs = _columns(x, with_encoder)
    predictions = np.full(len(labels), labels.mean())
    for fit_rows, predict_rows in splits:
        if len(set(labels[fit_rows].tolist())) < 2:
            continue
        model = LogisticRegression(C=c, max_iter=2000).fit(inputs[fit_rows], labels[fit_rows])
        predictions[predict_rows] = model.predict_proba(inputs[predict_rows])[:, 1]
    return predictions


def _log_loss(p, labels) -> float:
    import numpy as np

    p = np.clip(p, 1e-6, 1 - 1e-6)
    return float(-np.mean(labels * np.log(p) + (1 - labels) * np.log(1 - p)))


def _best_c(x, labels, splits, with_encoder: bool):
    """The regularization strength of `C_GRID` with the lowest cross-fitted log loss, and its
    cross-fitted probabilities (None without folds)."""
    if not splits:
        return 1.0, None
    fitted = {c: _cross_fitted(x, labels, splits, c, with_encoder) for c in C_GRID}
    chosen = min(fitted, key=lambda c: _log_loss(fitted[c], labels))
    return chosen, fitted[chosen]


def _final_calibrator(x, labels, gold, *, c: float, with_encoder: bool, mean, scale,
                      raw_fill: float, feature_names: Sequence[str]) -> Calibrator:
    """The calibrator fitted on every validation judgment with the chosen inputs and strength
    (and, for graded gold, the linear map onto the 1–5 scale)."""
    import numpy as np
    from sklearn.linear_model import LogisticRegression, Ridge

    final = LogisticRegression(C=c, max_iter=2000).fit(_columns(x, with_encoder), labels)
    coef = final.coef_[0].tolist()
    if not with_encoder:
        coef = [0.0, *coef]  # the encoder's score stays an input name, with no weight
    binary = is_binary(gold)
    positives = int(labels.sum())
    calibrator = Calibrator(
        input_names=["raw_score", *feature_names], mean=mean.tolist(), scale=scale.tolist(),
        coef=coef, intercept=float(final.intercept_[0]),
        raw_fill=raw_fill, c=c, score_map="probability" if binary else "linear",
        fitted_on={"examples": len(labels), "correct": positives,
                   "incorrect": len(labels) - positives, "uses_encoder": with_encoder},
    )
    if not binary:
        ridge = Ridge(alpha=1.0).fit(_columns(x, with_encoder), np.asarray(gold, dtype=float))
        calibrator.linear_coef = ([] if with_encoder else [0.0]) + ridge.coef_.tolist()
        calibrator.linear_intercept = float(ridge.intercept_)
    return calibrator
