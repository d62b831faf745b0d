"""How many gold items a batch holds: one rule for the HIT plan and the pages
(`annotation.domain.gold_mix`), a whole number a researcher can work out from the rate."""
from __future__ import annotations

import pytest

from annotation.domain.gold_mix import gold_per_batch, gold_per_batch_text, gold_with_regular

pytestmark = pytest.mark.reliability


@pytest.mark.parametrize("per_batch,rate,gold", [
    (5, 0.15, 1),   # 0.75, rounded half up
    (5, 0.2, 1),    # a whole number stays as it is
    (5, 0.1, 1),    # 0.5: half up
    (5, 0.05, 1),   # 0.25 would be none: a rate above 0 gives at least one
    (10, 0.04, 1),  # 0.4 likewise: a researcher who asked for checks gets one
    (10, 0.16, 2),  # 1.6: up
    (10, 0.14, 1),  # 1.4: down
    (10, 0.15, 2),  # 1.5: up
    (25, 0.58, 15),  # 14.5 as written, up (the float product is 14.499999999999998)
    (10, 0.35, 4),  # 3.5: up
    (5, 0.9, 4),    # 4.5 would be 5: a batch is never all gold
    (2, 0.9, 1),
    (1, 0.5, 0),    # a batch of one holds no gold
    (5, 0.0, 0),
])
def test_a_full_batch_holds_the_rate_rounded_half_up_at_least_one_never_all_gold(per_batch, rate, gold):
    assert gold_per_batch(per_batch, rate) == gold


def test_a_short_batch_gets_gold_in_proportion_never_more_than_a_full_one():
    # Batches of 10 at 0.15: 2 gold items with 8 regular ones; fewer regular ones get
    # round-half-up(regular × 0.15 / 0.85), at least one: 2 → 0.35 → 1, 3 → 0.53 → 1,
    # 6 → 1.06 → 1, 7 → 1.24 → 1.
    assert [gold_with_regular(n, per_batch=10, rate=0.15) for n in (0, 2, 3, 6, 7, 8, 9)] == [
        0, 1, 1, 1, 1, 2, 2]
    # Likert passages of 3 candidates in batches of 10 at 0.1: one gold item each, not none.
    assert gold_with_regular(3, per_batch=10, rate=0.1) == 1
    # 0.5 of 4: 2 gold with 2 regular; 1 regular gets 1 (1 × 0.5 / 0.5).
    assert gold_with_regular(1, per_batch=4, rate=0.5) == 1
    assert gold_with_regular(3, per_batch=5, rate=0.0) == 0


def test_the_text_says_what_the_rate_gives_a_batch():
    assert gold_per_batch_text(5, 0.15) == "1 gold item in each batch of 5 (20%; gold rate 0.15)"
    assert gold_per_batch_text(10, 0.35) == (
        "4 gold items in each batch of 10 (40%; gold rate 0.35)")
