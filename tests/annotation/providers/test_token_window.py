"""MTurk deduplicates a UniqueRequestToken for 24 hours only. A CreateHIT or SendBonus first
tried longer ago than 23 hours and still in doubt looks for its result (ListHITs,
ListBonusPayments) before it is repeated. botocore's Stubber checks every parameter against
the MTurk service model; a call the test did not queue fails the test."""
from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest
from botocore.stub import ANY
from django.utils import timezone

from annotation.models import AssignmentStatus, HitStatus, ProviderCall, ProviderCallStatus
from annotation.services.hits import hit_update_record
from annotation.services.review import assignment_bonus_pay
from testing.factories import make_assignment, make_hit, make_worker
from tests.support.providers import make_stages

pytestmark = [pytest.mark.mturk, pytest.mark.django_db]

HIT_ID = "3AQN9REUTFGXCRWFMSQJUBH1UH4DYO"
EXPIRES = dt.datetime(2030, 1, 1, tzinfo=dt.UTC)


def call_in_doubt(key: str, *, hours_ago: float, **fields) -> ProviderCall:
    """A call recorded `hours_ago` whose answer never came (the row is written first)."""
    call = ProviderCall.objects.create(provider="mturk", key=key, **fields)
    ProviderCall.objects.filter(pk=call.pk).update(
        created_at=timezone.now() - dt.timedelta(hours=hours_ago))
    return call


@pytest.fixture
def pending_hit(likert_study):
    project, _gold, items = likert_study
    _q, trial, _f = make_stages(project, "mturk")
    hit = make_hit(trial, items=items[:2], max_assignments=2, unique_request_token="tok-old")
    return hit


CREATE_PARAMS = {"HITTypeId": "HT1", "MaxAssignments": 2, "LifetimeInSeconds": ANY,
                 "Question": "<q/>", "RequesterAnnotation": "tok-old",
                 "UniqueRequestToken": "tok-old"}


def test_old_create_hit_finds_the_hit_it_made_instead_of_creating_another(stubbed, pending_hit):
    provider, stubber = stubbed
    call = call_in_doubt(f"mturk:hit-create:{pending_hit.pk}", hours_ago=30,
                         operation="CreateHITWithHITType", token="tok-old", hit=pending_hit)
    stubber.add_response("list_hits", {"NextToken": "n2", "HITs": [
        {"HITId": "OTHERHIT", "RequesterAnnotation": "someone-else"}]}, {"MaxResults": 100})
    stubber.add_response("list_hits", {"HITs": [
        {"HITId": HIT_ID, "RequesterAnnotation": "tok-old", "Expiration": EXPIRES}]},
        {"MaxResults": 100, "NextToken": "n2"})
    # No create_hit_with_hit_type is queued: calling it would fail the test.
    update = provider.create_hit(hit=pending_hit, hit_type_id="HT1", question="<q/>")
    assert update.created is False
    hit_update_record(update=update)
    pending_hit.refresh_from_db()
    assert (pending_hit.external_id, pending_hit.status) == (HIT_ID, HitStatus.OPEN)
    assert pending_hit.expires_at == EXPIRES
    call.refresh_from_db()
    assert call.status == ProviderCallStatus.SUCCEEDED
    assert call.response["found_by"] == "ListHITs"


def test_old_create_hit_that_made_nothing_is_sent_again_with_its_token(stubbed, pending_hit):
    provider, stubber = stubbed
    call_in_doubt(f"mturk:hit-create:{pending_hit.pk}", hours_ago=23.5,
                  operation="CreateHITWithHITType", token="tok-old", hit=pending_hit)
    stubber.add_response("list_hits", {"HITs": []}, {"MaxResults": 100})
    stubber.add_response("create_hit_with_hit_type", {"HIT": {"HITId": HIT_ID}}, CREATE_PARAMS)
    update = provider.create_hit(hit=pending_hit, hit_type_id="HT1", question="<q/>")
    assert update.created is True
    hit_update_record(update=update)
    pending_hit.refresh_from_db()
    assert pending_hit.external_id == HIT_ID


