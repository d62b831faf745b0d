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

How the encoder's score is used, and the regularisation strength, are decided by
cross-validation on the validation judgments that holds out one answering system at a time (one
question group when fewer than three systems are named): on EVOUNA a fine-tuned MiniLM helped on
the answer styles it was trained on and hurt on another dataset, and leaving a system out is
how validation data can show that. The default rule ("average" of
`config.CALIBRATION_ENCODER_RULES`) fits the calibrator with and without the encoder's score and
serves the mean of the two logits, one logistic model with the mean coefficients: on EVOUNA the
two were within a few answers of each other on every run, so choosing one of them was close to
a coin toss. The same cross-fitted predictions give honest validation numbers. Saved as plain
JSON beside the weights (`calibration.json`): no pickle, readable in a model card.
"""
from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from annotation.domain.likert_scale import FIVE_POINT_TOP, likert_correct_at

from .augmentation import Rewrite
from .config import CALIBRATION_ENCODER_RULES, DEFAULT_CALIBRATION_ENCODER
from .features import DEFAULT_FEATURES, FEATURE_NAMES, lexical_features, reads_semantic

CALIBRATION_FILE = "calibration.json"
# Gold ≥ 3 on the 1–5 scale counts as correct (binary judgments are 1 or 5; a project on
# another scale is mapped onto 1-5 before its gold gets here).
CORRECT_AT = likert_correct_at(FIVE_POINT_TOP)
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

    @property
    def reads_semantic(self) -> bool:
        """Whether scoring needs the semantic encoder's values (`semantic.py`)."""
        return reads_semantic(self.input_names[1:])

    @property
    def uses_encoder(self) -> bool:
        """Whether the fine-tuned encoder's score weighs anything (else scoring can skip it)."""
        return bool(self.coef) and self.coef[0] != 0.0

    def _rows(self, raw: Sequence[float | None], candidates: Sequence[str],
              references: Sequence[Sequence[str]],
              questions: Sequence[str] | None,
              semantic: Sequence[Sequence[float]] | None = None) -> list[list[float]]:
        # A calibrator names the features it was fitted on (older ones fewer); it reads only
        # those, so one fitted without the long-answer features never computes them.
        names = self.input_names[1:]
        rows = []
        for value, candidate, refs, question, meaning in zip(
                raw, candidates, references, questions or [""] * len(raw),
                semantic or [None] * len(raw), strict=True):
            row = [self.raw_fill if value is None else float(value),
                   *lexical_features(candidate, refs, question, names, meaning)]
            rows.append([(x - m) / s for x, m, s in zip(row, self.mean, self.scale,
                                                        strict=True)])
        return rows

    def probabilities(self, raw, candidates, references, questions=None,
                      semantic=None) -> list[float]:
        """P(correct) per answer; `semantic` (a `SemanticEncoder.features` row per answer) is
        needed when the calibrator `reads_semantic`."""
        return [_sigmoid(self.intercept + sum(w * x for w, x in zip(self.coef, row, strict=True)))
                for row in self._rows(raw, candidates, references, questions, semantic)]

    def scores(self, raw, candidates, references, probabilities=None,
               questions=None, semantic=None) -> list[float]:
        """1–5 scores (see the module docstring)."""
        if self.score_map == "linear":
            return [min(5.0, max(1.0, self.linear_intercept + sum(
                w * x for w, x in zip(self.linear_coef, row, strict=True))))
                for row in self._rows(raw, candidates, references, questions, semantic)]
        probabilities = probabilities or self.probabilities(raw, candidates, references,
                                                            questions, semantic)
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


@dataclass(frozen=True)
class AugmentedInputs:
    """Rewritten validation answers (`augmentation.rewrites`) and the encoder's raw score of
    each (None where it was not run): each takes its origin's label, question, references and
    cross-validation fold, and weighs `weight` against a judged answer's 1."""

    rewrites: Sequence[Rewrite]
    raw: Sequence[float | None]
    weight: float = 0.5
    semantic: Sequence[Sequence[float]] | None = None  # needed when the inputs read it


