"""`lerc` (and `lerc_ab`) in the metric registry: scores with a trained LERC model version.

Without options the metric follows the promoted version (with `project=`, the most recently
promoted version trained on that project, if any; promotion is scoped by project set): its `version` label ("v3") is looked
up when read and each `score_batch` uses the version promoted at that moment, so a long-running
process picks up a newly promoted model on its next run; a promotion in the middle of a run
stops the run rather than storing one model's scores under another's label. `model="v2"` (or `model_version=`) pins a version (`score --model v2`): a trained one of this metric's model
(`lerc-ab:v2` is refused by `lerc`), and with `user=` one that user may see
(`metrics_app/services/lerc/promotion.py:model_version_for_label`).
"""
from __future__ import annotations

from collections.abc import Sequence

from core.vocabulary import PROBABILITY_METRIC_NAME, ModelKind
from metrics_app.lerc.data import LercExample
from metrics_app.registry import MetricInput, MetricUnavailable, register_metric


class LercMetric:
    def __init__(self, *, name: str, model_name: str, label: str | None = None, project=None,
                 output: str = "score", user=None):
        self.name = name
        self.output = output  # "score" (1–5) or "probability" (P(correct), calibrated)
        self.model_name = model_name
        self.label = label
        self.project = project
        self.user = user  # who asks: a label must name a version they may see
        self._pinned = None
        self._reported = None
        self._resolve()  # fail early with a clear message

    def _resolve(self):
        from metrics_app.services.lerc import LercError, model_version_for_label

        try:
            self._pinned = model_version_for_label(self.label, name=self.model_name,
                                                   project=self.project, user=self.user)
        except LercError as exc:
            raise MetricUnavailable(str(exc)) from exc
        return self._pinned

    @property
    def version(self) -> str:
        if self.label is None:
            self._reported = self._resolve()
        return f"v{self._pinned.number}"

    @property
    def model_version(self):
        return self._pinned

    def close(self) -> None:
        """End of a scoring run (the scoring service calls it): forget the reported version."""
        self._reported = None

    def score_batch(self, inputs: Sequence[MetricInput]) -> list[float | None]:
        from metrics_app.services.lerc import model_version_scorer
        from metrics_app.services.lerc_artifacts import ModelFilesUnusable

        if self.label is None:
            # Follow the promoted version, but never store scores of one model under another's
            # label: a promotion in the middle of a run stops the run.
            version = self._resolve()
            if self._reported is not None and self._reported.pk != version.pk:
                raise MetricUnavailable(
                    f"the promoted {self.model_name} changed from v{self._reported.number} to "
                    f"v{version.number} during this run; score again")
        else:
            version = self._pinned
        try:
            scorer = model_version_scorer(version)
        except ModelFilesUnusable as exc:
            raise MetricUnavailable(f"{self.model_name} v{version.number}: {exc}") from exc
        examples = [
            LercExample(question=i.question, references=tuple(i.references) or ("",),
                        candidate=i.candidate, passage=i.passage, id=i.id)
            for i in inputs
        ]
        if self.output == "probability":
            return [d["probability"] for d in scorer.score_details(examples)]
        return scorer.score(examples)


REGRESSION, PAIRWISE = ModelKind.REGRESSION, ModelKind.PAIRWISE


@register_metric(REGRESSION.metric_name,
                 "LERC learned metric (1–5), the promoted model version unless --model")
def lerc_factory(model: str | None = None, model_version: str | None = None,
                 project=None, user=None) -> LercMetric:
    return LercMetric(name=REGRESSION.metric_name, model_name=REGRESSION.model_name,
                      label=model or model_version, project=project, user=user)


@register_metric(PROBABILITY_METRIC_NAME,
                 "LERC's calibrated probability that the answer is correct (0–1; "
                 "versions trained since the calibrated judge; None for older ones)")
def lerc_prob_factory(model: str | None = None, model_version: str | None = None,
                      project=None, user=None) -> LercMetric:
    return LercMetric(name=PROBABILITY_METRIC_NAME, model_name=REGRESSION.model_name,
                      label=model or model_version, project=project, output="probability",
                      user=user)


@register_metric(PAIRWISE.metric_name,
                 "Pairwise LERC (Bradley–Terry) scalar per answer, for A/B projects")
def lerc_ab_factory(model: str | None = None, model_version: str | None = None,
                    project=None, user=None) -> LercMetric:
    return LercMetric(name=PAIRWISE.metric_name, model_name=PAIRWISE.model_name,
                      label=model or model_version, project=project, user=user)