def test_recent_create_hit_trusts_the_token(stubbed, pending_hit):
    provider, stubber = stubbed
    call_in_doubt(f"mturk:hit-create:{pending_hit.pk}", hours_ago=2,
                  operation="CreateHITWithHITType", token="tok-old", hit=pending_hit)
    stubber.add_response("create_hit_with_hit_type", {"HIT": {"HITId": HIT_ID}}, CREATE_PARAMS)
    update = provider.create_hit(hit=pending_hit, hit_type_id="HT1", question="<q/>")
    assert update.created is True
    hit_update_record(update=update)


@pytest.fixture
def approved(likert_study):
    project, _gold, _items = likert_study
    _q, trial, _f = make_stages(project, "mturk")
    worker = make_worker(provider="mturk", external_id="W1")
    return make_assignment(trial, worker=worker, external_id="A1",
                           status=AssignmentStatus.APPROVED,
                           provider_confirmed_at=timezone.now())


def _bonus_key(assignment) -> str:
    import hashlib

    return (f"mturk:bonus:{assignment.pk}:manual:0.50:"
            f"{hashlib.sha256(b'careful work').hexdigest()[:16]}")


def test_old_bonus_in_doubt_is_looked_up_and_not_paid_twice(stubbed, approved):
    provider, stubber = stubbed
    call = call_in_doubt(_bonus_key(approved), hours_ago=26, operation="SendBonus",
                         token="bonus-old", assignment=approved, amount=Decimal("0.50"),
                         request={"reason": "careful work"})
    stubber.add_response("list_bonus_payments", {"NumResults": 1, "BonusPayments": [
        {"WorkerId": "W1", "BonusAmount": "0.50", "AssignmentId": "A1",
         "Reason": "careful work", "GrantTime": dt.datetime(2026, 1, 1, tzinfo=dt.UTC)}]},
        {"AssignmentId": "A1", "MaxResults": 100})
    # No send_bonus is queued: paying again would fail the test.
    assignment_bonus_pay(assignment=approved, amount=Decimal("0.50"), reason="careful work")
    call.refresh_from_db()
    assert call.status == ProviderCallStatus.SUCCEEDED
    assert call.response["found_by"] == "ListBonusPayments"
    approved.refresh_from_db()
    assert approved.bonus_paid == Decimal("0.50")


def test_old_bonus_that_was_never_paid_is_paid_once(stubbed, approved):
    provider, stubber = stubbed
    # An earlier, different bonus of the same amount and reason was paid and recorded.
    ProviderCall.objects.create(provider="mturk", operation="SendBonus", key="earlier",
                                token="t0", assignment=approved, amount=Decimal("0.50"),
                                status=ProviderCallStatus.SUCCEEDED,
                                request={"reason": "careful work"})
    call_in_doubt(_bonus_key(approved), hours_ago=26, operation="SendBonus",
                  token="bonus-old", assignment=approved, amount=Decimal("0.50"),
                  request={"reason": "careful work"})
    stubber.add_response("list_bonus_payments", {"BonusPayments": [
        {"WorkerId": "W1", "BonusAmount": "0.50", "AssignmentId": "A1",
         "Reason": "careful work"}]}, {"AssignmentId": "A1", "MaxResults": 100})
    stubber.add_response("send_bonus", {}, {
        "WorkerId": "W1", "BonusAmount": "0.50", "AssignmentId": "A1",
        "Reason": "careful work", "UniqueRequestToken": "bonus-old"})
    assignment_bonus_pay(assignment=approved, amount=Decimal("0.50"), reason="careful work")
    approved.refresh_from_db()
    assert approved.bonus_paid == Decimal("1.00")


def test_recent_bonus_in_doubt_trusts_the_token(stubbed, approved):
    provider, stubber = stubbed
    call_in_doubt(_bonus_key(approved), hours_ago=1, operation="SendBonus", token="bonus-new",
                  assignment=approved, amount=Decimal("0.50"),
                  request={"reason": "careful work"})
    stubber.add_client_error("send_bonus", service_error_code="RequestError",
                             service_message="The UniqueRequestToken bonus-new has already "
                                             "been used", expected_params={
                                                 "WorkerId": "W1", "BonusAmount": "0.50",
                                                 "AssignmentId": "A1", "Reason": "careful work",
                                                 "UniqueRequestToken": "bonus-new"})
    assignment_bonus_pay(assignment=approved, amount=Decimal("0.50"), reason="careful work")
    approved.refresh_from_db()
    assert approved.bonus_paid == Decimal("0.50")