@dataclass(frozen=True)
class DistilledInputs:
    """Answers no human judged, labelled by a judge the researcher trusts (its P(correct) ≥ 0.5
    counts as correct): a second teacher, weighed below a human judgment. Each weight of
    `weights` (all below 1) is tried against none at all, and one is kept only when it makes the
    cross-validated verdicts on the *human* judgments both more accurate and better calibrated
    (`_distill_weight`): a judge that does not help the held-out systems gets weight 0.
    `sources` (the answering system) or `groups` (question group) say which cross-validation
    fold an answer belongs to: a held-out system's answers are left out of the fit while it is
    predicted, whoever labelled them."""

    raw: Sequence[float | None]
    candidates: Sequence[str]
    references: Sequence[Sequence[str]]
    questions: Sequence[str]
    probabilities: Sequence[float]
    sources: Sequence[str]
    groups: Sequence[str]
    weights: Sequence[float] = (0.25, 0.5)
    semantic: Sequence[Sequence[float]] | None = None  # needed when the inputs read it


def is_binary(gold: Sequence[float]) -> bool:
    return len({float(g) for g in gold}) <= 2


def fit_calibrator(raw: Sequence[float | None], candidates: Sequence[str],
                   references: Sequence[Sequence[str]], gold: Sequence[float],
                   groups: Sequence[str], *, sources: Sequence[str] | None = None,
                   questions: Sequence[str] | None = None,
                   use_encoder: bool | None = None, seed: int = 0,
                   feature_names: Sequence[str] | None = None,
                   augmented: AugmentedInputs | None = None,
                   semantic: Sequence[Sequence[float]] | None = None,
                   distilled: DistilledInputs | None = None,
                   encoder_rule: str = DEFAULT_CALIBRATION_ENCODER
                   ) -> tuple[Calibrator | None, dict]:
    """(calibrator, report), fitted on validation judgments.

    How the encoder's score is used is decided here, on the same validation judgments
    (`use_encoder=None`), by `encoder_rule` (`config.CALIBRATION_ENCODER_RULES`): "average"
    fits the calibrator with and without it and serves the mean of their logits; "choose"
    keeps the one with the higher accuracy under cross-validation that holds out one answering
    system at a time when the judgments name at least three (`sources`), else one question
    group at a time (a learned score that helps on the answer styles it was trained on but not
    on another system's is what fails on new data). `use_encoder=True` or `False` fits that
    one alone. The report holds the cross-fitted numbers (`cv_accuracy`, `cv_log_loss`, and
    `cv_probabilities` in input order), the accuracy of each way of using the encoder and the
    outcome (`encoder`: "used", "left out" or "averaged"; `uses_encoder`: whether its score
    weighs anything). None (with the reason in the report) when the judgments hold too few of
    either class. `feature_names` (default `DEFAULT_FEATURES`)
    are the lexical inputs, any of `features.FEATURE_NAMES`; the semantic ones among them take
    their values from `semantic` (a `SemanticEncoder.features` row per answer).

    `augmented` rewrites join the fit (each in its origin's fold, so a held-out system's
    rewrites are never fitted on when it is predicted) but never the cross-validated accuracy,
    which stays the judged answers'; the report adds `cv_accuracy_rewrites`, the held-out
    folds' accuracy on their own rewrites (how far a verdict survives a rewrite that should not
    change it), by rule.

    `distilled` answers (a trusted judge's verdicts on answers no human judged) join the fit at
    the weight its cross-validation on the judged answers chooses (`DistilledInputs`); the
    report adds `distillation` with the accuracy and log loss at each weight tried."""
    import numpy as np

    feature_names = list(DEFAULT_FEATURES if feature_names is None else feature_names)
    if encoder_rule not in CALIBRATION_ENCODER_RULES:
        raise ValueError(f"encoder_rule: one of {', '.join(CALIBRATION_ENCODER_RULES)}, "
                         f"not {encoder_rule!r}")
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
                                                    feature_names, semantic)
    extra = None
    if augmented is not None and augmented.rewrites:
        extra = _augmented_rows(augmented, references, questions, labels, mean, scale, raw_fill,
                                feature_names)
    keys, by_system = held_out_keys(sources, groups)
    fold_keys = np.asarray(keys, dtype=object)
    splits, folds = group_folds(x, labels, fold_keys.tolist())
    options = [False, True] if use_encoder is None else [bool(use_encoder)]
    taught = (None if distilled is None or not len(distilled.candidates) else
              _distilled_rows(distilled, by_system, mean, scale, raw_fill, feature_names))
    by_weight = {}
    for weight in [0.0, *(taught.weights if taught is not None else ())]:
        extras = [e for e in (extra, taught and replace(taught.rows, weight=weight)) if e]
        by_weight[weight] = _encoder_use(x, labels, splits, fold_keys, options, extras,
                                         encoder_rule)
    losses = {w: None if use.cv is None else _log_loss(use.cv, labels)
              for w, use in by_weight.items()}
    weight = _distill_weight(by_weight, losses)
    use = by_weight[weight]
    extras = [e for e in (extra, taught and replace(taught.rows, weight=weight)) if e]
    fitted = [_final_calibrator(x, labels, gold, c=c, with_encoder=with_encoder, mean=mean,
                                scale=scale, raw_fill=raw_fill, feature_names=feature_names,
                                extras=extras)
              for with_encoder, c in use.c_by_option.items()]
    calibrator = fitted[0] if len(fitted) == 1 else _averaged(fitted)
    report: dict = {"c": calibrator.c, "folds": folds, "encoder": use.outcome,
                    "uses_encoder": calibrator.uses_encoder, "encoder_rule": encoder_rule,
                    "cv_held_out": "system" if by_system else "question group",
                    "cv_accuracy_by_inputs": use.accuracy_by_inputs}
    if taught is not None:
        calibrator.fitted_on["distilled"] = len(taught.rows.labels) if weight > 0 else 0
        calibrator.fitted_on["distilled_weight"] = weight
        report["distillation"] = {
            "answers": len(taught.rows.labels), "judged_correct": int(taught.rows.labels.sum()),
            "weight": weight, "weights_tried": [0.0, *taught.weights],
            "cv_accuracy_by_weight": {f"{w:g}": u.accuracy for w, u in by_weight.items()},
            "cv_log_loss_by_weight": {f"{w:g}": loss for w, loss in losses.items()}}
    if use.cv is not None:
        report.update(cv_accuracy=use.accuracy, cv_log_loss=_log_loss(use.cv, labels),
                      cv_probabilities=use.cv.tolist())
    if extra is not None:
        report["augmented"] = {"rewrites": len(extra.labels), "weight": extra.weight,
                               "by_rule": dict(Counter(r.rule for r in augmented.rewrites))}
        if splits:
            held_out = _mean_logit([
                _cross_fitted(x, labels, splits, c, with_encoder, extras, fold_keys,
                              predict=extra)
                for with_encoder, c in use.c_by_option.items()])
            report["cv_accuracy_rewrites"] = _accuracy_by_rule(held_out, extra,
                                                               augmented.rewrites)
    return calibrator, report


