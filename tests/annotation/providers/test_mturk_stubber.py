"""Every MTurk call QA Judge makes, through botocore's Stubber: the parameters are validated
against botocore's real MTurk service model, and the responses against its output shapes."""
from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest
from botocore.stub import ANY

from annotation.models import AssignmentStatus, HitStatus, ProviderCall, ProviderCallStatus
from annotation.providers.mturk_protocol import (
    APPROVAL_RATE_QUALIFICATION,
    LOCALE_QUALIFICATION,
    SANDBOX_ENDPOINT,
    mturk_client,
    mturk_endpoint,
)
from annotation.services.hits import hit_update_record, hit_updates_record, stage_hits_publish
from annotation.services.stages import stage_hits_build
from testing.factories import make_assignment, make_hit, make_worker
from tests.support.providers import make_stages

pytestmark = [pytest.mark.mturk, pytest.mark.django_db]

HIT_ID = "3AQN9REUTFGXCRWFMSQJUBH1UH4DYO"


def test_sandbox_is_the_default_endpoint(settings, aws_env):
    settings.MTURK_ENDPOINT_URL = ""
    settings.MTURK_PRODUCTION = False
    assert mturk_endpoint() == SANDBOX_ENDPOINT
    assert mturk_client().meta.endpoint_url == SANDBOX_ENDPOINT
    settings.MTURK_PRODUCTION = True
    assert mturk_endpoint() == "https://mturk-requester.us-east-1.amazonaws.com"
    settings.MTURK_ENDPOINT_URL = "http://127.0.0.1:9"
    assert mturk_client().meta.endpoint_url == "http://127.0.0.1:9"


def test_qualification_stage_hit_type_and_hits(stubbed, likert_study):
    provider, stubber = stubbed
    project, gold, _items = likert_study
    qualification, _trial, _full = make_stages(project, "mturk")
    stage_hits_build(stage=qualification)
    stubber.add_response(
        "create_qualification_type",
        {"QualificationType": {"QualificationTypeId": "QT1", "Name": "n"}},
        {"Name": ANY, "Keywords": ANY, "Description": ANY, "QualificationTypeStatus": "Active"},
    )
    stubber.add_response(
        "create_hit_type", {"HITTypeId": "HT1"},
        {
            "AutoApprovalDelayInSeconds": 3 * 86400,
            "AssignmentDurationInSeconds": 3600,
            "Reward": "0.40",
            "Title": ANY,
            "Keywords": ANY,
            "Description": ANY,
            "QualificationRequirements": [
                {"QualificationTypeId": APPROVAL_RATE_QUALIFICATION,
                 "Comparator": "GreaterThanOrEqualTo", "IntegerValues": [95],
                 "ActionsGuarded": "Accept"},
                {"QualificationTypeId": LOCALE_QUALIFICATION, "Comparator": "In",
                 "LocaleValues": [{"Country": "US"}], "ActionsGuarded": "Accept"},
                {"QualificationTypeId": "QT1", "Comparator": "DoesNotExist",
                 "ActionsGuarded": "DiscoverPreviewAndAccept"},
            ],
        },
    )
    hit = qualification.hits.get()
    expected_question = (
        '<ExternalQuestion xmlns="http://mechanicalturk.amazonaws.com/'
        'AWSMechanicalTurkDataSchemas/2006-07-14/ExternalQuestion.xsd">'
        f"<ExternalURL>https://qaj.example.org/task/mturk/{qualification.pk}/</ExternalURL>"
        "<FrameHeight>0</FrameHeight></ExternalQuestion>"
    )

    def expect_create(params):
        # The token is stored on the HIT before the call.
        hit.refresh_from_db()
        assert params["UniqueRequestToken"] == hit.unique_request_token != ""
        return params

    stubber.add_response(
        "create_hit_with_hit_type",
        {"HIT": {"HITId": HIT_ID, "HITTypeId": "HT1",
                 "Expiration": dt.datetime(2030, 1, 1, tzinfo=dt.UTC)}},
        {"HITTypeId": "HT1", "MaxAssignments": 6, "LifetimeInSeconds": 7 * 86400,
         "Question": expected_question, "RequesterAnnotation": ANY, "UniqueRequestToken": ANY},
    )
    report = stage_hits_publish(stage=qualification, provider=provider)
    assert (report.created, report.failed) == (1, 0)
    hit.refresh_from_db()
    assert hit.external_id == HIT_ID and hit.status == HitStatus.OPEN
    assert hit.hit_type_id == "HT1"
    assert hit.expires_at == dt.datetime(2030, 1, 1, tzinfo=dt.UTC)  # MTurk's, not a guess
    # Every outbound call is recorded, the HIT type and qualification type included.
    assert list(ProviderCall.objects.filter(stage=qualification).order_by("pk").values_list(
        "operation", "status")) == [
        ("CreateQualificationType", ProviderCallStatus.SUCCEEDED),
        ("CreateHITType", ProviderCallStatus.SUCCEEDED),
        ("CreateHITWithHITType", ProviderCallStatus.SUCCEEDED)]
    qualification.refresh_from_db()
    assert qualification.settings["mturk_hit_type_id"] == "HT1"
    assert qualification.settings["mturk_qualification_type_id"] == "QT1"
    call = ProviderCall.objects.get(hit=hit)
    assert call.status == ProviderCallStatus.SUCCEEDED and call.token == hit.unique_request_token
    # Publishing again calls nothing (no pending responses are queued).
    again = stage_hits_publish(stage=qualification, provider=provider)
    assert again.created == 0


