"""The one cancel door of the REST API for project jobs that hold the job lease (scoring jobs,
judge runs): `POST .../<id>/cancel/` (no body), for a project the user may see, as they may
queue one. Each kind's view names its model and serializer (and its schema)."""
from __future__ import annotations

from rest_framework import status
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.access_selectors import access_project
from metrics_app.access_selectors import access_project_job
from metrics_app.services.job_leases import JobNotCancellable, leased_job_cancel


class JobCancelApi(APIView):
    """A queued job never runs; a running one stops at its next stored batch, keeping what it
    stored (and, for a judge, paid for) so far. 409 for a job already done, failed or
    cancelled."""

    model: type
    serializer_class: type

    def post(self, request, slug: str, job_id: int):
        job = access_project_job(access_project(request.user, slug), self.model, job_id)
        try:
            job = leased_job_cancel(job=job, user=request.user)
        except JobNotCancellable as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
        return Response(self.serializer_class(job).data)