def _distill_weight(by_weight: dict, losses: dict) -> float:
    """The distillation weight kept (0 for none): a judge has to earn its place. A weight is
    eligible only when the cross-fitted verdicts on the human judgments are both more accurate
    (`by_weight[w][0]`) and better calibrated (lower log loss, `losses[w]`) than without the
    judge; among the eligible, the most accurate, then the smallest. On EVOUNA validation
    (docs/LERC.md, "Distillation") accuracy alone let weaker judges in on one or two answers of
    difference with 1,000 human labels, and they cost 0.3–0.4 points on answers no fit had
    read; log loss kept them out, at the price of the best judge's +0.8 there: wrong verdicts
    cost more than missed gains."""
    alone_accuracy, alone_loss = by_weight[0.0].accuracy, losses[0.0]
    if alone_accuracy is None or alone_loss is None:
        return 0.0
    eligible = [w for w in by_weight if w > 0 and by_weight[w].accuracy is not None
                and by_weight[w].accuracy > alone_accuracy and losses[w] < alone_loss]
    return max(eligible, key=lambda w: (by_weight[w].accuracy, -w)) if eligible else 0.0


@dataclass(frozen=True)
class _EncoderUse:
    """How the encoder's score is used: the calibrators to fit (with the encoder or not, each
    at its regularization strength; two are averaged), their cross-fitted probabilities (None
    without folds) and accuracy, and the accuracy of every way tried."""

    c_by_option: dict
    cv: object
    accuracy: float | None
    accuracy_by_inputs: dict

    @property
    def outcome(self) -> str:
        if len(self.c_by_option) == 2:
            return "averaged"
        return "used" if next(iter(self.c_by_option)) else "left out"


