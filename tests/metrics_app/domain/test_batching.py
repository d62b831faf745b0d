import pytest

from metrics_app.domain.batching import length_sorted_batches


def padded_tokens(batch, lengths):
    return len(batch) * max(lengths[i] for i in batch)


def test_token_budget_keeps_long_inputs_in_small_batches_and_short_ones_in_large():
    lengths = [300] * 9 + [10] * 40
    batches = length_sorted_batches(lengths, max_rows=32, max_tokens=1024)
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    long_batches = [b for b in batches if lengths[b[0]] == 300]
    assert [len(b) for b in long_batches] == [3, 3, 3]  # 3 × 300 ≤ 1024 < 4 × 300
    short_batches = [b for b in batches if lengths[b[0]] == 10]
    assert [len(b) for b in short_batches] == [32, 8]  # the row cap binds before the budget
    assert all(padded_tokens(b, lengths) <= 1024 for b in batches)


def test_an_input_longer_than_the_budget_gets_a_batch_of_its_own():
    lengths = [5, 2000, 6, 1500]
    batches = length_sorted_batches(lengths, max_rows=8, max_tokens=1024)
    assert batches[:2] == [[1], [3]]
    assert sorted(batches[2]) == [0, 2]


def test_without_a_budget_only_rows_count():
    lengths = [500] * 5
    assert [len(b) for b in length_sorted_batches(lengths, 2)] == [2, 2, 1]


def test_batches_are_longest_first_and_of_similar_length():
    lengths = [3, 90, 4, 88, 5, 91, 2]
    batches = length_sorted_batches(lengths, max_rows=2, max_tokens=10_000)
    widths = [max(lengths[i] for i in b) for b in batches]
    assert widths == sorted(widths, reverse=True)
    assert sorted(lengths[i] for i in batches[0]) == [90, 91]


def test_empty_input_and_bad_row_cap():
    assert length_sorted_batches([], 4, 1024) == []
    with pytest.raises(ValueError, match="max_rows"):
        length_sorted_batches([1, 2], 0)


def test_length_sorted_batches_cover_every_index_once():
    lengths = [5, 50, 7, 49, 6, 51]
    batches = length_sorted_batches(lengths, 2)
    assert sorted(i for b in batches for i in b) == list(range(6))
    assert [sorted(lengths[i] for i in b) for b in batches] == [[50, 51], [7, 49], [5, 6]]


def test_the_cpu_gets_the_token_budget_and_an_accelerator_wide_batches():
    from metrics_app.domain.batching import DEFAULT_MAX_BATCH_TOKENS, batch_token_budget

    assert batch_token_budget("cpu") == DEFAULT_MAX_BATCH_TOKENS
    assert batch_token_budget("cuda") is None
