"""REST API of automatic metrics: the metric report of a project, scoring jobs, and scoring a
small posted batch. One class per operation; each validates, calls a service, serializes."""
from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.apis import with_errors
from annotation.models import Project
from annotation.selectors import projects_visible_to

from .registry import MetricInput, metric_names, metric_sync_ok
from .scoring_models import ScoringJob
from .services.metric_evaluation import metric_report_cached, metric_report_refresh
from .services.scoring import score_inputs, scoring_jobs_create

MAX_BATCH_ITEMS = 100
MAX_TEXT_CHARS = 20_000  # per field; passages longer than this belong in a batch job


def _project_for(request, slug: str) -> Project:
    return get_object_or_404(projects_visible_to(request.user), slug=slug)


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
    The cached report is returned (with `stale`); `refresh=1` or no cached copy recomputes."""

    class InputSerializer(serializers.Serializer):
        znormalize = serializers.BooleanField(required=False, default=False)
        drop_exact_matches = serializers.BooleanField(required=False, default=False)
        drop_number_pairs = serializers.BooleanField(required=False, default=False)
        n_resamples = serializers.IntegerField(required=False, default=1000, min_value=0,
                                               max_value=5000)
        refresh = serializers.BooleanField(required=False, default=False)

    @extend_schema(parameters=[InputSerializer], responses=with_errors({200: dict}, 400, 404))
    def get(self, request, slug: str):
        project = _project_for(request, slug)
        params = self.InputSerializer(data=request.query_params)
        params.is_valid(raise_exception=True)
        options = dict(params.validated_data)
        refresh = options.pop("refresh")
        report, stale = metric_report_cached(project=project, params=options)
        if report is None or refresh:
            report, stale = metric_report_refresh(project=project, params=options), False
        return Response({"project": project.slug, "stale": stale,
                         "computed_at": report.computed_at, "report": report.data})


class ScoringJobSerializer(serializers.ModelSerializer):
    percent = serializers.IntegerField(read_only=True)

    class Meta:
        model = ScoringJob
        fields = ["id", "metrics", "queue", "status", "done", "total", "percent", "detail",
                  "error", "created_at", "started_at", "finished_at"]


class ScoringJobListCreateApi(APIView):
    """GET recent scoring jobs of a project; POST {"metrics": [...]} queues scoring in Celery
    (202). Scores already stored at a metric's current version are reused."""

    class InputSerializer(serializers.Serializer):
        metrics = serializers.ListField(child=serializers.CharField(max_length=50),
                                        min_length=1, max_length=20)
        model = serializers.CharField(required=False, allow_blank=True, max_length=50)

        def validate_metrics(self, value):
            return _validate_metric_names(value)

    @extend_schema(responses=with_errors({200: ScoringJobSerializer(many=True)}, 404))
    def get(self, request, slug: str):
        project = _project_for(request, slug)
        jobs = ScoringJob.objects.filter(project=project)[:20]
        return Response(ScoringJobSerializer(jobs, many=True).data)

    @extend_schema(request=InputSerializer,
                   responses=with_errors({202: ScoringJobSerializer(many=True)}, 400, 404, 415))
    def post(self, request, slug: str):
        project = _project_for(request, slug)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        jobs = scoring_jobs_create(project=project, metric_names=data.validated_data["metrics"],
                                   user=request.user,
                                   model=data.validated_data.get("model") or None)
        return Response(ScoringJobSerializer(jobs, many=True).data,
                        status=status.HTTP_202_ACCEPTED)


def _validate_sync_metric_names(value: list[str]) -> list[str]:
    """Only cheap metrics run inside the request; model-based ones (BERTScore, LERC) and
    METEOR (a Java process) would hold the web worker for seconds to minutes."""
    value = _validate_metric_names(value)
    heavy = [name for name in value if not metric_sync_ok(name)]
    if heavy:
        cheap = [name for name in metric_names() if metric_sync_ok(name)]
        raise serializers.ValidationError(
            f"{', '.join(heavy)} cannot be computed in a request; queue a scoring job "
            f"(POST /api/metrics/projects/<slug>/scoring-jobs/ or `manage.py score`). "
            f"Metrics available here: {', '.join(cheap)}")
    return value


class MetricScoreApi(APIView):
    """POST a small batch (at most 100 candidates) and get the scores back at once. Only cheap
    metrics (em, f1, bleu1, bleu4, rougeL, length) run here; model-based metrics and METEOR
    are refused (400) and belong in a project scoring job or `manage.py score`."""

    class ItemSerializer(serializers.Serializer):
        id = serializers.CharField(max_length=255)
        question = serializers.CharField(allow_blank=True, max_length=MAX_TEXT_CHARS)
        references = serializers.ListField(
            child=serializers.CharField(allow_blank=True, max_length=MAX_TEXT_CHARS),
            max_length=20)
        candidate = serializers.CharField(allow_blank=True, max_length=MAX_TEXT_CHARS,
                                          trim_whitespace=False)
        passage = serializers.CharField(required=False, allow_blank=True,
                                        max_length=MAX_TEXT_CHARS, default="")

    class InputSerializer(serializers.Serializer):
        metrics = serializers.ListField(child=serializers.CharField(max_length=50),
                                        min_length=1, max_length=10)
        model = serializers.CharField(required=False, allow_blank=True, max_length=50)
        items = serializers.ListField(min_length=1, max_length=MAX_BATCH_ITEMS)

        def validate_metrics(self, value):
            return _validate_sync_metric_names(value)

        def validate_items(self, value):
            rows = MetricScoreApi.ItemSerializer(data=value, many=True)
            rows.is_valid(raise_exception=True)
            return rows.validated_data

    @extend_schema(request=InputSerializer, responses=with_errors({200: dict}, 400, 415))
    def post(self, request):
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        items = data.validated_data["items"]
        inputs = [MetricInput(id=row["id"], question=row["question"],
                              references=list(row["references"]), candidate=row["candidate"],
                              passage=row.get("passage") or "") for row in items]
        runs = score_inputs(metric_names=data.validated_data["metrics"], inputs=inputs,
                            model=data.validated_data.get("model") or None)
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