def _encoder_use(x, labels, splits, fold_keys, options, extras, rule: str) -> _EncoderUse:
    """The calibrator(s) with and without the encoder's score, by `rule`
    (`config.CALIBRATION_ENCODER_RULES`)."""
    tried = {with_encoder: _best_c(x, labels, splits, with_encoder, extras, fold_keys)
             for with_encoder in options}

    def accuracy_of(cv):
        return None if cv is None else float(((cv >= 0.5) == labels).mean())

    by_inputs = {("lexical+encoder" if w else "lexical"): accuracy_of(cv)
                 for w, (_c, cv) in tried.items()}
    both_fitted = len(options) == 2 and all(cv is not None for _c, cv in tried.values())
    if both_fitted and rule == "average":
        cv = _mean_logit([cv for _c, cv in tried.values()])
        by_inputs["averaged"] = accuracy_of(cv)
        return _EncoderUse({w: c for w, (c, _cv) in tried.items()}, cv, accuracy_of(cv),
                           by_inputs)
    with_encoder = options[0]
    if both_fitted:
        with_encoder = by_inputs["lexical+encoder"] > by_inputs["lexical"]
    c, cv = tried[with_encoder]
    return _EncoderUse({with_encoder: c}, cv, accuracy_of(cv), by_inputs)


def _mean_logit(probabilities):
    """The probability whose logit is the mean of the given probabilities' logits (arrays of
    the same length): what one logistic model with the mean coefficients predicts."""
    import numpy as np

    p = np.clip(np.asarray(probabilities, dtype=float), 1e-12, 1 - 1e-12)
    return 1.0 / (1.0 + np.exp(-np.log(p / (1 - p)).mean(axis=0)))


def _averaged(calibrators: list[Calibrator]) -> Calibrator:
    """One calibrator whose logit (and graded 1–5 map) is the mean of theirs: they share the
    inputs and their standardization, so the mean of the coefficients is the mean of the
    models. `c` is the first one's (with the encoder); each is in `fitted_on`."""
    import numpy as np

    first = next((c for c in calibrators if c.fitted_on["uses_encoder"]), calibrators[0])

    def mean(values):
        return np.mean(np.asarray(values, dtype=float), axis=0).tolist()

    return replace(
        first, coef=mean([c.coef for c in calibrators]),
        intercept=float(np.mean([c.intercept for c in calibrators])),
        linear_coef=mean([c.linear_coef for c in calibrators]) if first.linear_coef else [],
        linear_intercept=float(np.mean([c.linear_intercept for c in calibrators])),
        fitted_on={**first.fitted_on, "uses_encoder": True, "encoder": "averaged",
                   "c_by_inputs": {("lexical+encoder" if c.fitted_on["uses_encoder"]
                                    else "lexical"): c.c for c in calibrators}})


@dataclass(frozen=True)
class _ExtraRows:
    """Standardized inputs fitted beside the judged answers, with their labels and weight, and
    what decides whether a cross-validation fold may fit them: the judged answer each rewrite
    came from (`origin`), or the fold key (system or question group) of a distilled answer."""

    x: object
    labels: object
    weight: float
    origin: object = None
    fold_key: object = None

    def fitted_with(self, fit_rows, fold_keys):
        """Which rows a model fitted on the judged answers `fit_rows` may also fit."""
        import numpy as np

        if self.origin is not None:
            return np.isin(self.origin, fit_rows)
        held_out = np.setdiff1d(fold_keys, fold_keys[fit_rows])
        return ~np.isin(self.fold_key, held_out)


@dataclass(frozen=True)
class _Distilled:
    rows: _ExtraRows
    weights: tuple[float, ...]


