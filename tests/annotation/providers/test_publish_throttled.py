"""Publishing survives 10% throttling and lost CreateHIT responses without duplicates (the
benchmark runs the same function with 1,000 HITs)."""
from __future__ import annotations

import pytest

from testing.publish_benchmark import publish_benchmark

pytestmark = [pytest.mark.mturk, pytest.mark.reliability, pytest.mark.django_db]


def test_publishing_many_hits_under_throttling():
    result = publish_benchmark(n_hits=80, throttle_rate=0.10, lost_responses=3)
    assert result["failed"] == 0 and result["stage_status"] == "collecting"
    assert result["open_locally"] == result["distinct_local_ids"] == 80
    assert result["hits_on_server"] == 80  # nothing created twice
    assert result["throttled"] > 0 and result["lost_responses"] == 3
    assert result["retries"] >= result["throttled"] + 3
