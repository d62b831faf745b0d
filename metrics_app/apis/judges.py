"""REST endpoints for judges: the alignment report, the judge recommendation, LLM judge
jobs (list, queue, cancel) and imported verdicts. The same numbers as `manage.py
judge_report`, `run_judge --queue` and `import_verdicts`."""
from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.parsers import MultiPartParser
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.access_selectors import access_project
from annotation.serializers import RefuseUnknownFieldsMixin
from core.api import JsonApiMixin, LimitedJSONParser, paginated_response, with_errors
from core.leases import job_in_flight
from core.statistics import MAX_RESAMPLES
from metrics_app.apis.job_cancel import JobCancelApi
from metrics_app.domain.judge_prompts import JudgeConfigError
from metrics_app.judge_selectors import judge_version_get
from metrics_app.models import JudgeJob
from metrics_app.services.judges.alignment import PAGE_RESAMPLES, cached_judge_alignment_report
from metrics_app.services.judges.imports import (
    IMPORT_REFUSED,
    MAX_ERRORS,
    VerdictImportError,
    json_rows,
    upload_rows,
    verdicts_import,
)
from metrics_app.services.judges.planning import judge_plan
from metrics_app.services.judges.runs import (
    MAX_CONCURRENCY,
    JudgeJobInFlight,
    judge_job_create,
)


def _refs(text: str) -> list[str] | None:
    return [r.strip() for r in text.split(",") if r.strip()] or None


class JudgeReportApi(APIView):
    """GET /api/metrics/projects/<slug>/judges/report/?judge=metric:f1,my-llm&resamples=200

    Without options, the copy the judges page shows: the one the report refresh stores
    (`PAGE_RESAMPLES` resamples, every judge), read while nothing changed since and computed
    in the request only when the page would compute it too. Other options are computed in
    every call (nothing stored). `stored_copy` says when the stored copy was computed, whether
    it is current and whether it answered (`served`)."""

    class FilterSerializer(serializers.Serializer):
        judge = serializers.CharField(required=False, allow_blank=True, max_length=1000)
        resamples = serializers.IntegerField(required=False, min_value=0, max_value=MAX_RESAMPLES,
                                             default=PAGE_RESAMPLES)

    @extend_schema(parameters=[OpenApiParameter("judge", str), OpenApiParameter("resamples", int)],
                   responses=with_errors({200: dict}, 400, 404))
    def get(self, request, slug: str):
        project = access_project(request.user, slug)
        filters = self.FilterSerializer(data=request.query_params)
        filters.is_valid(raise_exception=True)
        return Response(cached_judge_alignment_report(
            project=project, refs=_refs(filters.validated_data.get("judge", "")),
            n_resamples=filters.validated_data["resamples"]))


class JudgePlanApi(APIView):
    """GET /api/metrics/projects/<slug>/judges/plan/?budget=200&label_cost=0.5[&judge=...]:
    which judge and how many human labels give the narrowest interval for the budget."""

    class FilterSerializer(serializers.Serializer):
        budget = serializers.FloatField(min_value=0)
        label_cost = serializers.FloatField(min_value=0.0001)
        judge = serializers.CharField(required=False, allow_blank=True, max_length=1000)

    @extend_schema(parameters=[OpenApiParameter("budget", float),
                               OpenApiParameter("label_cost", float),
                               OpenApiParameter("judge", str)],
                   responses=with_errors({200: dict}, 400, 404))
    def get(self, request, slug: str):
        project = access_project(request.user, slug)
        filters = self.FilterSerializer(data=request.query_params)
        filters.is_valid(raise_exception=True)
        data = filters.validated_data
        try:
            return Response(judge_plan(project=project, budget=data["budget"],
                                       label_cost=data["label_cost"],
                                       refs=_refs(data.get("judge", ""))))
        except ValueError as exc:
            raise serializers.ValidationError({"detail": str(exc)}) from None


class JudgeJobSerializer(serializers.ModelSerializer):
    percent = serializers.IntegerField(read_only=True)
    judge = serializers.CharField(source="judge_version.label", read_only=True)

    class Meta:
        model = JudgeJob
        fields = ["id", "judge", "status", "done", "total", "percent", "budget", "spent",
                  "detail", "error", "attempts", "created_at", "started_at", "finished_at"]