def _distilled_rows(distilled: DistilledInputs, by_system: bool, mean, scale, raw_fill,
                    feature_names) -> _Distilled:
    import numpy as np

    weights = tuple(float(w) for w in distilled.weights)
    if any(not 0 < w < 1 for w in weights):
        raise ValueError("distillation weights lie between 0 and 1 (a judge's verdict weighs "
                         "less than a human judgment)")
    matrix = _input_matrix(distilled.raw, distilled.candidates, distilled.references,
                           distilled.questions, feature_names, raw_fill, distilled.semantic)
    labels = (np.asarray(distilled.probabilities, dtype=float) >= 0.5).astype(int)
    keys = distilled.sources if by_system else distilled.groups
    return _Distilled(rows=_ExtraRows(x=(matrix - mean) / scale, labels=labels, weight=0.0,
                                      fold_key=np.asarray(list(keys), dtype=object)),
                      weights=weights)


def _augmented_rows(augmented: AugmentedInputs, references, questions, labels, mean, scale,
                    raw_fill, feature_names) -> _ExtraRows:
    import numpy as np

    origins = [r.origin for r in augmented.rewrites]
    matrix = _input_matrix(augmented.raw, [r.candidate for r in augmented.rewrites],
                           [references[i] for i in origins],
                           [(questions or [""] * len(labels))[i] for i in origins],
                           feature_names, raw_fill, augmented.semantic)
    return _ExtraRows(x=(matrix - mean) / scale, labels=labels[np.asarray(origins)],
                      weight=float(augmented.weight), origin=np.asarray(origins))


def _accuracy_by_rule(predictions, extra: _ExtraRows, rewrites) -> dict[str, float]:
    """Held-out accuracy on the rewrites, overall and by rule (origin label as the truth)."""
    import numpy as np

    right = (predictions >= 0.5) == extra.labels
    out = {"all": float(right.mean())}
    rules = np.asarray([r.rule for r in rewrites])
    for rule in sorted(set(rules.tolist())):
        out[rule] = float(right[rules == rule].mean())
    return out


def _standardized_inputs(raw, candidates, references, questions=None, feature_names=None,
                         semantic=None):
    """The encoder's raw score (median for unscored inputs) and the lexical features,
    standardized: (inputs, mean, scale, the fill for a missing raw score)."""
    import numpy as np

    known = [float(v) for v in raw if v is not None]
    raw_fill = float(np.median(known)) if known else 0.0
    matrix = _input_matrix(raw, candidates, references, questions, feature_names, raw_fill,
                           semantic)
    mean = matrix.mean(axis=0)
    scale = matrix.std(axis=0)
    scale[scale == 0] = 1.0
    return (matrix - mean) / scale, mean, scale, raw_fill


def _input_matrix(raw, candidates, references, questions, feature_names, raw_fill,
                  semantic=None):
    """[raw score (the fill where missing), *features] per answer, unstandardized."""
    import numpy as np

    return np.array([[raw_fill if v is None else float(v),
                      *lexical_features(c, r, q, feature_names, m)]
                     for v, c, r, q, m in zip(raw, candidates, references,
                                              questions or [""] * len(raw),
                                              semantic or [None] * len(raw), strict=True)])


def held_out_keys(sources: Sequence[str] | None, groups: Sequence[str]) -> tuple[list, bool]:
    """What each cross-validation fold holds out, per answer: its answering system when the
    answers name at least three, else its question group; and whether they are systems."""
    by_system = len(set(sources or ())) >= 3
    return (list(sources) if by_system else list(groups)), by_system


def group_folds(x, labels, fold_groups: list[str]) -> tuple[list, int]:
    """Up to five folds that never split a group (a system or a question group)."""
    import numpy as np
    from sklearn.model_selection import GroupKFold

    group_ids = np.unique(np.asarray(fold_groups), return_inverse=True)[1]
    folds = min(5, len(set(group_ids.tolist())))
    splits = list(GroupKFold(n_splits=folds).split(x, labels, group_ids)) if folds >= 2 else []
    return splits, folds


def _columns(x, with_encoder: bool):
    return x if with_encoder else x[:, 1:]


