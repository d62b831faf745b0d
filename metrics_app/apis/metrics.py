"""REST API of automatic metrics: the metric report of a project, scoring jobs, and scoring a
posted batch (in the request for cheap metrics, else as a job). One class per operation; each
validates, calls a service, serializes."""
from __future__ import annotations

from django.urls import reverse
from django.utils import timezone
from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.access_selectors import access_project
from annotation.serializers import RefuseUnknownFieldsMixin
from core.api import (
    JsonApiMixin,
    LimitedJSONParser,
    paginated_response,
    with_errors,
)
from core.statistics import MAX_RESAMPLES
from metrics_app.access_selectors import access_item_scoring_job
from metrics_app.apis.job_cancel import JobCancelApi
from metrics_app.apis.report_schemas import MetricReportResponseSerializer
from metrics_app.domain.score_input import ScoreInputError, check_score_row, first_repeated_id
from metrics_app.models import ScoringJob, ScoringStatus
from metrics_app.registry import MetricInput, metric_names, metric_sync_ok
from metrics_app.services.meta_evaluation_report import (
    metric_report_cached_with_reason,
    metric_report_compute,
)
from metrics_app.services.scoring import (
    ITEM_JOB_MAX_ITEMS,
    ScoringModelError,
    item_scoring_job_create,
    score_inputs,
    scoring_jobs_create,
    scoring_model_check,
)

MAX_BATCH_ITEMS = 100  # cheap metrics, scored inside the request
MAX_JOB_ITEMS = ITEM_JOB_MAX_ITEMS  # any metric, stored as an ItemScoringJob run in Celery
MAX_TEXT_CHARS = 20_000  # per field; passages longer than this belong in a batch job