class JudgeJobListCreateApi(JsonApiMixin, APIView):
    """GET a project's judge jobs, newest first; POST {"judge": "name[@version]", "budget":
    USD, "concurrency": N} queues an LLM judge run in Celery (202). An unknown key is a 400
    naming it: a misspelt `budget` dropped would queue a paid run with no cap.

    One run of a judge version per project at a time: while one is queued or running, the
    same POST (a double click, a retry) answers that job (200, nothing queued), and a POST
    with another budget or concurrency is a 409 naming it (cancel it first:
    `POST .../judge-jobs/<id>/cancel/`)."""

    class InputSerializer(RefuseUnknownFieldsMixin, serializers.Serializer):
        judge = serializers.CharField(max_length=200)
        budget = serializers.FloatField(required=False, allow_null=True, min_value=0)
        concurrency = serializers.IntegerField(required=False, min_value=1,
                                               max_value=MAX_CONCURRENCY, default=8)

    @extend_schema(responses=with_errors({200: JudgeJobSerializer(many=True)}, 400, 404))
    def get(self, request, slug: str):
        project = access_project(request.user, slug)
        return paginated_response(
            request=request, view=self,
            queryset=JudgeJob.objects.filter(project=project).select_related(
                "judge_version__judge"),
            serializer_class=JudgeJobSerializer)

    @extend_schema(request=InputSerializer,
                   responses=with_errors({200: JudgeJobSerializer, 202: JudgeJobSerializer},
                                         400, 404, 409, 415))
    def post(self, request, slug: str):
        project = access_project(request.user, slug)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            version = judge_version_get(data.validated_data["judge"])
            before = job_in_flight(JudgeJob, project=project, judge_version=version)
            job = judge_job_create(project=project, version=version,
                                   budget=data.validated_data.get("budget"),
                                   concurrency=data.validated_data["concurrency"],
                                   user=request.user)
        except JudgeJobInFlight as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
        except (LookupError, JudgeConfigError) as exc:
            raise serializers.ValidationError({"judge": [str(exc)]}) from None
        # 200: the job in flight was answered, nothing new queued (the service decides
        # under the project's lock; `before` only picks the status code).
        queued = before is None or before.pk != job.pk
        return Response(JudgeJobSerializer(job).data,
                        status=status.HTTP_202_ACCEPTED if queued else status.HTTP_200_OK)


class JudgeJobCancelApi(JobCancelApi):
    """POST /api/metrics/projects/<slug>/judge-jobs/<id>/cancel/ (no body): cancel a queued or
    running judge job (`JobCancelApi`); a running one keeps the verdicts stored (and paid for)
    so far, counted in `spent`."""

    model, serializer_class = JudgeJob, JudgeJobSerializer

    @extend_schema(request=None, responses=with_errors({200: JudgeJobSerializer}, 404, 409))
    def post(self, request, slug: str, job_id: int):
        return super().post(request, slug, job_id)


class VerdictImportOutputSerializer(serializers.Serializer):
    judge = serializers.CharField()
    version = serializers.CharField()
    label = serializers.CharField(help_text="name@version, as every judge door names it")
    imported = serializers.IntegerField(help_text="verdicts stored by this request")
    unchanged = serializers.IntegerField(
        help_text="verdicts already stored, equal to the ones sent (the same file again)")


class _VerdictImportInput(RefuseUnknownFieldsMixin, serializers.Serializer):
    judge = serializers.CharField(required=False, allow_blank=True,
                                  help_text="the judge's name, or a `judge` column")
    version = serializers.CharField(required=False, allow_blank=True,
                                    help_text="its version, or a `judge_version` column")
    description = serializers.CharField(required=False, allow_blank=True)


class VerdictFileInputSerializer(_VerdictImportInput):
    file = serializers.FileField(
        help_text="a .jsonl or .csv file (docs/DATA_FORMATS.md), at most "
                  "QAJ_IMPORT_UPLOAD_MAX_MB")


class VerdictJsonInputSerializer(_VerdictImportInput):
    verdicts = serializers.ListField(
        child=serializers.JSONField(allow_null=True), allow_empty=False,
        help_text="one object per verdict, the columns of a JSONL file's lines; the Nth is "
                  "named `line N` in errors")


class JudgeVerdictImportApi(APIView):
    """POST /api/metrics/projects/<slug>/judges/verdicts/: a judge's verdicts produced
    elsewhere, stored as one judge version by the service behind `manage.py import_verdicts`
    (`verdicts_import`: the same checks, the same messages). A file as multipart
    (`file`, `judge`, `version`), or JSON `{"judge", "version", "verdicts": [...]}`."""

    parser_classes = (LimitedJSONParser, MultiPartParser)

    @extend_schema(
        summary="Import a judge's verdicts: all or nothing",
        description=(
            "201: the verdicts were stored as the judge version. 200: the same verdicts are "
            "already stored under that version (a file sent again): nothing is stored, "
            "`unchanged` counts them. 400: nothing is stored; `detail` lists every problem "
            f"(up to {MAX_ERRORS}, each naming its line and column, e.g. `line 3: score 7 is "
            "outside 1..5`), `errors` the same list. Other verdicts under a version that "
            "holds some are refused: import a new version."),
        request={"multipart/form-data": VerdictFileInputSerializer,
                 "application/json": VerdictJsonInputSerializer},
        responses=with_errors({201: VerdictImportOutputSerializer,
                               200: VerdictImportOutputSerializer}, 400, 404, 415))
    def post(self, request, slug: str):
        project = access_project(request.user, slug)
        multipart = request.content_type.startswith("multipart/")
        data = (VerdictFileInputSerializer if multipart else VerdictJsonInputSerializer)(
            data=request.data)
        data.is_valid(raise_exception=True)
        given = data.validated_data
        try:
            rows = upload_rows(given["file"]) if multipart else json_rows(given["verdicts"])
            result = verdicts_import(project=project, rows=rows,
                                     judge=given.get("judge") or None,
                                     version=given.get("version") or None,
                                     description=given.get("description", ""))
        except IMPORT_REFUSED as exc:
            errors = exc.errors if isinstance(exc, VerdictImportError) else [str(exc)]
            return Response({"detail": str(exc), "errors": errors[:MAX_ERRORS]},
                            status=status.HTTP_400_BAD_REQUEST)
        return Response(VerdictImportOutputSerializer(result).data,
                        status=status.HTTP_201_CREATED if result["imported"]
                        else status.HTTP_200_OK)