def test_trial_requires_the_qualification_score(stubbed, likert_study):
    provider, _stubber = stubbed
    project, _gold, _items = likert_study
    qualification, trial, _full = make_stages(project, "mturk")
    qualification.settings["mturk_qualification_type_id"] = "QT9"
    qualification.save()
    trial.settings.update({"locales": [], "min_approval_rate": 0})
    requirements = provider.qualification_requirements(trial)
    assert requirements == [{
        "QualificationTypeId": "QT9", "Comparator": "GreaterThanOrEqualTo",
        "IntegerValues": [80], "ActionsGuarded": "DiscoverPreviewAndAccept",
    }]


def test_throttling_is_retried_with_backoff_and_same_token(stubbed, likert_study):
    provider, stubber = stubbed
    project, _gold, items = likert_study
    _q, trial, _f = make_stages(project, "mturk")
    hit = make_hit(trial, items=items[:2], max_assignments=3)
    for _ in range(3):
        stubber.add_client_error("create_hit_with_hit_type", service_error_code="ThrottlingException",
                                 service_message="Rate exceeded", http_status_code=400)
    stubber.add_response("create_hit_with_hit_type", {"HIT": {"HITId": HIT_ID}},
                         {"HITTypeId": "HT1", "MaxAssignments": 3, "LifetimeInSeconds": ANY,
                          "Question": "<q/>", "RequesterAnnotation": ANY,
                          "UniqueRequestToken": ANY})
    update = provider.create_hit(hit=hit, hit_type_id="HT1", question="<q/>")
    assert update.created is True
    hit_update_record(update=update)
    assert len(provider.sleeps) == 3
    assert provider.sleeps[0] < provider.sleeps[2]  # exponential
    hit.refresh_from_db()
    assert hit.external_id == HIT_ID


def test_duplicate_token_finds_the_existing_hit(stubbed, likert_study):
    provider, stubber = stubbed
    project, _gold, items = likert_study
    _q, trial, _f = make_stages(project, "mturk")
    hit = make_hit(trial, items=items[:2], max_assignments=2, unique_request_token="tok-1")
    stubber.add_client_error(
        "create_hit_with_hit_type", service_error_code="RequestError",
        service_message=f'The HIT with ID "{HIT_ID}" already exists. (HitAlreadyExists)')
    stubber.add_response("get_hit", {"HIT": {"HITId": HIT_ID, "RequesterAnnotation": "tok-1"}},
                         {"HITId": HIT_ID})
    update = provider.create_hit(hit=hit, hit_type_id="HT1", question="<q/>")
    assert update.created is False
    hit_update_record(update=update)
    hit.refresh_from_db()
    assert hit.external_id == HIT_ID and hit.status == HitStatus.OPEN


