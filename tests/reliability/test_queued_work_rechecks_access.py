"""Work a researcher queues runs later, on a Celery worker: a background publish (spends the
owner's money), a scoring job, an LLM judge job (pays the endpoint). Each is checked again when
it runs (`annotation/access_selectors.py:queued_access_refusal`): a researcher whose share was
revoked, or whose staff flag was removed, after the click gets nothing run; one who still sees
the project gets it done."""
from __future__ import annotations

import pytest

from annotation.access_selectors import QueuedAccessLost
from annotation.models import StageStatus, TaskKind
from annotation.stage_errors import GuardFailed
from metrics_app.models import JudgeJob, JudgeVerdict, MetricScore, ScoringJob, ScoringStatus
from metrics_app.services.judges.client import RetryPolicy
from metrics_app.services.judges.runs import judge_job_create, judge_job_run
from metrics_app.services.judges.versions import judge_version_create
from testing.factories import make_item, make_project, make_stage, make_user
from testing.openai_server import FakeChatServer

pytestmark = [pytest.mark.django_db, pytest.mark.reliability]

FAST = RetryPolicy(attempts=2, base_delay=0.001, max_delay=0.01)
LOST = ("revoked", "demoted")


@pytest.fixture
def study():
    owner, colleague = make_user("owner"), make_user("colleague")
    project = make_project(TaskKind.LIKERT, owner=owner, shared_with=[colleague])
    for _ in range(3):
        make_item(project)
    return {"owner": owner, "colleague": colleague, "project": project}


def _lose_access(study, how: str) -> None:
    colleague = study["colleague"]
    if how == "revoked":
        study["project"].shared_with.remove(colleague)
    else:  # the staff flag removed; the session and the queued message stay
        colleague.is_staff = False
        colleague.save(update_fields=["is_staff"])


@pytest.mark.parametrize("how", LOST)
def test_a_background_publish_queued_before_the_share_was_revoked_publishes_nothing(study,
                                                                                    how):
    from worker.tasks.providers import stage_publish as publish_task

    stage = make_stage(study["project"], status=StageStatus.DRAFT, name="full")
    _lose_access(study, how)
    with pytest.raises(GuardFailed, match="colleague, who queued it, no longer has access"):
        publish_task.run(stage.pk, study["colleague"].pk)
    stage.refresh_from_db()
    assert stage.status == StageStatus.DRAFT and not stage.hits.exists()
    assert "no longer has access" in stage.publish_problem


def test_a_background_publish_whose_researcher_was_deleted_since_publishes_nothing(study):
    """The account that clicked Publish was deleted before the task ran: nobody who may spend
    the project's money asks for it any more, so nothing is published (it ran as if queued by
    a command)."""
    from worker.tasks.providers import stage_publish as publish_task

    stage = make_stage(study["project"], status=StageStatus.DRAFT, name="full")
    colleague_id = study["colleague"].pk
    study["colleague"].delete()
    with pytest.raises(GuardFailed, match="the account that queued it has been deleted"):
        publish_task.run(stage.pk, colleague_id)
    stage.refresh_from_db()
    assert stage.status == StageStatus.DRAFT and not stage.hits.exists()
    assert "has been deleted" in stage.publish_problem


def test_a_background_publish_for_a_researcher_who_still_sees_the_project_runs(study):
    from worker.tasks.providers import stage_publish as publish_task

    stage = make_stage(study["project"], status=StageStatus.DRAFT, name="full")
    publish_task.run(stage.pk, study["colleague"].pk)
    stage.refresh_from_db()
    assert stage.status != StageStatus.DRAFT


@pytest.mark.parametrize("how", [*LOST, None])
def test_a_scoring_job_runs_only_while_its_requester_sees_the_project(study, how):
    from worker.tasks.metrics import score_project

    job = ScoringJob.objects.create(project=study["project"], metrics=["f1"],
                                    requested_by=study["colleague"])
    if how is None:
        score_project.run(job.pk)
        job.refresh_from_db()
        assert job.status == ScoringStatus.DONE and MetricScore.objects.exists()
        return
    _lose_access(study, how)
    with pytest.raises(QueuedAccessLost):
        score_project.run(job.pk)
    job.refresh_from_db()
    assert job.status == ScoringStatus.FAILED
    assert job.error == ("QueuedAccessLost: not run: colleague, who queued it, no longer has "
                         "access to this project")
    assert not MetricScore.objects.exists()


@pytest.mark.parametrize("how", [*LOST, None])
def test_a_judge_job_asks_and_pays_nothing_once_its_requester_lost_the_project(
        study, how, django_capture_on_commit_callbacks):
    with FakeChatServer() as server:
        version = judge_version_create(name="fake", config={
            "base_url": server.url, "model": "fake-judge", "logprobs": True})[0]
        with django_capture_on_commit_callbacks(execute=False):
            job = judge_job_create(project=study["project"], version=version, budget=1.0,
                                   user=study["colleague"])
        if how is None:
            judge_job_run(job_id=job.pk, retry=FAST)
            assert JudgeJob.objects.get(pk=job.pk).status == ScoringStatus.DONE
            assert server.stats["requests"] == 3
            return
        _lose_access(study, how)
        with pytest.raises(QueuedAccessLost):
            judge_job_run(job_id=job.pk, retry=FAST)
        job.refresh_from_db()
        assert job.status == ScoringStatus.FAILED and "no longer has access" in job.error
        assert server.stats["requests"] == 0 and not JudgeVerdict.objects.exists()
        assert not job.spent