def _cross_fitted(x, labels, splits, c: float, with_encoder: bool, extras=(), fold_keys=None,
                  predict: _ExtraRows | None = None):
    """Each example's probability from a model fitted on the other folds (with the extra rows
    those folds may fit, `_ExtraRows.fitted_with`); with `predict` (the rewrites), each of its
    rows' whose origin is held out instead."""
    import numpy as np

    inputs = _columns(x, with_encoder)
    size = len(predict.labels) if predict is not None else len(labels)
    predictions = np.full(size, labels.mean())
    for fit_rows, predict_rows in splits:
        if len(set(labels[fit_rows].tolist())) < 2:
            continue
        blocks = [(_columns(e.x, with_encoder), e.labels, e.weight,
                   e.fitted_with(fit_rows, fold_keys)) for e in extras]
        model = _fitted_logistic(inputs[fit_rows], labels[fit_rows], c, blocks)
        if predict is not None:
            rows = np.isin(predict.origin, predict_rows)
            if rows.any():
                predictions[rows] = model.predict_proba(
                    _columns(predict.x, with_encoder)[rows])[:, 1]
        else:
            predictions[predict_rows] = model.predict_proba(inputs[predict_rows])[:, 1]
    return predictions


def _fitted_logistic(inputs, labels, c: float, blocks=()):
    """Logistic regression on judged rows (weight 1) and each block's selected rows
    (`(inputs, labels, weight, selected)`: rewrites or distilled answers, at their weight)."""
    import numpy as np
    from sklearn.linear_model import LogisticRegression

    weights = np.ones(len(labels))
    for extra_inputs, extra_labels, weight, selected in blocks:
        # Weight 0: the rows are only measured (`cv_accuracy_rewrites`), never fitted on.
        if weight > 0 and selected.any():
            inputs = np.vstack([inputs, extra_inputs[selected]])
            labels = np.concatenate([labels, extra_labels[selected]])
            weights = np.concatenate([weights, np.full(int(selected.sum()), weight)])
    return LogisticRegression(C=c, max_iter=2000).fit(inputs, labels, sample_weight=weights)


def _log_loss(p, labels) -> float:
    import numpy as np

    p = np.clip(p, 1e-6, 1 - 1e-6)
    return float(-np.mean(labels * np.log(p) + (1 - labels) * np.log(1 - p)))


def _best_c(x, labels, splits, with_encoder: bool, extras=(), fold_keys=None):
    """The regularization strength of `C_GRID` with the lowest cross-fitted log loss, and its
    cross-fitted probabilities (None without folds)."""
    if not splits:
        return 1.0, None
    fitted = {c: _cross_fitted(x, labels, splits, c, with_encoder, extras, fold_keys)
              for c in C_GRID}
    chosen = min(fitted, key=lambda c: _log_loss(fitted[c], labels))
    return chosen, fitted[chosen]


def _final_calibrator(x, labels, gold, *, c: float, with_encoder: bool, mean, scale,
                      raw_fill: float, feature_names: Sequence[str],
                      extras=()) -> Calibrator:
    """The calibrator fitted on every validation judgment (and every rewrite and distilled
    answer, when given, at its weight) with the chosen inputs and strength (and, for graded
    gold, the linear map onto the 1–5 scale)."""
    import numpy as np
    from sklearn.linear_model import Ridge

    final = _fitted_logistic(
        _columns(x, with_encoder), labels, c,
        [(_columns(e.x, with_encoder), e.labels, e.weight, np.ones(len(e.labels), dtype=bool))
         for e in extras])
    rewrites = [e for e in extras if e.origin is not None]
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
                   "incorrect": len(labels) - positives, "uses_encoder": with_encoder,
                   "rewrites": sum(len(e.labels) for e in rewrites)},
    )
    if not binary:
        ridge = Ridge(alpha=1.0).fit(_columns(x, with_encoder), np.asarray(gold, dtype=float))
        calibrator.linear_coef = ([] if with_encoder else [0.0]) + ridge.coef_.tolist()
        calibrator.linear_intercept = float(ridge.intercept_)
    return calibrator