def _validate_metric_names(value: list[str]) -> list[str]:
    known = set(metric_names())
    unknown = [name for name in value if name not in known]
    if unknown:
        raise serializers.ValidationError(
            f"unknown metric(s): {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    return value


class MetricReportApi(APIView):
    """GET the project's metric report: per metric and group {pearson, spearman, kendall, n}
    with bootstrap intervals, plus `minimal_pairs` / `pairwise` where the project has them.
    The cached report is returned (with `stale` and the page's `stale_reason`); `refresh=1` or
    no cached copy recomputes. Without `n_resamples`, the copy the metrics page shows: the
    newest with these options whatever its resamples (`report.params.n_resamples` says how
    many), so a script reads what the page reads instead of computing 1,000 in each call."""

    class InputSerializer(serializers.Serializer):
        znormalize = serializers.BooleanField(required=False, default=False)
        drop_exact_matches = serializers.BooleanField(required=False, default=False)
        drop_number_pairs = serializers.BooleanField(required=False, default=False)
        n_resamples = serializers.IntegerField(required=False, default=1000, min_value=0,
                                               max_value=MAX_RESAMPLES)
        refresh = serializers.BooleanField(required=False, default=False)

    @extend_schema(parameters=[InputSerializer],
                   responses=with_errors({200: MetricReportResponseSerializer}, 400, 404))
    def get(self, request, slug: str):
        project = access_project(request.user, slug)
        params = self.InputSerializer(data=request.query_params)
        params.is_valid(raise_exception=True)
        options = dict(params.validated_data)
        refresh = options.pop("refresh")
        report, stale_reason = metric_report_cached_with_reason(
            project=project, params=options,
            any_resamples="n_resamples" not in request.query_params)
        if report is None or refresh:
            # Computed for this answer and not stored: a GET writes nothing (scoring jobs
            # and `manage.py metric_report` fill the cache).
            data, _watermark = metric_report_compute(project=project, params=options)
            return Response({"project": project.slug, "stale": False, "stale_reason": "",
                             "computed_at": timezone.now(), "report": data})
        return Response({"project": project.slug, "stale": bool(stale_reason),
                         "stale_reason": stale_reason, "computed_at": report.computed_at,
                         "report": report.data})


class ScoringJobSerializer(serializers.ModelSerializer):
    percent = serializers.IntegerField(read_only=True)

    class Meta:
        model = ScoringJob
        fields = ["id", "metrics", "queue", "status", "done", "total", "percent", "detail",
                  "error", "created_at", "started_at", "finished_at"]


class ScoringJobListCreateApi(JsonApiMixin, APIView):
    """GET a project's scoring jobs, newest first, paginated like every list; POST
    {"metrics": [...]} queues scoring in Celery (202). Scores already stored at a metric's
    current version are reused. `model` pins a trained version of each learned metric's model
    that the user may see (else 400 naming it). While a job with the same metrics (any order)
    and model is queued or running on the project, that job is answered in the list instead
    of a second one (a double click or a retry queues nothing twice); cancel it with
    `POST .../scoring-jobs/<id>/cancel/`."""

    class InputSerializer(RefuseUnknownFieldsMixin, serializers.Serializer):
        metrics = serializers.ListField(child=serializers.CharField(max_length=50),
                                        min_length=1, max_length=20)
        model = serializers.CharField(required=False, allow_blank=True, max_length=50)

        def validate_metrics(self, value):
            return _validate_metric_names(value)

    @extend_schema(responses=with_errors({200: ScoringJobSerializer(many=True)}, 400, 404))
    def get(self, request, slug: str):
        project = access_project(request.user, slug)
        return paginated_response(
            request=request, view=self, queryset=ScoringJob.objects.filter(project=project),
            serializer_class=ScoringJobSerializer)

    @extend_schema(request=InputSerializer,
                   responses=with_errors({202: ScoringJobSerializer(many=True)}, 400, 404, 415))
    def post(self, request, slug: str):
        project = access_project(request.user, slug)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            jobs = scoring_jobs_create(
                project=project, metric_names=data.validated_data["metrics"],
                user=request.user, model=data.validated_data.get("model") or None)
        except ScoringModelError as exc:
            raise serializers.ValidationError({"model": [str(exc)]}) from None
        except ValueError as exc:
            raise serializers.ValidationError({"metrics": [str(exc)]}) from None
        return Response(ScoringJobSerializer(jobs, many=True).data,
                        status=status.HTTP_202_ACCEPTED)


class ScoringJobCancelApi(JobCancelApi):
    """POST /api/metrics/projects/<slug>/scoring-jobs/<id>/cancel/ (no body): cancel a queued
    or running scoring job (`JobCancelApi`); a running one keeps the scores stored so far."""

    model, serializer_class = ScoringJob, ScoringJobSerializer

    @extend_schema(request=None, responses=with_errors({200: ScoringJobSerializer}, 404, 409))
    def post(self, request, slug: str, job_id: int):
        return super().post(request, slug, job_id)


def _item_ref(index: int, row) -> str:
    """"items[2] (id 'q7')": where a score request's bad item is."""
    row_id = row.get("id") if isinstance(row, dict) else None
    return f"items[{index}]" + (f" (id {str(row_id)!r})" if isinstance(row_id, (str, int))
                                and not isinstance(row_id, bool) else "")


# A misspelt key ("pasage") is a 400 naming it: dropped, the batch would be scored without
# the passage and answer 200 as if it had it.
class ScoreItemSerializer(RefuseUnknownFieldsMixin, serializers.Serializer):
    """One candidate to score; any other key is a 400 naming it."""

    id = serializers.CharField(max_length=255)
    question = serializers.CharField(allow_blank=True, max_length=MAX_TEXT_CHARS)
    references = serializers.ListField(
        child=serializers.CharField(allow_blank=True, max_length=MAX_TEXT_CHARS),
        max_length=20)
    candidate = serializers.CharField(allow_blank=True, max_length=MAX_TEXT_CHARS,
                                      trim_whitespace=False)
    passage = serializers.CharField(required=False, allow_blank=True,
                                    max_length=MAX_TEXT_CHARS, default="")


@extend_schema_field(ScoreItemSerializer(many=True))
class ScoreItemsField(serializers.ListField):
    """The items of a score request, described in the schema by their fields. Checked in
    `validate_items`, not by a child serializer: `check_score_row` (the rule `manage.py score`
    applies) goes first, for its messages naming the item."""


class MetricScoreApi(APIView):
    """POST a batch of candidates with `metrics`. When every metric is cheap (em, f1, bleu1,
    bleu4, rougeL, length) the scores come back at once (200; at most 100 items). Any other
    metric (LERC, BERTScore, METEOR: a model load or a Java process) is never computed in the
    request: the items are stored as a scoring job run in Celery (202; at most 1,000 items),
    read back at `GET /api/metrics/score-jobs/<id>/`. `model` pins a trained version of each
    learned metric's model that the user may see (else 400 naming it)."""

    # JSON only: items are nested objects that form encoding cannot carry (and 1,000 of them
    # would exceed DATA_UPLOAD_MAX_NUMBER_FIELDS before DRF could answer).
    parser_classes = (LimitedJSONParser,)

    class InputSerializer(RefuseUnknownFieldsMixin, serializers.Serializer):
        metrics = serializers.ListField(child=serializers.CharField(max_length=50),
                                        min_length=1, max_length=10)
        model = serializers.CharField(required=False, allow_blank=True, max_length=50)
        items = ScoreItemsField(
            min_length=1, max_length=MAX_JOB_ITEMS,
            help_text=f"At most {MAX_BATCH_ITEMS} items when every metric is cheap (scored in "
                      f"the request), at most {MAX_JOB_ITEMS} otherwise (a scoring job).",
            error_messages={"max_length": f"At most {MAX_JOB_ITEMS} items per request (a "
                                          f"scoring job); at most {MAX_BATCH_ITEMS} when "
                                          f"every metric is scored in the request."})

        def validate_metrics(self, value):
            return _validate_metric_names(value)

        def validate_items(self, value):
            # The same check as `manage.py score` (metrics_app.domain.score_input), naming the
            # item and the field: no empty reference list, no empty reference, unique ids.
            for index, row in enumerate(value):
                try:
                    check_score_row(row)
                except ScoreInputError as exc:
                    raise serializers.ValidationError(f"{_item_ref(index, row)}: {exc}") from None
            rows = ScoreItemSerializer(data=value, many=True)
            rows.is_valid(raise_exception=True)
            repeated = first_repeated_id(row["id"] for row in rows.validated_data)
            if repeated is not None:
                at, first = repeated
                raise serializers.ValidationError(
                    f"{_item_ref(at, value[at])}: field 'id' is already used by items[{first}] "
                    "(ids must be unique: results are matched back by id)")
            return rows.validated_data

        def validate(self, attrs):
            in_request = all(metric_sync_ok(name) for name in attrs["metrics"])
            if in_request and len(attrs["items"]) > MAX_BATCH_ITEMS:
                raise serializers.ValidationError({"items": [
                    f"At most {MAX_BATCH_ITEMS} items are scored in the request with "
                    f"{', '.join(attrs['metrics'])} (got {len(attrs['items'])}); split the "
                    f"batch or use `manage.py score`."]})
            return attrs

    class OutputSerializer(serializers.Serializer):
        versions = serializers.DictField(child=serializers.CharField())
        errors = serializers.DictField(child=serializers.CharField())
        results = serializers.ListField(child=serializers.DictField())

    class OutputAcceptedSerializer(serializers.Serializer):
        id = serializers.IntegerField()
        status = serializers.CharField()
        url = serializers.CharField(help_text="GET it for progress and, once finished, scores.")

    @extend_schema(request=InputSerializer,
                   responses=with_errors({200: OutputSerializer, 202: OutputAcceptedSerializer},
                                         400, 415))
    def post(self, request):
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        names = data.validated_data["metrics"]
        model = data.validated_data.get("model") or None
        items = data.validated_data["items"]
        inputs = [MetricInput(id=row["id"], question=row["question"],
                              references=list(row["references"]), candidate=row["candidate"],
                              passage=row.get("passage") or "") for row in items]
        in_request = all(metric_sync_ok(name) for name in names)
        try:
            # The one check of `model` (the job's service makes it), before anything is stored
            # or scored.
            if in_request:
                scoring_model_check(metric_names=names, model=model, user=request.user)
            else:
                job = item_scoring_job_create(metric_names=names, inputs=inputs,
                                              user=request.user, model=model)
        except ScoringModelError as exc:
            raise serializers.ValidationError({"model": [str(exc)]}) from None
        if not in_request:
            url = reverse("metrics-api:score-job", args=[job.pk])
            return Response({"id": job.pk, "status": job.status, "url": url},
                            status=status.HTTP_202_ACCEPTED, headers={"Location": url})
        runs = score_inputs(metric_names=names, inputs=inputs, model=model)
        results = []
        for index, row in enumerate(items):
            result = {"id": row["id"]}
            for name, run in runs.items():
                result[name] = run.values[index] if run.values else None
            results.append(result)
        return Response({
            "versions": {name: run.version for name, run in runs.items()},
            "errors": {name: run.error for name, run in runs.items() if run.error},
            "results": results,
        })


class ScoringProgressSerializer(serializers.Serializer):
    done = serializers.IntegerField(help_text="Inputs scored so far, over all metrics.")
    total = serializers.IntegerField(help_text="Items × metrics.")


class ItemScoringJobDetailApi(APIView):
    """GET a scoring job created by `POST /api/metrics/score/`: status, progress and, once
    finished, one result per posted item in input order (`{"id", metric: value, ...}`; null
    where a metric could not score). `failed` jobs carry the reason in `error`. Only the user
    who created the job (or a superuser) can read it."""

    class OutputSerializer(serializers.Serializer):
        id = serializers.IntegerField()
        status = serializers.CharField(help_text="queued, running, done or failed.")
        metrics = serializers.ListField(child=serializers.CharField())
        model = serializers.CharField(allow_null=True)
        progress = ScoringProgressSerializer()
        versions = serializers.DictField(child=serializers.CharField())
        results = serializers.ListField(child=serializers.DictField(), allow_null=True)
        error = serializers.CharField(allow_blank=True)
        created_at = serializers.DateTimeField()
        started_at = serializers.DateTimeField(allow_null=True)
        finished_at = serializers.DateTimeField(allow_null=True)

    @extend_schema(responses=with_errors({200: OutputSerializer}, 404))
    def get(self, request, job_id: int):
        job = access_item_scoring_job(request.user, job_id)
        finished = job.status in (ScoringStatus.DONE, ScoringStatus.FAILED)
        return Response(self.OutputSerializer({
            "id": job.pk, "status": job.status, "metrics": job.metrics,
            "model": (job.options or {}).get("model"),
            "progress": {"done": job.done, "total": job.total},
            "versions": {name: (detail or {}).get("version", "")
                         for name, detail in (job.detail or {}).items()},
            "results": job.results if finished else None,
            "error": job.error, "created_at": job.created_at, "started_at": job.started_at,
            "finished_at": job.finished_at,
        }).data)
