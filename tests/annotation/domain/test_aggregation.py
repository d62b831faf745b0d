import pytest

from annotation.domain.aggregation import majority_by_item, mean_by_item, znormalize_by_annotator


def test_mean_by_item_averages_every_judgment():
    triples = [("w1", "i1", 5), ("w2", "i1", 3), ("w1", "i2", 1)]
    assert mean_by_item(triples) == {"i1": 4.0, "i2": 1.0}


def test_znormalize_removes_annotator_offsets():
    # w2 scores everything exactly 2 points higher than w1: after z-normalization they agree.
    triples = [("w1", "a", 1), ("w1", "b", 3), ("w2", "a", 3), ("w2", "b", 5)]
    normalized = {(w, i): s for w, i, s in znormalize_by_annotator(triples)}
    assert normalized[("w1", "a")] == pytest.approx(normalized[("w2", "a")])
    assert normalized[("w1", "a")] == pytest.approx(-1.0)
    assert normalized[("w1", "b")] == pytest.approx(1.0)


def test_znormalize_annotator_without_spread_gets_zero():
    assert znormalize_by_annotator([("w", "a", 4), ("w", "b", 4)]) == [("w", "a", 0.0), ("w", "b", 0.0)]


def test_majority_reports_ties():
    result = majority_by_item([("i1", "A"), ("i1", "A"), ("i1", "B"), ("i2", "A"), ("i2", "B")])
    assert result["i1"][0] == "A" and result["i1"][1] is False
    assert result["i2"][0] is None and result["i2"][1] is True