def test_list_assignments_pages_through_next_token(stubbed, likert_study):
    provider, stubber = stubbed
    project, _gold, _items = likert_study
    statuses = ["Submitted", "Approved", "Rejected"]
    page = {"HITId": HIT_ID, "MaxResults": 100, "AssignmentStatuses": statuses}
    stubber.add_response("list_assignments_for_hit", {
        "NextToken": "p2", "NumResults": 1,
        "Assignments": [{"AssignmentId": "A1", "WorkerId": "W1", "HITId": HIT_ID,
                         "AssignmentStatus": "Submitted",
                         "SubmitTime": dt.datetime(2026, 1, 1, tzinfo=dt.UTC)}]}, page)
    stubber.add_response("list_assignments_for_hit", {
        "NumResults": 1,
        "Assignments": [{"AssignmentId": "A2", "WorkerId": "W2", "HITId": HIT_ID,
                         "AssignmentStatus": "Approved"}]}, {**page, "NextToken": "p2"})
    rows = list(provider.list_hit_assignments(hit_external_id=HIT_ID))
    assert [(r.external_id, r.status) for r in rows] == [("A1", "submitted"), ("A2", "approved")]
    assert rows[0].submitted_at.year == 2026


def test_approve_reject_bonus_block_notify_expire_balance_grant(stubbed, likert_study):
    provider, stubber = stubbed
    project, _gold, items = likert_study
    qualification, trial, _f = make_stages(project, "mturk")
    worker = make_worker(provider="mturk", external_id="W1")
    assignment = make_assignment(trial, worker=worker, external_id="A1",
                                 status=AssignmentStatus.SUBMITTED)
    stubber.add_response("approve_assignment", {},
                         {"AssignmentId": "A1", "RequesterFeedback": "Thanks"})
    provider.approve(assignment=assignment, feedback="Thanks")
    stubber.add_response("reject_assignment", {},
                         {"AssignmentId": "A1", "RequesterFeedback": "too fast"})
    provider.reject(assignment=assignment, reason="too fast")
    stubber.add_response("send_bonus", {}, {
        "WorkerId": "W1", "BonusAmount": "0.25", "AssignmentId": "A1",
        "Reason": "correct answers", "UniqueRequestToken": "bonus-tok"})
    provider.bonus(assignment=assignment, amount=Decimal("0.25"), reason="correct answers",
                   token="bonus-tok")
    stubber.add_response("create_worker_block", {}, {"WorkerId": "W1", "Reason": "spam"})
    provider.block(worker=worker, reason="spam")
    stubber.add_response("delete_worker_block", {}, {"WorkerId": "W1", "Reason": "appeal"})
    provider.unblock(worker=worker, reason="appeal")
    stubber.add_response("notify_workers", {"NotifyWorkersFailureStatuses": []},
                         {"Subject": "New HITs", "MessageText": "Trial is open",
                          "WorkerIds": ["W1"]})
    sent = {"sent": 1, "failures": [], "already_sent": 0, "in_doubt": 0, "errors": []}
    assert provider.notify(workers=[worker], subject="New HITs", message="Trial is open") == sent
    # A retried notify (redelivered task, double click) sends nothing: no response is queued.
    assert provider.notify(workers=[worker], subject="New HITs", message="Trial is open") == {
        **sent, "sent": 0, "already_sent": 1}
    assert ProviderCall.objects.get(operation="NotifyWorkers").request["WorkerIds"] == ["W1"]
    hit = make_hit(trial, items=items[:1], external_id=HIT_ID, status=HitStatus.OPEN)
    stubber.add_response("update_expiration_for_hit", {}, {"HITId": HIT_ID, "ExpireAt": ANY})
    hit_updates_record(provider.extend_stage(stage=trial, seconds=3600))
    hit.refresh_from_db()
    assert hit.expires_at > dt.datetime.now(dt.UTC)
    stubber.add_response("update_expiration_for_hit", {}, {"HITId": HIT_ID, "ExpireAt": ANY})
    hit_updates_record(provider.expire_stage(stage=trial))
    hit.refresh_from_db()
    assert hit.status == HitStatus.EXPIRED
    assert [c.request["why"] for c in ProviderCall.objects.filter(
        operation="UpdateExpirationForHIT", hit=hit).order_by("pk")] == ["extend", "expire"]
    stubber.add_response("get_account_balance", {"AvailableBalance": "10000.00"}, {})
    assert provider.balance() == Decimal("10000.00")
    qualification.settings["mturk_qualification_type_id"] = "QT1"
    qualification.save()
    stubber.add_response("associate_qualification_with_worker", {}, {
        "QualificationTypeId": "QT1", "WorkerId": "W1", "IntegerValue": 90,
        "SendNotification": False})
    provider.grant_qualification(stage=qualification, worker=worker, value=90, passed=True)


def test_approve_after_lost_response_is_not_an_error(stubbed, likert_study):
    provider, stubber = stubbed
    project, _gold, _items = likert_study
    _q, trial, _f = make_stages(project, "mturk")
    assignment = make_assignment(trial, external_id="A1", status=AssignmentStatus.SUBMITTED)
    stubber.add_client_error("approve_assignment", service_error_code="RequestError",
                             service_message="This operation can be called with a status of: "
                                             "Submitted")
    stubber.add_response("get_assignment", {"Assignment": {"AssignmentId": "A1",
                                                           "AssignmentStatus": "Approved"}},
                         {"AssignmentId": "A1"})
    assert provider.approve(assignment=assignment) == {"already": True}


def test_bonus_with_used_token_does_not_pay_again(stubbed, likert_study):
    provider, stubber = stubbed
    project, _gold, _items = likert_study
    _q, trial, _f = make_stages(project, "mturk")
    assignment = make_assignment(trial, external_id="A1", status=AssignmentStatus.APPROVED)
    stubber.add_client_error("send_bonus", service_error_code="RequestError",
                             service_message="The UniqueRequestToken t1 has already been used")
    assert provider.bonus(assignment=assignment, amount=Decimal("1.00"), reason="r",
                          token="t1") == {"duplicate": True}


def test_duplicate_token_without_id_in_message_pages_list_hits(stubbed, likert_study):
    provider, stubber = stubbed
    project, _gold, items = likert_study
    _q, trial, _f = make_stages(project, "mturk")
    hit = make_hit(trial, items=items[:1], unique_request_token="tok-7")
    stubber.add_client_error("create_hit_with_hit_type", service_error_code="RequestError",
                             service_message="UniqueRequestToken was already used")
    stubber.add_response("list_hits", {"NextToken": "n2", "HITs": [
        {"HITId": "OTHER", "RequesterAnnotation": "tok-1"}]}, {"MaxResults": 100})
    stubber.add_response("list_hits", {"HITs": [
        {"HITId": HIT_ID, "RequesterAnnotation": "tok-7"}]}, {"MaxResults": 100,
                                                             "NextToken": "n2"})
    update = provider.create_hit(hit=hit, hit_type_id="HT1", question="<q/>")
    assert update.created is False
    hit_update_record(update=update)
    hit.refresh_from_db()
    assert hit.external_id == HIT_ID


def test_existing_qualification_type_is_found_by_name(stubbed, likert_study):
    provider, stubber = stubbed
    project, _gold, _items = likert_study
    qualification, _t, _f = make_stages(project, "mturk")
    name = f"QA Judge {project.slug} {qualification.name} #{qualification.pk}"
    stubber.add_client_error("create_qualification_type", service_error_code="RequestError",
                             service_message="A QualificationType with this name already "
                                             "exists.")
    stubber.add_response("list_qualification_types", {"QualificationTypes": [
        {"QualificationTypeId": "QTX", "Name": name}]},
        {"Query": name, "MustBeRequestable": False, "MustBeOwnedByCaller": True,
         "MaxResults": 100})
    assert provider.ensure_qualification_type(qualification) == "QTX"
    qualification.refresh_from_db()
    assert qualification.settings["mturk_qualification_type_id"] == "QTX"


def test_rate_exceeded_under_another_code_is_retried_and_refusals_are_not(stubbed, likert_study):
    provider, stubber = stubbed
    project, _gold, items = likert_study
    _q, trial, _f = make_stages(project, "mturk")
    hit = make_hit(trial, items=items[:1])
    stubber.add_client_error("create_hit_with_hit_type", service_error_code="RequestError",
                             service_message="Rate exceeded")
    stubber.add_client_error("create_hit_with_hit_type", service_error_code="ServiceFault",
                             service_message="internal", http_status_code=500)
    stubber.add_client_error("create_hit_with_hit_type", service_error_code="RequestError",
                             service_message="Reward is below the minimum")
    from annotation.providers.calls import ProviderCallRefused

    with pytest.raises(ProviderCallRefused, match="below the minimum"):
        provider.create_hit(hit=hit, hit_type_id="HT1", question="<q/>")
    assert len(provider.sleeps) == 2
    call = ProviderCall.objects.get(hit=hit)
    assert call.status == ProviderCallStatus.FAILED and "below the minimum" in call.error
    hit.refresh_from_db()
    assert hit.status == HitStatus.PENDING and hit.external_id == ""
