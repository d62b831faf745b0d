"""Rank systems from pairwise judgments: Bradley–Terry with ties (Davidson 1970), cluster
bootstrap intervals, style control and robustness checks. Pure (numpy/scipy, no Django).

The model. For a vote between the system shown on the left, i, and the one on the right, j,
with d = θ_i − θ_j + γ + βᵀs (γ: the advantage of the left position, s: the difference in
style features, left minus right) and ν the tie parameter,

    P(left wins) = e^{d/2} / Z,  P(right wins) = e^{-d/2} / Z,  P(tie) = ν / Z,
    Z = e^{d/2} + e^{-d/2} + ν.

Without ties (ν = 0) it is Bradley–Terry: P(left wins) = σ(d), so θ is on the logit scale.
Every fit is penalized maximum likelihood with a weak Gaussian prior (`RIDGE`: sd 10 logits on
each θ, γ, β and log ν) that keeps a system that won or lost every vote finite and costs nothing
once there are a few votes per pair; the prior also centres θ (Σθ = 0).

The fit runs on counts: votes are aggregated into (left system, right system) rows × outcome,
so 1,000,000 votes become at most K(K−1) rows. The bootstrap resamples clusters (items, or
workers) by Poisson(1) weights on each cluster's counts and fits every round at once with a
batched Newton method. Style covariates vary per vote, so the style-controlled fit runs on the
votes themselves once, with cluster-robust (sandwich, by item) standard errors.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy import sparse, stats

RIDGE = 0.01
# A cluster bootstrap over fewer clusters than this says little (with 2 workers a quarter of
# the rounds drop one of them entirely); the interval is then left out, with the reason.
MIN_CLUSTERS = 5
MIN_STYLE_VOTES = 20
# The fit's memory grows as rounds × systems² and its time as rounds × systems³: 100 systems
# compared in every pair take minutes on two cores, a few thousand (a `system` that names the
# item, not the system) would exhaust the server's memory. More are refused, with the reason.
MAX_SYSTEMS = 100


def check_system_count(k: int) -> None:
    """THE cap on how many systems one fit reads (`MAX_SYSTEMS`), at every door that fits
    them: the leaderboard and adaptive pairing (whose design also grows with the square of the
    number of pairs). LeaderboardError, with the reason, beyond it."""
    if k > MAX_SYSTEMS:
        raise LeaderboardError(
            f"{k} systems: at most {MAX_SYSTEMS} can be ranked (the fit's cost grows with the "
            "cube of their number); check that each answer's `system` names the system that "
            "wrote it, not the item")


OUTCOMES = ("left", "right", "tie")
LEFT, RIGHT, TIE = 0, 1, 2
ELO_SCALE = 400 / np.log(10)  # an arena-style score: 1000 + ELO_SCALE · θ


class LeaderboardError(ValueError):
    """Votes that cannot be ranked; the message names what is wrong."""


@dataclass
class Votes:
    """One row per vote: the systems shown left and right (indices into `systems`), the
    outcome (LEFT, RIGHT or TIE), and the item and worker it belongs to (cluster codes).
    `style` holds per-vote feature differences (left minus right), one column per name."""

    systems: list[str]
    left: np.ndarray
    right: np.ndarray
    outcome: np.ndarray
    item: np.ndarray
    worker: np.ndarray
    style: np.ndarray | None = None
    style_names: list[str] = field(default_factory=list)

    def __post_init__(self):
        self.left = np.asarray(self.left, dtype=np.int64)
        self.right = np.asarray(self.right, dtype=np.int64)
        self.outcome = np.asarray(self.outcome, dtype=np.int64)
        self.item = np.asarray(self.item, dtype=np.int64)
        self.worker = np.asarray(self.worker, dtype=np.int64)
        n = len(self.left)
        for name in ("right", "outcome", "item", "worker"):
            if len(getattr(self, name)) != n:
                raise LeaderboardError(f"votes: {name} has {len(getattr(self, name))} entries, "
                                       f"left has {n}")
        k = len(self.systems)
        if n and (min(self.left.min(), self.right.min()) < 0
                  or max(self.left.max(), self.right.max()) >= k):
            raise LeaderboardError(f"votes: a system index is outside 0..{k - 1}")
        if n and np.any(self.left == self.right):
            raise LeaderboardError("votes: a system is compared with itself")
        if n and not np.isin(self.outcome, (LEFT, RIGHT, TIE)).all():
            raise LeaderboardError("votes: outcome must be 0 (left), 1 (right) or 2 (tie)")
        if self.style is not None:
            self.style = np.asarray(self.style, dtype=float).reshape(n, -1)
            if self.style.shape[1] != len(self.style_names):
                raise LeaderboardError("votes: style has "
                                       f"{self.style.shape[1]} columns for "
                                       f"{len(self.style_names)} names")

    def __len__(self) -> int:
        return len(self.left)

    def subset(self, mask: np.ndarray) -> Votes:
        return Votes(self.systems, self.left[mask], self.right[mask], self.outcome[mask],
                     self.item[mask], self.worker[mask],
                     None if self.style is None else self.style[mask], list(self.style_names))


# --- the batched Davidson / Bradley–Terry fit ------------------------------------------------

@dataclass
class Fit:
    """Parameters per round (B rounds): `beta` (B, P) over the design's columns, `eta` (B,)
    = log ν (−inf without ties), `covariance` (P[+1] square, round 0) from the curvature."""

    beta: np.ndarray
    eta: np.ndarray
    covariance: np.ndarray
    ties: bool
    iterations: int


def _probabilities(d: np.ndarray, eta: np.ndarray | None):
    half = d / 2
    # Stabilized: divide numerator and denominator by e^{|d|/2}.
    top = np.abs(half)
    ew, el = np.exp(half - top), np.exp(-half - top)
    et = np.zeros_like(d) if eta is None else np.exp(eta[..., None] - top)
    z = ew + el + et
    return ew / z, el / z, et / z, np.log(z) + top


def _loglik(beta, eta, design, counts, ties, ridge):
    d = beta @ design.T
    pw, pl, pt, logz = _probabilities(d, eta if ties else None)
    w, lo, t = counts[..., 0], counts[..., 1], counts[..., 2]
    n = w + lo + t
    ll = ((w - lo) * d / 2 - n * logz).sum(-1)
    if ties:
        ll = ll + (t.sum(-1) * eta)
    penalty = ridge / 2 * (beta ** 2).sum(-1) + (ridge / 2 * eta ** 2 if ties else 0)
    return ll - penalty


def fit_counts(design: np.ndarray, counts: np.ndarray, *, ties: bool, ridge: float = RIDGE,
               max_iter: int = 100, tol: float = 1e-9, start: np.ndarray | None = None) -> Fit:
    """Penalized maximum likelihood of the Davidson model (Bradley–Terry when `ties` is False)
    for B sets of counts at once. `design` (R, P): each row's d = design @ β; `counts`
    (B, R, 3) or (R, 3): left wins, right wins, ties of each row (weights may be fractional)."""
    design = np.asarray(design, dtype=float)
    counts = np.asarray(counts, dtype=float)
    single = counts.ndim == 2
    if single:
        counts = counts[None]
    b, r, p = counts.shape[0], design.shape[0], design.shape[1]
    if counts.shape[1:] != (r, 3):
        raise LeaderboardError(f"counts must be (B, {r}, 3), got {counts.shape}")
    q = p + 1 if ties else p
    theta = np.zeros((b, q)) if start is None else np.broadcast_to(start, (b, q)).copy()
    n = counts.sum(-1)
    w, lo, t = counts[..., 0], counts[..., 1], counts[..., 2]
    eye = np.eye(q) * ridge

    def split(x):
        return (x[:, :p], x[:, p]) if ties else (x, np.full(len(x), -np.inf))

    current = _loglik(*split(theta), design, counts, ties, ridge)
    # The bootstrap rounds' Hessians Σ_r h_r x_r x_rᵀ as one product with the rows' outer
    # products (a pair-table row has 3 nonzeros): B·R·9 operations, where an einsum over the
    # dense rows took B·R·P² (minutes at 50 systems compared in every pair).
    outer = _row_outer_products(design) if b > 1 else None
    iterations = 0
    for iterations in range(1, max_iter + 1):  # noqa: B007 - reported in Fit
        beta, eta = split(theta)
        d = beta @ design.T
        pw, pl, pt, _ = _probabilities(d, eta if ties else None)
        half_diff = (pw - pl) / 2
        g_d = (w - lo) / 2 - n * half_diff
        h_dd = n * ((pw + pl) / 4 - half_diff ** 2)
        grad = np.empty((b, q))
        grad[:, :p] = g_d @ design - ridge * beta
        if b == 1:  # one fit over many rows (the style fit): a BLAS product, not einsum
            hess = ((design * h_dd[0][:, None]).T @ design)[None]
        else:
            hess = (outer @ h_dd.T).T.reshape(b, p, p)
        if ties:
            grad[:, p] = (t - n * pt).sum(-1) - ridge * eta
            h_de = -n * pt * half_diff
            cross = h_de @ design
            hess_full = np.empty((b, q, q))
            hess_full[:, :p, :p] = hess
            hess_full[:, :p, p] = cross
            hess_full[:, p, :p] = cross
            hess_full[:, p, p] = (n * (pt - pt ** 2)).sum(-1)
            hess = hess_full
        hess = hess + eye
        step = np.linalg.solve(hess, grad[..., None])[..., 0]
        scale = np.ones(b)
        for _ in range(30):
            candidate = theta + scale[:, None] * step
            value = _loglik(*split(candidate), design, counts, ties, ridge)
            worse = ~(value >= current - 1e-12)
            if not worse.any():
                break
            scale[worse] /= 2
        theta, current = candidate, value
        if np.max(np.abs(scale[:, None] * step)) < tol:
            break
    beta, eta = split(theta)
    d = beta[0] @ design.T
    pw, pl, pt, _ = _probabilities(d[None], eta[:1] if ties else None)
    fisher = _information(design, n[0], pw[0], pl[0], pt[0], ties) + eye
    covariance = np.linalg.inv(fisher)
    return Fit(beta=beta, eta=eta, covariance=covariance, ties=ties, iterations=iterations)


def _row_outer_products(design: np.ndarray) -> sparse.csr_matrix:
    """(P·P, R): column r holds the flattened outer product x_r x_rᵀ of design row r."""
    r, p = design.shape
    nonzero = design != 0
    m = max(int(nonzero.sum(1).max()), 1) if r else 1
    cols = np.argsort(~nonzero, axis=1, kind="stable")[:, :m]  # a row's nonzeros first
    vals = np.take_along_axis(design, cols, 1)  # padded with zeros past a row's nonzeros
    cell = (cols[:, :, None] * p + cols[:, None, :]).reshape(r, -1)
    value = (vals[:, :, None] * vals[:, None, :]).reshape(r, -1)
    row = np.repeat(np.arange(r), m * m)
    return sparse.csr_matrix((value.ravel(), (cell.ravel(), row)), shape=(p * p, r))


def _information(design, n, pw, pl, pt, ties):
    half_diff = (pw - pl) / 2
    h_dd = n * ((pw + pl) / 4 - half_diff ** 2)
    info = (design * h_dd[:, None]).T @ design
    if not ties:
        return info
    p = design.shape[1]
    full = np.zeros((p + 1, p + 1))
    full[:p, :p] = info
    cross = (-n * pt * half_diff) @ design
    full[:p, p] = full[p, :p] = cross
    full[p, p] = (n * (pt - pt ** 2)).sum()
    return full


def _centred_se(covariance: np.ndarray, k: int,
                groups: list[list[int]] | None = None) -> np.ndarray:
    """Standard errors of the centred strengths (Σθ = 0 within each group of systems compared
    with each other): the level of θ is fixed by the prior alone, so the raw covariance carries
    a large variance along (1, …, 1) of each group that no contrast reads."""
    centre = np.zeros((k, k))
    for members in groups or [list(range(k))]:
        centre[np.ix_(members, members)] = np.eye(len(members)) - 1 / len(members)
    return np.sqrt(np.clip(np.diag(centre @ covariance[:k, :k] @ centre), 0, None))


# --- aggregation -------------------------------------------------------------------------------

@dataclass
class PairTable:
    """Votes aggregated per (left, right) row: `rows` (R, 2) system indices, `design` (R, K+1)
    (θ_left − θ_right and the position column), `counts` (R, 3), `row_of_vote` (n,)."""

    rows: np.ndarray
    design: np.ndarray
    counts: np.ndarray
    row_of_vote: np.ndarray


def factorize(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(distinct values sorted, code of each value): by counting when the values are small
    non-negative integers (ids, pair keys; a tenth of np.unique's time on a million), else by
    sorting."""
    values = np.asarray(values)
    if len(values) and values.dtype.kind in "iu" and values.min() >= 0 \
            and values.max() < 4 * len(values) + 4096:
        present = np.bincount(values) > 0
        codes = np.cumsum(present) - 1
        return np.nonzero(present)[0], codes[values]
    return np.unique(values, return_inverse=True)


def pair_table(votes: Votes, *, position: bool = True) -> PairTable:
    k = len(votes.systems)
    key = votes.left * k + votes.right
    uniq, row_of_vote = factorize(key)
    rows = np.stack([uniq // k, uniq % k], axis=1)
    design = np.zeros((len(uniq), k + (1 if position else 0)))
    design[np.arange(len(uniq)), rows[:, 0]] = 1
    design[np.arange(len(uniq)), rows[:, 1]] = -1
    if position:
        design[:, k] = 1
    counts = np.bincount(row_of_vote * 3 + votes.outcome,
                         minlength=3 * len(uniq)).reshape(-1, 3).astype(float)
    return PairTable(rows=rows, design=design, counts=counts, row_of_vote=row_of_vote)


@dataclass
class ClusterCounts:
    """Each distinct cluster signature (its counts per row and outcome, a sparse row of R·3)
    once, with how many clusters share it. Summed Poisson(1) weights of m identical clusters
    are Poisson(m), so the bootstrap draws one weight per signature: 500,000 items of two
    votes have a few thousand signatures."""

    signatures: sparse.csr_matrix
    multiplicity: np.ndarray
    n_clusters: int


def cluster_counts(table: PairTable, outcome: np.ndarray, cluster: np.ndarray, *,
                   system_order: np.ndarray | None = None,
                   position: bool = True) -> ClusterCounts:
    """The distinct cluster signatures, in an order that depends on the votes alone.

    The seeded bootstrap draws one weight per signature in this order, so the order must not
    follow anything the data do not mean: not the clusters' ids (database keys, which follow
    the order items and workers were imported: the same judgments imported in another order,
    or under other item or worker names, gave other intervals), nor the systems' indices (their
    names). Signatures are ordered by a fixed random projection of their counts written in
    canonical columns: the systems in `system_order` (each system's place, e.g. by strength),
    and, without a position effect (`position` False: left and right mean nothing), each pair
    from the system placed first, its outcome flipped with it."""
    if system_order is None:
        system_order = np.arange(int(table.rows.max()) + 1 if len(table.rows) else 1)
    place = np.asarray(system_order, dtype=np.int64)
    k = len(place)
    left, right = place[table.rows[:, 0]], place[table.rows[:, 1]]
    swap = (left > right) if not position else np.zeros(len(left), dtype=bool)
    low, high = np.where(swap, right, left), np.where(swap, left, right)
    vote_swapped = swap[table.row_of_vote]
    canonical_outcome = np.where(vote_swapped & (outcome != TIE), LEFT + RIGHT - outcome,
                                 outcome)
    canonical_cols = (low * k + high)[table.row_of_vote] * 3 + canonical_outcome
    codes, cluster_index = factorize(cluster)
    cols = table.row_of_vote * 3 + outcome
    matrix = sparse.csr_matrix((np.ones(len(cols)), (cluster_index, cols)),
                               shape=(len(codes), len(table.rows) * 3))
    matrix.sum_duplicates()
    canonical = sparse.csr_matrix((np.ones(len(cols)), (cluster_index, canonical_cols)),
                                  shape=(len(codes), k * k * 3))
    canonical.sum_duplicates()
    canonical.sort_indices()  # the same terms summed in the same order: bit-identical keys
    # Identical rows give identical projections; two random projections tell different rows
    # apart with probability 1. np.unique returns them sorted by key: the canonical order.
    probe = np.random.default_rng(12345).random((canonical.shape[1], 2))
    keys = np.ascontiguousarray(canonical @ probe).view(np.complex128)[:, 0]
    _, first, multiplicity = np.unique(keys, return_index=True, return_counts=True)
    return ClusterCounts(signatures=matrix[first], multiplicity=multiplicity,
                         n_clusters=len(codes))


def bootstrap_counts(by_cluster: ClusterCounts, rounds: int, rng: np.random.Generator,
                     chunk: int = 50) -> np.ndarray:
    """(rounds, R, 3) counts reweighted by independent Poisson(1) weights per cluster."""
    transposed = by_cluster.signatures.T.tocsr()
    out = np.empty((rounds, transposed.shape[0]))
    lam = by_cluster.multiplicity.astype(float)[:, None]
    for start in range(0, rounds, chunk):
        stop = min(rounds, start + chunk)
        weights = rng.poisson(lam, size=(len(lam), stop - start)).astype(float)
        out[start:stop] = (transposed @ weights).T
    return out.reshape(rounds, -1, 3)


# --- the leaderboard ---------------------------------------------------------------------------

def _anchored(rounds: np.ndarray, theta: np.ndarray, components: list[list[int]],
              measured: np.ndarray) -> np.ndarray:
    """Bootstrap strengths (rounds × systems) shifted, group by group, so that in every round
    the mean strength of the group's `measured` systems is the point estimate's. The level of
    a group is the prior's choice (Σθ = 0): a system whose maximum-likelihood strength does not
    exist in some rounds (one that never lost once its few items are drawn one way) is held
    there by the prior alone, at a distance set by the prior's spread, and the centring passed
    that swing to every other system of its group (two systems 40-20 over 60 votes read
    [-1.08, 1.79] beside a third seen twice, [-2.39, 3.09] with a wider prior). Placed by the
    systems the rounds measure, an interval is that of the votes among them. A group whose
    systems are all measured, or none, is left as fitted. `measured` (K,) or, per round,
    (rounds, K): a round is placed by the systems it measures (`_round_open`: those of its
    main strongly connected set)."""
    out = rounds
    measured = np.broadcast_to(measured, rounds.shape)
    for members in components:
        members = np.asarray(members)
        held = measured[:, members]
        n = held.sum(axis=1)
        moved = (n > 0) & (n < len(members))
        if moved.any():
            if out is rounds:
                out = rounds.copy()
            safe = np.maximum(n, 1)
            shift = (held @ theta[members] - (held * rounds[:, members]).sum(axis=1)) / safe
            out[:, members] += np.where(moved, shift, 0.0)[:, None]
    return out


def _interval(samples: np.ndarray, level: float) -> np.ndarray:
    alpha = (1 - level) / 2
    return np.quantile(samples, [alpha, 1 - alpha], axis=0).T


# Strengths closer than this (logits) are equal: two systems with the same record fit to
# values a rounding error apart, and ranks 1 and 2 (and "the top") went by which was listed
# first.
EQUAL_STRENGTH = 1e-8


def _ranks(theta: np.ndarray, group: np.ndarray | None = None) -> np.ndarray:
    """Rank 1 is the strongest; each system's rank = 1 + systems strictly stronger (by more
    than `EQUAL_STRENGTH`: equal systems share a rank) in its `group` only (systems never
    compared, even through others, have no order)."""
    stronger = theta[..., None, :] > theta[..., :, None] + EQUAL_STRENGTH
    if group is not None:
        stronger &= group[:, None] == group[None, :]
    return 1 + stronger.sum(-1)


def _overlap_rank_interval(s: int, low: np.ndarray, high: np.ndarray,
                           members: list[int]) -> list[int]:
    """The ranks `s` can take in its group by its interval against the others' (None bounds
    open): from 1 + those surely stronger to the group's size − those surely weaker."""
    low = np.array([-np.inf if x is None else x for x in low], dtype=float)
    high = np.array([np.inf if x is None else x for x in high], dtype=float)
    others = [j for j in members if j != s]
    surely_stronger = sum(low[j] > high[s] for j in others)
    surely_weaker = sum(high[j] < low[s] for j in others)
    return [1 + int(surely_stronger), len(members) - int(surely_weaker)]


def _components(table: PairTable, k: int) -> list[list[int]]:
    """The connected components of the comparison graph (systems as nodes, a pair compared at
    least once as an edge)."""
    from scipy.sparse.csgraph import connected_components

    graph = sparse.coo_matrix((np.ones(len(table.rows)), (table.rows[:, 0], table.rows[:, 1])),
                              shape=(k, k))
    n, labels = connected_components(graph, directed=False)
    return [np.nonzero(labels == c)[0].tolist() for c in range(n)]


def _unbounded_sets(rows: np.ndarray, counts: np.ndarray, k: int
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(above, below, linked): systems whose strength has no finite maximum-likelihood value
    upwards or downwards, and each system's strongly connected set (`linked`: the gap between
    two systems is bounded exactly when they share one; otherwise raising every system that
    beat or tied one of them, even through others, widens it). The likelihood has a finite maximum only where the graph of "beat or tied at
    least once" (a tie both ways: it keeps a Davidson difference finite) is strongly connected
    (Ford 1957). Otherwise a set of systems that never lost a vote to the rest of its group
    (a source of the graph's condensation) can move up without bound, a set that never beat
    the rest down (a sink); a set between such sets, both ways. A single system that never lost
    is the smallest such set; two systems that split their votes and won every vote against
    two others are the next. A system that won every decided vote but tied some is not, while
    the tie parameter is held (`ties_grow_with_gaps` says when it is not): its ties bound it
    (Davidson's P(tie) vanishes as the difference grows). `rows` (R, 2) and `counts` (R, 3):
    a pair table's."""
    from scipy.sparse.csgraph import connected_components

    i, j = rows[:, 0], rows[:, 1]
    w, lo, t = (counts[:, c] > 0 for c in range(3))
    src = np.concatenate([i[w], j[lo], i[t], j[t]])
    dst = np.concatenate([j[w], i[lo], j[t], i[t]])
    graph = sparse.coo_matrix((np.ones(len(src)), (src, dst)), shape=(k, k))
    n, scc = connected_components(graph, directed=True, connection="strong")
    across = scc[src] != scc[dst]
    beats_others = np.zeros(n, dtype=bool)
    beaten_by_others = np.zeros(n, dtype=bool)
    beats_others[scc[src[across]]] = True
    beaten_by_others[scc[dst[across]]] = True
    # A set that beat others is open above, one beaten by others below; a set between sets
    # that always beat it and sets it always beat, both ways.
    return beats_others[scc], beaten_by_others[scc], scc


def ties_grow_with_gaps(rows: np.ndarray, counts: np.ndarray, k: int) -> bool:
    """Whether the tie parameter and the gaps can grow without bound together: every decided
    vote agrees with one order of the systems, spaced so that each winner's gap over its loser
    is at least the spacing of every tied pair (a strength per system with θ_w − θ_l ≥ 1 for
    every decided vote and |θ_i − θ_j| ≤ 1 for every tie). Along that direction, with log ν
    growing at half the rate, every vote's probability rises: no finite maximum, though each
    tie bounds its own pair (`_unbounded_sets`). Two systems, 20 wins and 10 ties to none, are
    the smallest case; a pair that split its decided votes anywhere on the board holds ν and
    rules it out. The constraints are difference constraints: feasible exactly when their
    graph (winner → loser weighing −1, a tie +1 both ways) has no negative cycle (Bellman–Ford
    from a virtual source)."""
    i, j = rows[:, 0], rows[:, 1]
    w, lo, t = (counts[:, c] > 0 for c in range(3))
    if not t.any() or not (w | lo).any():
        return False  # without ties ν is not fitted; without decided votes nothing separates
    if (w & lo).any():
        return False  # a pair that split its decided votes: a negative cycle of two
    src = np.concatenate([i[w], j[lo], i[t], j[t]])
    dst = np.concatenate([j[w], i[lo], j[t], i[t]])
    cost = np.concatenate([-np.ones(int(w.sum() + lo.sum())), np.ones(2 * int(t.sum()))])
    return _difference_feasible(src, dst, cost, k)


def _difference_feasible(src: np.ndarray, dst: np.ndarray, cost: np.ndarray, k: int) -> bool:
    """Whether x_dst ≤ x_src + cost (every edge) has a solution: no negative cycle
    (Bellman–Ford from a virtual source)."""
    distance = np.zeros(k)
    for _ in range(k):
        relaxed = distance.copy()
        np.minimum.at(relaxed, dst, distance[src] + cost)
        if np.array_equal(relaxed, distance):
            return True  # settled: a solution, no negative cycle
        distance = relaxed
    return False  # still relaxing after k rounds: a negative cycle


def _position_may_move(rows: np.ndarray, counts: np.ndarray, k: int) -> bool:
    """Whether the position effect can grow along a direction of recession at all
    (`_recession`): some γ = ±1 leaves the decided votes' constraints (θ_l − θ_r ≥ −γ for a
    left win, ≤ −γ for a right win; ties and ν only narrow them) a solution. A pair won on the
    right in both orders rules out γ = 1, one won on the left in both orders γ = −1: on most
    boards both exist, and the linear programs are not needed."""
    i, j = rows[:, 0], rows[:, 1]
    w, lo = counts[:, 0] > 0, counts[:, 1] > 0
    src = np.concatenate([i[w], j[lo]])
    dst = np.concatenate([j[w], i[lo]])
    return any(_difference_feasible(src, dst, np.concatenate(
        [np.full(int(w.sum()), gamma), np.full(int(lo.sum()), -gamma)]), k)
        for gamma in (1.0, -1.0))


def _open_sides(rows: np.ndarray, counts: np.ndarray, k: int
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray, bool]:
    """(above, below, linked, loose) of one set of counts (the votes', or one bootstrap
    round's): the systems with no finite maximum upwards and downwards (`_unbounded_sets`,
    and, where the tie parameter grows with the gaps, `ties_grow_with_gaps`, every system
    that won a decided vote above and every one that lost one below), each system's strongly
    connected set, and whether the gaps grow with ν."""
    above, below, linked = _unbounded_sets(rows, counts, k)
    loose = ties_grow_with_gaps(rows, counts, k)
    if loose:
        above |= (np.bincount(rows[:, 0], counts[:, 0], k)
                  + np.bincount(rows[:, 1], counts[:, 1], k)) > 0
        below |= (np.bincount(rows[:, 0], counts[:, 1], k)
                  + np.bincount(rows[:, 1], counts[:, 0], k)) > 0
    return above, below, linked, loose


# Numerical slack of the recession-direction programs (`_recession`): a direction's entries are
# at most 1 (the programs' box), so a strength that moves along one moves by far more.
RECESSION_TOL = 1e-7


def _recession(rows: np.ndarray, counts: np.ndarray, k: int, components: list[list[int]], *,
               ties: bool, position: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(above, below, gap_open): the systems whose strength (centred in its group) has no
    finite maximum-likelihood value upwards and downwards, and (K, K) which pairs' gaps have
    none, read from the likelihood's directions of recession. The log-likelihood is concave in
    (θ, γ, log ν); its maximum is finite exactly when every direction along which no vote's
    probability falls moves nothing (Davidson's P(left wins) falls along a direction that
    lowers d = θ_left − θ_right + γ or raises log ν faster than d/2; a tie's, one that raises
    |d| faster than 2·log ν). Those directions x = (θ, γ, η = the rate of log ν) form the cone
    d ≥ 2η for every vote won on the left, d ≤ −2η for every vote won on the right, |d| ≤ 2η
    for every tie, η ≥ 0 (η = 0 where ν is not fitted, γ = 0 where the position effect is
    not), θ centred in each group. A linear program finds a point of its relative interior
    (the votes' inequalities it cannot make strict are the equalities every direction keeps:
    a strength or a gap moves along some direction exactly when it is not fixed by them), and
    two more per moving strength, over the cone boxed to |x| ≤ 1, say which ways it moves."""
    from scipy.optimize import linprog

    i, j = rows[:, 0], rows[:, 1]
    won, lost, tied = (counts[:, c] > 0 for c in range(3))
    q = k + int(position) + int(ties)
    d = np.zeros((len(rows), q))
    d[np.arange(len(rows)), i] = 1
    d[np.arange(len(rows)), j] = -1
    if position:
        d[:, k] = 1
    eta = np.zeros(q)
    if ties:
        eta[-1] = 2
    # Each row a of `cone`: a·x ≤ 0.
    cone = np.concatenate([eta - d[won], eta + d[lost], d[tied] - eta, -d[tied] - eta])
    centre = np.zeros((len(components), q))
    for g, members in enumerate(components):
        centre[g, members] = 1
    m = len(cone)
    free = [(None, None)] * (k + int(position)) + [(0, None)] * int(ties)
    # The relative interior: maximise each inequality's slack (up to 1) over the unboxed cone,
    # where scaling a direction up makes every slack that can be positive reach 1.
    interior = linprog(np.concatenate([np.zeros(q), -np.ones(m)]),
                       A_ub=sparse.hstack([sparse.csr_matrix(cone), sparse.eye(m)]).tocsr(),
                       b_ub=np.zeros(m),
                       A_eq=sparse.hstack([sparse.csr_matrix(centre),
                                           sparse.csr_matrix((len(centre), m))]).tocsr(),
                       b_eq=np.zeros(len(centre)), bounds=free + [(0, 1)] * m, method="highs")
    if not interior.success:  # never seen: the program is feasible (x = 0) and bounded
        raise LeaderboardError(f"the check of which strengths are bounded failed: "
                               f"{interior.message}")
    equal = interior.x[q:] < 0.5  # slacks are 0 or 1 at the optimum: 0 where none can be
    fixed = np.vstack([cone[equal], centre])
    # vh: all q right singular vectors (U only as large as it must be).
    _u, singular, vh = np.linalg.svd(fixed, full_matrices=len(fixed) < q)
    rank = int((singular > 1e-9 * max(singular.max(initial=0), 1)).sum())
    span = vh[rank:].T  # the directions those equalities allow
    moves = np.linalg.norm(span[:k], axis=1) > 1e-6
    gap_open = np.linalg.norm(span[:k, None] - span[None, :k], axis=2) > 1e-6
    above, below = np.zeros(k, dtype=bool), np.zeros(k, dtype=bool)
    box = [(-1, 1)] * (k + int(position)) + [(0, 1)] * int(ties)
    for s in np.flatnonzero(moves):
        for sign, side in ((1, above), (-1, below)):
            objective = np.zeros(q)
            objective[s] = -sign
            far = linprog(objective, A_ub=cone, b_ub=np.zeros(m), A_eq=centre,
                          b_eq=np.zeros(len(centre)), bounds=box, method="highs")
            side[s] = bool(far.success) and -far.fun > RECESSION_TOL
    return above, below, gap_open


def _position_open(rows: np.ndarray, counts: np.ndarray, k: int, components: list[list[int]],
                   *, ties: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(above, below, gap_open) that the position effect opens: the sides and gaps with no
    finite maximum once γ is fitted (`_recession`) that have one with γ held at 0. Held at 0,
    the graph rules (`_open_sides`) give them; fitted, γ can grow with the gaps (every vote
    that would have bounded a gap was won by the answer on the side γ favours), so strengths
    that the votes seemed to bound are the prior's. (The bootstrap rounds keep the graph
    rules, `_round_open`.)"""
    none = np.zeros(k, dtype=bool)
    if not len(rows) or not _position_may_move(rows, counts, k):
        return none, none, np.zeros((k, k), dtype=bool)
    up, down, gaps = _recession(rows, counts, k, components, ties=ties, position=True)
    if not (up.any() or down.any() or gaps.any()):
        return up, down, gaps
    held_up, held_down, held_gaps = _recession(rows, counts, k, components, ties=ties,
                                               position=False)
    return up & ~held_up, down & ~held_down, gaps & ~held_gaps


def _round_open(rows: np.ndarray, counts: np.ndarray, k: int,
                components: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    """Per bootstrap round (`counts` (B, R, 3)), which systems have no finite strength above
    and below relative to the round's main strongly connected set of "beat or tied" in their
    group (the set with the most votes among its members): a system that beat (or tied) its
    way into the main set but was never beaten back by it is open above, one the main set
    reaches but never beat it back below, one neither way both. In such a round its strength
    is the prior's; the main set's are the votes' (each round is placed by them, `_anchored`).
    Where the tie parameter grows with the gaps (`ties_grow_with_gaps`) nothing is held:
    every system that won a decided vote is open above and every one that lost one below.
    The position effect is not read here: a round where only its growth frees a strength
    (`_position_open`, which the point fit uses; a linear program per round would cost more
    than the fit) keeps that strength's percentile, the prior's in that round."""
    from scipy.sparse.csgraph import breadth_first_order, connected_components

    up = np.zeros((len(counts), k), dtype=bool)
    down = np.zeros((len(counts), k), dtype=bool)
    i, j = rows[:, 0], rows[:, 1]
    for b, round_counts in enumerate(counts):
        if ties_grow_with_gaps(rows, round_counts, k):
            above, below, _linked, _loose = _open_sides(rows, round_counts, k)
            up[b], down[b] = above, below
            continue
        w, lo, t = (round_counts[:, c] > 0 for c in range(3))
        src = np.concatenate([i[w], j[lo], i[t], j[t]])
        dst = np.concatenate([j[w], i[lo], j[t], i[t]])
        graph = sparse.csr_matrix((np.ones(len(src)), (src, dst)), shape=(k, k))
        _n, linked = connected_components(graph, directed=True, connection="strong")
        inside = round_counts.sum(1) * (linked[i] == linked[j])
        votes_of = np.bincount(i, round_counts.sum(1), k) + np.bincount(j, round_counts.sum(1), k)
        for members in components:
            members = np.asarray(members)
            sets = np.unique(linked[members])
            if len(sets) < 2:
                continue
            key = [(np.bincount(linked[i], inside, linked.max() + 1)[c],
                    votes_of[members[linked[members] == c]].sum(), -c) for c in sets]
            main = sets[max(range(len(sets)), key=key.__getitem__)]
            start = int(members[linked[members] == main][0])
            below_main = np.zeros(k, dtype=bool)
            below_main[breadth_first_order(graph, start, directed=True,
                                           return_predecessors=False)] = True
            above_main = np.zeros(k, dtype=bool)
            above_main[breadth_first_order(graph.T.tocsr(), start, directed=True,
                                           return_predecessors=False)] = True
            outside = members[linked[members] != main]
            up[b, outside] = ~below_main[outside] | above_main[outside]
            down[b, outside] = ~above_main[outside] | below_main[outside]
    return up, down


def win_matrices(table: PairTable, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Empirical (wins + ties/2) / votes of row system over column system, and vote counts."""
    wins = np.zeros((k, k))
    total = np.zeros((k, k))
    for (i, j), (w, lo, t) in zip(table.rows, table.counts, strict=True):
        wins[i, j] += w + t / 2
        wins[j, i] += lo + t / 2
        total[i, j] += w + lo + t
        total[j, i] += w + lo + t
    with np.errstate(invalid="ignore", divide="ignore"):
        rate = np.where(total > 0, wins / total, np.nan)
    return rate, total


def expected_matrices(theta: np.ndarray, eta: float | None,
                      group: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Model P(row beats column) and P(tie), without the position effect; NaN on the diagonal
    and between systems of different `group`s (never compared: the model says nothing)."""
    d = theta[:, None] - theta[None, :]
    pw, _pl, pt, _ = _probabilities(d, None if eta is None else np.array(eta))
    unknown = np.eye(len(theta), dtype=bool)
    if group is not None:
        unknown |= group[:, None] != group[None, :]
    pw[unknown] = np.nan
    pt[unknown] = np.nan
    return pw, pt


def canonical_votes(votes: Votes, *, position: bool) -> Votes:
    """The same votes in one canonical form, so the seeded bootstrap (and every tie broken by
    index) gives the same board whatever order the votes came in: the systems sorted by name,
    and, without a position effect (left and right then mean nothing), each vote oriented
    from the system listed first (its outcome and style differences flipped with it)."""
    order = np.argsort(np.array(votes.systems, dtype=object), kind="stable")
    index = np.empty(len(order), dtype=np.int64)
    index[order] = np.arange(len(order))
    left, right = index[votes.left], index[votes.right]
    outcome, style = votes.outcome, votes.style
    if not position:
        flip = left > right
        left, right = np.where(flip, right, left), np.where(flip, left, right)
        outcome = np.where(flip & (outcome != TIE), LEFT + RIGHT - outcome, outcome)
        if style is not None:
            style = np.where(flip[:, None], -style, style)
    return Votes([votes.systems[i] for i in order], left, right, outcome, votes.item,
                 votes.worker, style, list(votes.style_names))


def leaderboard(votes: Votes, *, rounds: int = 200, level: float = 0.95, seed: int = 0,
                ties: bool | None = None, position: bool = True, style: bool = True,
                robustness: bool = True) -> dict:
    """The leaderboard of `votes` as a JSON-ready dict (see the module docstring): systems
    with strengths, bootstrap intervals by item and by worker, rank intervals, the win-rate and
    expected-win matrices, style control and (when `robustness`) the robustness checks."""
    if len(votes) == 0:
        raise LeaderboardError("no votes to rank")
    if rounds < 1:
        raise LeaderboardError(f"rounds must be at least 1, got {rounds}")
    if not 0 < level < 1:
        raise LeaderboardError(f"level must be between 0 and 1, got {level}")
    k = len(votes.systems)
    check_system_count(k)
    votes = canonical_votes(votes, position=position)
    table = pair_table(votes, position=position)
    ties = bool((votes.outcome == TIE).any()) if ties is None else ties
    point = fit_counts(table.design, table.counts, ties=ties)
    theta = point.beta[0, :k]
    eta = float(point.eta[0]) if ties else None
    played = np.zeros((k, 3))
    for (i, j), (w, lo, t) in zip(table.rows, table.counts, strict=True):
        played[i] += (w, lo, t)
        played[j] += (lo, w, t)
    # Systems never compared, even through others, cannot be ranked against each other: each
    # group (a connected component of the comparison graph) is ranked on its own, the group
    # with the most votes first. Its strengths are centred within the group.
    components = sorted(_components(table, k),
                        key=lambda members: (-played[members].sum(), -theta[members].max()))
    group = np.empty(k, dtype=np.int64)
    for g, members in enumerate(components):
        group[members] = g
    # The systems' places for the bootstrap's order (`cluster_counts`): by strength, so it
    # does not follow their names; equal strengths (rare) by name.
    system_order = np.empty(k, dtype=np.int64)
    system_order[np.lexsort((np.arange(k), _ranks(theta)))] = np.arange(k)
    rng = np.random.default_rng(seed)
    intervals, rank_intervals, notes, n_clusters_of, round_strengths = {}, {}, {}, {}, {}
    round_open: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for scheme, cluster in (("item", votes.item), ("worker", votes.worker)):
        by_cluster = cluster_counts(table, votes.outcome, cluster,
                                    system_order=system_order, position=position)
        n_clusters = n_clusters_of[scheme] = by_cluster.n_clusters
        if n_clusters < MIN_CLUSTERS:
            notes[scheme] = (f"{n_clusters} {scheme}{'s' if n_clusters != 1 else ''}: too few "
                             f"for {scheme} bootstrap "
                             f"intervals (at least {MIN_CLUSTERS})")
            continue
        counts = bootstrap_counts(by_cluster, rounds, rng)
        counts = counts[counts.sum(axis=(1, 2)) > 0]  # a round that drew no cluster
        start = np.concatenate([point.beta[0], point.eta[:1]]) if ties else point.beta[0]
        fitted = fit_counts(table.design, counts, ties=ties, start=start)
        # Ranks within a group do not depend on its level: read before the rounds are placed.
        round_strengths[scheme] = fitted.beta[:, :k]
        round_open[scheme] = _round_open(table.rows, counts, k, components)
        rank_intervals[scheme] = _interval(_ranks(fitted.beta[:, :k], group), level)
    se = _centred_se(point.covariance, k, components)
    rank = _ranks(theta, group)
    # By group, then strongest first; equal strengths (a shared rank) by name.
    order = np.lexsort((-theta, rank, group))
    # A system that won (or lost) every vote, or a set of systems that never lost (never won)
    # a vote against the rest of their group, has no finite maximum-likelihood strength: only
    # the prior holds it, and every bootstrap round agrees. Its interval is open on that side
    # (None), not the narrow band the rounds would show. A tie bounds it: a system that won
    # every decided vote and tied some has a finite maximum (`_unbounded_sets`, Ford's
    # condition with a tie counted both ways); "never lost a decided vote" opened its interval
    # and said its strength had no bound.
    # Unless nothing holds the tie parameter: every decided vote agrees with one order of the
    # systems (`ties_grow_with_gaps`), and the gaps grow with ν, each tie notwithstanding.
    never_lost, never_won, linked, loose = _open_sides(table.rows, table.counts, k)
    loose = OPEN_GAP_TIES if loose else None
    if loose:
        notes["ties"] = ("every decided vote agrees with one order of the systems: the tie "
                         "parameter and the gaps between the systems can grow together without "
                         "bound, so the ties do not hold the strengths (only the prior does)")
    # Every decided vote went to one position (a judge that always picks the answer shown
    # first) and no tie holds the position effect: it grows without bound and explains every
    # vote, so the votes say nothing about the systems. Every round then refit strengths of
    # 0 with intervals [0, 0] and ranks 1-1: open instead, each rank any of its group's.
    decided = votes.outcome[votes.outcome != TIE]
    position_only = bool(position and not ties and len(decided)
                         and (decided == decided[0]).all())
    if position_only:
        loose = OPEN_GAP_POSITION
        never_lost |= played.sum(1) > 0
        never_won |= played.sum(1) > 0
        shown = "first (left)" if decided[0] == LEFT else "second (right)"
        notes["position"] = (f"every vote went to the answer shown {shown}: "
                             "the position effect explains them all, and they do not place "
                             "the systems")
    # The graph rules hold γ at 0. Fitted, the position effect can grow with the gaps where the
    # votes seemed to bound them (b tied c and beat a, a beat c, each decided vote won on the
    # left: the board said c 8.1 [4.94, 9.5], b −9.06 [−10.11, −5.87], closed, while the
    # likelihood rose without end as b fell, c rose and γ grew): `_position_open` reads the
    # likelihood's directions of recession with γ free, by linear programs.
    by_position = np.zeros(k, dtype=bool)
    position_gaps = None
    if position and not position_only:
        grow_up, grow_down, position_gaps = _position_open(table.rows, table.counts, k,
                                                           components, ties=ties)
        by_position = (grow_up & ~never_lost) | (grow_down & ~never_won)
        never_lost |= grow_up
        never_won |= grow_down
        if by_position.any():
            notes["position"] = (
                ", ".join(votes.systems[i] for i in np.argsort(-theta) if by_position[i])
                + ": with the position effect fitted, it and these systems' gaps to the "
                "others can move together without any vote becoming less likely, so the votes "
                "do not fix their strengths on the side their intervals leave open (only the "
                "prior holds them): either the likelihood keeps rising that way, or each pair "
                "was shown in one order only and the position effect cannot be told from the "
                "gap (show both orders, or read the board without the position effect)")
    # A system with no decided vote (only ties) is placed by how the tie rate depends on the
    # difference, which resampling cannot show: every round of all-tie votes fits the same
    # strengths, a [0, 0] interval beside a curvature se of several logits. Its interval is
    # the curvature's, θ ± z·se, and its rank interval the ranks that interval allows.
    only_ties = (played[:, 0] + played[:, 1] == 0) & (played[:, 2] > 0)
    unplayed = played.sum(1) == 0
    z = stats.norm.ppf(1 - (1 - level) / 2)
    # A system whose votes lie in fewer than MIN_CLUSTERS items (or come from fewer workers)
    # is, in each round, either absent (held at the prior's centre) or at the same ratio of
    # its few clusters: the percentile interval spans those two values, not the uncertainty of
    # its votes (one item of five votes, 3-2, gave [0.00, 1.15] beside an se of 0.69). Its
    # interval is the curvature's, as for a system with only ties.
    few = {}
    for scheme, cluster in (("item", votes.item), ("worker", votes.worker)):
        if scheme not in round_strengths:
            continue
        _codes, code = factorize(cluster)
        width = int(code.max()) + 1
        pairs = np.unique(np.concatenate([votes.left * width + code,
                                          votes.right * width + code]))
        clusters_of = np.bincount(pairs // width, minlength=k)
        few[scheme] = (clusters_of < MIN_CLUSTERS) & ~unplayed & ~only_ties
        if few[scheme].any():
            notes[f"{scheme}_systems"] = (
                ", ".join(votes.systems[i] for i in order
                          if few[scheme][i])
                + f": votes in fewer than {MIN_CLUSTERS} {scheme}s, too few to resample: the "
                f"{scheme} interval is the curvature's (strength ± {z:.2f}·se) and the rank "
                "interval the ranks it allows")
    for scheme, strengths in round_strengths.items():
        # A bound is the prior's where more than (1 − level)/2 of the rounds have no finite
        # maximum on that side: a system that lost one vote of ten is unbeaten in the 37% of
        # item rounds that leave that item out, held there by the prior alone, and the
        # percentile read that value ("[0.53, 4.06]"). Open instead, with the share said.
        # (A system placed by the curvature, with few clusters or only ties, keeps its
        # interval: its rounds are not read.)
        curvature = few[scheme] | only_ties | unplayed
        up_in_round, down_in_round = round_open[scheme]
        share_up, share_down = up_in_round.mean(axis=0), down_in_round.mean(axis=0)
        open_up = never_lost | ((share_up > (1 - level) / 2) & ~curvature)
        open_down = never_won | ((share_down > (1 - level) / 2) & ~curvature)
        by_rounds = [f"{votes.systems[i]} {what} in {share[i]:.0%} of the {scheme} rounds"
                     for i in order for flag, point_open, share, what in (
                         (open_up, never_lost, share_up, "never lost (no upper bound)"),
                         (open_down, never_won, share_down, "never won (no lower bound)"))
                     if flag[i] and not point_open[i]]
        if by_rounds:
            notes[f"{scheme}_rounds"] = (
                "; ".join(by_rounds) + ": those rounds' strengths are the prior's, not the "
                f"votes', so the {scheme} interval is open on that side")
        # Each round placed by the systems the rounds measure (`_anchored`): a system held
        # only by the prior in some rounds (its few clusters drawn one way) swung every
        # other strength of its group through the centring.
        measured = (~(few[scheme] | never_lost | never_won | only_ties | unplayed)[None, :]
                    & ~(up_in_round | down_in_round))
        intervals[scheme] = _interval(_anchored(strengths, theta, components, measured),
                                      level).astype(object)
        intervals[scheme][few[scheme], 0] = theta[few[scheme]] - z * se[few[scheme]]
        intervals[scheme][few[scheme], 1] = theta[few[scheme]] + z * se[few[scheme]]
        intervals[scheme][open_up, 1] = None
        intervals[scheme][open_down, 0] = None
        intervals[scheme][only_ties, 0] = theta[only_ties] - z * se[only_ties]
        intervals[scheme][only_ties, 1] = theta[only_ties] + z * se[only_ties]
        intervals[scheme][unplayed] = None
        rank_intervals[scheme] = rank_intervals[scheme].astype(object)
        for s in np.flatnonzero(only_ties | few[scheme] | position_only):
            rank_intervals[scheme][s] = _overlap_rank_interval(
                s, intervals[scheme][:, 0], intervals[scheme][:, 1], components[group[s]])
    # Chatbot Arena's rank by the intervals: 1 + the systems of its group whose interval lies
    # wholly above its own, so systems whose intervals overlap share a rank (the point `rank`
    # orders them by a difference the votes do not settle: the long-form QA experts' model and
    # higher-voted answer read 1 and 2, both 1 by their intervals).
    rank_by_ci = {scheme: [None if unplayed[s] else _overlap_rank_interval(
        s, bounds[:, 0], bounds[:, 1], components[group[s]])[0] for s in range(k)]
        for scheme, bounds in intervals.items()}
    systems = []
    for s in order:
        systems.append({
            "system": votes.systems[s],
            # Within its group (`component`); a system without a vote has no rank.
            "rank": None if unplayed[s] else int(rank[s]),
            "component": int(group[s]) + 1,
            "strength": float(theta[s]),
            "score": float(1000 + ELO_SCALE * theta[s]),
            "se": float(se[s]),
            **{f"ci_{scheme}": [None if x is None else float(x) for x in intervals[scheme][s]]
               if scheme in intervals and not unplayed[s] else None
               for scheme in ("item", "worker")},
            **{f"rank_interval_{scheme}": [int(round(x)) for x in rank_intervals[scheme][s]]
               if scheme in rank_intervals and not unplayed[s] else None
               for scheme in ("item", "worker")},
            **{f"rank_ci_{scheme}": rank_by_ci[scheme][s] if scheme in rank_by_ci else None
               for scheme in ("item", "worker")},
            "n_votes": int(played[s].sum()),
            "wins": int(played[s, 0]), "losses": int(played[s, 1]), "ties": int(played[s, 2]),
            "unbounded": "both" if never_lost[s] and never_won[s] else "above"
            if never_lost[s] else "below" if never_won[s] else None,
        })
    rate, total = win_matrices(table, k)
    expected_win, expected_tie = expected_matrices(theta, eta, group)
    names = [votes.systems[s] for s in order]
    reorder = np.ix_(order, order)
    board = {
        "systems": systems,
        "model": {
            "name": "davidson" if ties else "bradley_terry",
            "tie_parameter": float(np.exp(eta)) if ties else None,
            "position_effect": float(point.beta[0, k]) if position else None,
            "level": level, "rounds": rounds, "ridge": RIDGE,
            "bootstrap_notes": notes,
            # Systems never compared, even through others: groups ranked each on its own
            # (`component` of each system row), most votes first.
            "components": [[votes.systems[i] for i in members] for members in components]
            if len(components) > 1 else None,
            # Systems with only ties: their intervals are the curvature's (θ ± z·se).
            # Systems the position effect leaves unbounded (`_position_open`).
            "position_open": [votes.systems[i] for i in order if by_position[i]] or None,
            "curvature_intervals": [votes.systems[i] for i in order if only_ties[i]] or None,
            "n_votes": len(votes), "n_ties": int((votes.outcome == TIE).sum()),
            "n_items": n_clusters_of["item"], "n_workers": n_clusters_of["worker"],
            "scale": "strength: log-odds (Σ = 0); score: 1000 + 400·strength/ln 10",
        },
        "win_rate": {"systems": names, "matrix": rate[reorder].tolist(),
                     "n": total[reorder].astype(int).tolist()},
        "expected": {"systems": names, "win": expected_win[reorder].tolist(),
                     "tie": expected_tie[reorder].tolist() if ties else None},
        "style_control": style_control(votes, ties=ties, position=position, level=level,
                                       start=point, components=components,
                                       open_above=never_lost, open_below=never_won)
        if style and votes.style is not None and votes.style.size else None,
    }
    board["notes"] = board_notes(board)
    if robustness:
        board["robustness"] = {
            "drop_to_flip_top": drop_to_flip_top(table, k, ties=ties, systems=votes.systems,
                                                 among=components[0]),
            "position_bias": position_bias(votes) if position else
            {"note": "the order shown was not recorded: no position effect is fitted"},
            "flagged_workers": flagged_workers(votes, table, point, k, ties=ties),
            "power": adjacent_power(table, point, k, ties=ties, order=order,
                                    systems=votes.systems, group=group,
                                    open_gap=_open_gaps(linked, never_lost | never_won,
                                                        loose=loose,
                                                        by_position=position_gaps)),
        }
    return board


def _open_gaps(linked: np.ndarray, open_side: np.ndarray, *, loose: str | None,
               by_position: np.ndarray | None = None) -> np.ndarray:
    """(K, K) object: why the gap between two systems has no finite maximum-likelihood value,
    or None: they lie in different strongly connected sets of "beat or tied"
    (`_unbounded_sets`), or nothing holds the gaps at all (`loose`, its reason: the tie
    parameter grows with them, or the position effect explains every vote) and either is
    open, or the position effect grows with the gap (`by_position`, `_position_open`)."""
    gaps = np.full((len(linked), len(linked)), None, dtype=object)
    if loose:
        gaps[open_side[:, None] | open_side[None, :]] = loose
    gaps[linked[:, None] != linked[None, :]] = OPEN_GAP
    if by_position is not None:
        gaps[by_position & np.equal(gaps, None)] = OPEN_GAP_POSITION_GROWS
    np.fill_diagonal(gaps, None)
    return gaps


# --- style control -----------------------------------------------------------------------------

UNBOUNDED_NOTES = {
    "above": "never lost a vote (or is one of a set that never lost one to the rest of its "
             "group): its strength has no upper bound and its interval is open",
    "below": "never won a vote (or is one of a set that never won one against the rest of its "
             "group): its strength has no lower bound and its interval is open",
    "both": "has no bound on its strength: it lost every vote to some systems and won every "
            "vote against others, or every vote went to one position",
}


POSITION_UNBOUNDED_NOTES = {
    side: f"has no {bound} on its strength once the position effect is fitted: the position "
          "effect and its gaps to the others move together without any vote becoming less "
          "likely (the likelihood rises that way, or its pairs were shown in one order only), "
          "so its interval is open"
    for side, bound in (("above", "upper bound"), ("below", "lower bound"),
                        ("both", "bound either way"))}


def board_notes(board: dict) -> list[str]:
    """Why a board's intervals or ranks are missing or unusual, one sentence each, in the
    words every door shows (the dashboard, `manage.py report`, the API's `notes`): the
    bootstrap schemes left out, each system without a finite strength, the systems placed only
    by ties."""
    notes = list((board["model"].get("bootstrap_notes") or {}).values())
    by_position = set(board["model"].get("position_open") or [])
    notes += [f"{row['system']} {UNBOUNDED_NOTES[row['unbounded']]}."
              if row["system"] not in by_position else
              f"{row['system']} {POSITION_UNBOUNDED_NOTES[row['unbounded']]}."
              for row in board["systems"] if row.get("unbounded")]
    if board["model"].get("curvature_intervals"):
        notes.append(f"{', '.join(board['model']['curvature_intervals'])}: only ties, which "
                     "resampling cannot move; the interval is the curvature's (strength ± "
                     "1.96·se) and the rank interval the ranks it allows.")
    return notes


def style_control(votes: Votes, *, ties: bool, position: bool = True,
                  level: float = 0.95, start: Fit | None = None,
                  components: list[list[int]] | None = None,
                  open_above: np.ndarray | None = None,
                  open_below: np.ndarray | None = None) -> dict | None:
    """Strengths with the style differences as covariates (each feature scaled by its root
    mean square, its spread about no difference), the
    style coefficients (log-odds per standard deviation of the difference) with sandwich
    standard errors clustered by item. The board's rules hold here too: systems never
    compared (`components`, the board's groups) are centred and ranked within their group,
    and a strength with no finite maximum (`open_above`/`open_below`, the board's: the style
    terms do not bound a system that never lost) has its interval open on that side, where
    the sandwich gave a narrow band around the prior's value."""
    k = len(votes.systems)
    s = votes.style
    # A feature enters where it is present: nonzero in at least MIN_STYLE_VOTES votes over
    # MIN_CLUSTERS items (a handful of answers with bold text would get a coefficient, and a
    # sandwich standard error, from next to nothing).
    keep = [c for c in range(s.shape[1])
            if np.std(s[:, c]) > 0 and (s[:, c] != 0).sum() >= MIN_STYLE_VOTES
            and len(np.unique(votes.item[s[:, c] != 0])) >= MIN_CLUSTERS]
    if not keep:
        return None
    s = s[:, keep]
    names = [votes.style_names[c] for c in keep]
    # Each difference is scaled by its root mean square, its spread about zero (no difference):
    # the standard deviation about its mean changed with which answer is on the left (A or
    # B when the order shown is not recorded), and the coefficients with it.
    scale = np.sqrt((s ** 2).mean(axis=0))
    z = s / scale
    n = len(votes)
    extra = 1 if position else 0
    design = np.zeros((n, k + extra + len(keep)))
    design[np.arange(n), votes.left] = 1
    design[np.arange(n), votes.right] = -1
    if position:
        design[:, k] = 1
    design[:, k + extra:] = z
    counts = np.zeros((n, 3))
    counts[np.arange(n), votes.outcome] = 1
    initial = None
    if start is not None:  # the fit without style: the style fit then needs a few steps
        initial = np.concatenate([start.beta[0], np.zeros(len(keep)),
                                  start.eta[:1] if ties else []])
    fit = fit_counts(design, counts, ties=ties, start=initial, tol=1e-7)
    beta = fit.beta[0]
    eta = fit.eta[:1] if ties else None
    d = beta @ design.T
    pw, pl, pt, _ = _probabilities(d[None], eta)
    pw, pl, pt = pw[0], pl[0], pt[0]
    # Per-vote score (gradient of the log-likelihood), summed per item cluster.
    g_d = (counts[:, 0] - counts[:, 1]) / 2 - (pw - pl) / 2
    scores = design * g_d[:, None]
    if ties:
        scores = np.column_stack([scores, counts[:, 2] - pt])
    _, cluster = factorize(votes.item)
    members = sparse.csr_matrix((np.ones(n), (cluster, np.arange(n))),
                                shape=(cluster.max() + 1, n))
    summed = members @ scores
    meat = summed.T @ summed
    bread = fit.covariance
    robust = bread @ meat @ bread
    se = np.sqrt(np.diag(robust))
    zq = stats.norm.ppf(0.5 + level / 2)
    coefficients = []
    for c, name in enumerate(names):
        col = k + extra + c
        coefficients.append({
            "feature": name, "coefficient": float(beta[col]), "se": float(se[col]),
            "ci": [float(beta[col] - zq * se[col]), float(beta[col] + zq * se[col])],
            "sd_of_difference": float(scale[c]),
        })
    theta = beta[:k]
    components = components or [list(range(k))]
    group = np.empty(k, dtype=np.int64)
    for g, members in enumerate(components):
        group[members] = g
    se = np.concatenate([_centred_se(robust, k, components), se[k:]])
    above = np.zeros(k, dtype=bool) if open_above is None else np.asarray(open_above)
    below = np.zeros(k, dtype=bool) if open_below is None else np.asarray(open_below)
    ranks = _ranks(theta, group)
    # Differences θ_i − θ_j are identified within a group; report each θ (Σθ = 0 in its
    # group) with its robust interval, group by group as the board lists them.
    order = np.lexsort((np.arange(k), -theta, group))
    return {
        "features": names,
        "coefficients": coefficients,
        "systems": [{"system": votes.systems[i], "strength": float(theta[i]),
                     "score": float(1000 + ELO_SCALE * theta[i]),
                     "ci": [None if below[i] else float(theta[i] - zq * se[i]),
                            None if above[i] else float(theta[i] + zq * se[i])],
                     "rank": int(ranks[i]), "component": int(group[i]) + 1}
                    for i in order],
        "interval": "normal, sandwich standard errors clustered by item",
    }


def style_features(text_a: str, text_b: str) -> dict[str, float]:
    """FastChat's style differences, answer A minus answer B over their sum: length in
    characters and markdown elements (headers, list items, bold spans)."""
    import re

    def counts(text: str) -> dict[str, int]:
        return {
            "length": len(text),
            "markdown_headers": len(re.findall(r"^#{1,6}\s", text, flags=re.M)),
            "markdown_lists": len(re.findall(r"^\s*(?:[-*+]|\d+\.)\s", text, flags=re.M)),
            "markdown_bold": len(re.findall(r"\*\*[^*\n]+\*\*|__[^_\n]+__", text)),
        }

    a, b = counts(text_a), counts(text_b)
    return {name: (a[name] - b[name]) / (a[name] + b[name]) if a[name] + b[name] else 0.0
            for name in a}


# --- robustness --------------------------------------------------------------------------------

def _top(theta: np.ndarray, among: list[int]) -> int:
    """The strongest of `among`; of equal strengths (`EQUAL_STRENGTH`), the first listed."""
    values = theta[among]
    return among[int(np.flatnonzero(values >= values.max() - EQUAL_STRENGTH)[0])]


def drop_to_flip_top(table: PairTable, k: int, *, ties: bool, systems: list[str],
                     max_fraction: float = 0.5, among: list[int] | None = None) -> dict:
    """Greedy search for few votes whose removal changes the top system (Broderick et al.;
    Huang et al. 2025 for arenas): repeatedly remove the votes (one cell of row × outcome at a
    time) that shrink the leader's margin over its nearest challenger most per vote, by the
    fit's influence, and refit. The count is an upper bound on the smallest such set.
    `among`: the systems the top is taken from and challenged by (the leader's group when some
    systems were never compared with it, even through others: those have no order to flip)."""
    among = list(range(k)) if among is None else list(among)
    counts = table.counts.copy()
    total = counts.sum()
    fit = fit_counts(table.design, counts, ties=ties)
    theta = fit.beta[0, :k]
    leader = _top(theta, among)
    searched = [systems[i] for i in among] if len(among) < k else None
    values = theta[among]
    shared = [systems[among[i]] for i in np.flatnonzero(values >= values.max() - EQUAL_STRENGTH)]
    if len(shared) > 1:
        # Systems with the same record share rank 1 (`_ranks`): there is no single top to
        # flip ("dropping 1 vote makes b the top instead of a" of two systems 1-1 named a
        # top that the board itself did not).
        return {"votes": None, "share": None, "original_top": systems[leader],
                "new_top": None, "removed": [], "among": searched, "shared_top": sorted(shared),
                "method": "the top is shared: no single system leads"}
    removed = 0
    path: list[dict] = []
    start = None
    while removed <= max_fraction * total:
        theta = fit.beta[0, :k]
        if _top(theta, among) != leader:
            return {"votes": int(removed), "share": float(removed / total),
                    "original_top": systems[leader], "new_top": systems[_top(theta, among)],
                    "removed": path, "among": searched,
                    "method": "greedy influence, refit after each removal"}
        # The influence of removing one vote of a cell on θ: −Cov · (its score).
        eta = fit.eta[:1] if ties else None
        d = fit.beta[0] @ table.design.T
        pw, pl, pt, _ = _probabilities(d[None], eta)
        pw, pl, pt = pw[0], pl[0], pt[0]
        best = None
        for c in among:
            if c == leader:
                continue
            contrast = np.zeros(fit.covariance.shape[0])
            contrast[leader], contrast[c] = 1, -1
            gap = theta[leader] - theta[c]
            direction = fit.covariance @ contrast
            for outcome in range(3):
                y = np.array([outcome == LEFT, outcome == RIGHT], dtype=float)
                g_d = (y[0] - y[1]) / 2 - (pw - pl) / 2
                score = table.design * g_d[:, None]
                if ties:
                    score = np.column_stack([score, (outcome == TIE) - pt])
                # Removing a vote changes the parameters by about −Cov·score.
                change = -(score @ direction)
                change[counts[:, outcome] < 1] = np.inf
                r = int(np.argmin(change))
                if change[r] < 0:
                    need = gap / -change[r]
                    if best is None or need < best[0]:
                        best = (need, r, outcome)
        if best is None:
            break
        need, r, outcome = best
        amount = max(1.0, min(counts[r, outcome], np.floor(need / 4)))
        counts[r, outcome] -= amount
        removed += amount
        left, right = table.rows[r]
        step = {"left": systems[left], "right": systems[right], "outcome": OUTCOMES[outcome]}
        if path and {key: path[-1][key] for key in step} == step:
            path[-1]["votes"] += int(amount)
        else:
            path.append({**step, "votes": int(amount)})
        start = np.concatenate([fit.beta[0], fit.eta[:1]]) if ties else fit.beta[0]
        fit = fit_counts(table.design, counts, ties=ties, start=start)
    return {"votes": None, "share": None, "original_top": systems[leader], "new_top": None,
            "removed": path[:50], "among": searched,
            "method": f"greedy influence; no change of the top within {max_fraction:.0%}"}


def position_bias(votes: Votes, *, min_votes: int = 5, alpha: float = 0.05) -> dict:
    """How often the answer shown on the left wins (ties left out), overall and per worker,
    with a two-sided binomial test against one half, Benjamini–Hochberg over workers."""
    from statsmodels.stats.multitest import multipletests

    decided = votes.outcome != TIE
    left_wins = (votes.outcome == LEFT) & decided
    overall_n = int(decided.sum())
    overall = {
        "left_win_rate": float(left_wins.sum() / overall_n) if overall_n else None,
        "n": overall_n,
        "p_value": float(stats.binomtest(int(left_wins.sum()), overall_n).pvalue)
        if overall_n else None,
    }
    workers, index = factorize(votes.worker)
    n_w = np.bincount(index[decided], minlength=len(workers))
    wins_w = np.bincount(index[left_wins], minlength=len(workers))
    # Two-sided exact binomial test against 1/2 (the distribution is symmetric, so doubling
    # the smaller tail is binomtest's p-value), for every worker at once.
    tails = np.minimum(stats.binom.cdf(wins_w, n_w, 0.5), stats.binom.sf(wins_w - 1, n_w, 0.5))
    p_values = np.minimum(1.0, 2 * tails)
    rows = [{"worker": int(w), "n": int(n), "left_win_rate": float(wins / n),
             "p_value": float(p)}
            for w, n, wins, p in zip(workers, n_w, wins_w, p_values, strict=True)
            if n >= min_votes]
    if rows:
        rejected, adjusted, _, _ = multipletests([r["p_value"] for r in rows], alpha=alpha,
                                                 method="fdr_bh")
        for row, flag, q in zip(rows, rejected, adjusted, strict=True):
            row["q_value"] = float(q)
            row["biased"] = bool(flag)
    return {"overall": overall, "workers": rows, "min_votes": min_votes,
            "test": "two-sided binomial against 1/2, Benjamini–Hochberg across workers"}


def flagged_workers(votes: Votes, table: PairTable, fit: Fit, k: int, *, ties: bool,
                    min_votes: int = 5, alpha: float = 0.05) -> dict:
    """Workers whose votes the fitted model finds more surprising than chance: each worker's
    summed surprisal (−log P of the outcome given) against its mean and variance under the
    model, a one-sided z test, Benjamini–Hochberg across workers. Flagged, never dropped."""
    from statsmodels.stats.multitest import multipletests

    d = fit.beta[0] @ table.design.T
    eta = fit.eta[:1] if ties else None
    pw, pl, pt, _ = _probabilities(d[None], eta)
    probs = np.stack([pw[0], pl[0], pt[0]], axis=1)[table.row_of_vote]
    with np.errstate(divide="ignore"):
        logp = np.log(np.clip(probs, 1e-300, 1))
    surprisal = -logp[np.arange(len(votes)), votes.outcome]
    mean = -(probs * logp).sum(1)
    var = (probs * logp ** 2).sum(1) - mean ** 2
    workers, index = factorize(votes.worker)
    n = np.bincount(index)
    obs = np.bincount(index, weights=surprisal)
    exp = np.bincount(index, weights=mean)
    var_w = np.bincount(index, weights=var)
    keep = n >= min_votes
    z = np.where(keep & (var_w > 0), (obs - exp) / np.sqrt(np.where(var_w > 0, var_w, 1)), 0)
    p = stats.norm.sf(z)
    rows = []
    if keep.any():
        rejected, adjusted, _, _ = multipletests(p[keep], alpha=alpha, method="fdr_bh")
        for w, nn, zz, pp, q, flag in zip(workers[keep], n[keep], z[keep], p[keep], adjusted,
                                          rejected, strict=True):
            rows.append({"worker": int(w), "n": int(nn), "z": float(zz), "p_value": float(pp),
                         "q_value": float(q), "flagged": bool(flag)})
    return {"workers": rows, "n_flagged": sum(r["flagged"] for r in rows),
            "min_votes": min_votes,
            "test": "summed surprisal vs the model, one-sided z, Benjamini–Hochberg; "
                    "flagged workers stay in the fit"}


# Said of an adjacent pair whose gap the votes do not bound (`_open_gaps`).
OPEN_GAP = ("no finite difference: one never beat or tied the other, even through others, "
            "so the votes do not size the gap (its value is the prior's)")
OPEN_GAP_TIES = ("no finite difference: every decided vote agrees with one order of the "
                 "systems and the tie parameter grows with the gaps (its value is the prior's)")
OPEN_GAP_POSITION_GROWS = ("no finite difference: the position effect can move with the "
                           "gap without any vote becoming less likely (the likelihood rises "
                           "that way, or the pair was shown in one order only; its value is "
                           "the prior's)")
OPEN_GAP_POSITION = ("no finite difference: every vote went to one position, which the "
                     "position effect explains (its value is the prior's)")


def adjacent_power(table: PairTable, fit: Fit, k: int, *, ties: bool, order: np.ndarray,
                   systems: list[str], alpha: float = 0.05, power: float = 0.8,
                   group: np.ndarray | None = None,
                   open_gap: np.ndarray | None = None) -> list[dict]:
    """For each pair of adjacent systems (of the same `group`: across groups the difference
    is the prior's, not the data's): the difference, its standard error, and how many more
    direct comparisons of the two would make a two-sided level-α test reject with the given
    power if the difference is as estimated (Sherman–Morrison on the information). A pair
    whose gap has no finite maximum (`open_gap`) gets no difference, standard error or count,
    and `undefined` says why: those numbers were the prior's ("difference 3.91 ± 6.43, about
    26 more comparisons" after one vote)."""
    z = stats.norm.ppf(1 - alpha / 2) + stats.norm.ppf(power)
    eta = float(fit.eta[0]) if ties else None
    rows = []
    for a, b in zip(order[:-1], order[1:], strict=True):
        if group is not None and group[a] != group[b]:
            continue
        if open_gap is not None and open_gap[a, b]:
            rows.append({"higher": systems[a], "lower": systems[b], "difference": None,
                         "se": None, "separated": None, "more_comparisons": None,
                         "undefined": open_gap[a, b]})
            continue
        c = np.zeros(fit.covariance.shape[0])
        c[a], c[b] = 1, -1
        diff = float(fit.beta[0, a] - fit.beta[0, b])
        v = float(c @ fit.covariance @ c)
        pw, pl, pt, _ = _probabilities(np.array([diff]), None if eta is None else np.array(eta))
        info = ((pw + pl) / 4 - ((pw - pl) / 2) ** 2).ravel()[0]  # one vote's information about d
        # The variance of this difference after m more direct votes: v / (1 + m·info·v).
        target = (diff / z) ** 2 if diff > 0 else 0.0
        if target <= 0:
            more = None
        elif v <= target:
            more = 0
        else:
            more = int(np.ceil((v / target - 1) / (info * v)))
        rows.append({"higher": systems[a], "lower": systems[b], "difference": diff,
                     "se": float(np.sqrt(v)), "separated": bool(diff > stats.norm.ppf(
                         1 - alpha / 2) * np.sqrt(v)), "more_comparisons": more})
    return rows


# --- adaptive pairing --------------------------------------------------------------------------

def _one_vote_information(d: np.ndarray, eta: float | None) -> np.ndarray:
    pw, pl, _pt, _ = _probabilities(np.asarray(d, dtype=float),
                                    None if eta is None else np.array(eta))
    return (pw + pl) / 4 - ((pw - pl) / 2) ** 2


def optimal_pair_weights(theta: np.ndarray, *, eta: float | None = None,
                         contrast_weights: np.ndarray | None = None,
                         iterations: int = 300) -> tuple[np.ndarray, np.ndarray]:
    """(pairs (P, 2), weights (P,)): the share of comparisons per unordered pair that minimizes
    the (weighted) summed variance of the adjacent differences (by the order of `theta`) — an
    A-optimal design for the contrasts that decide the ranking, by the multiplicative
    algorithm (Silvey, Titterington and Torsney 1978). `contrast_weights` (K−1, best first)
    weigh the adjacent differences; equal by default."""
    theta = np.asarray(theta, dtype=float)
    k = len(theta)
    pairs = np.array([(i, j) for i in range(k) for j in range(i + 1, k)])
    x = np.zeros((len(pairs), k))
    x[np.arange(len(pairs)), pairs[:, 0]] = 1
    x[np.arange(len(pairs)), pairs[:, 1]] = -1
    h = _one_vote_information(theta[pairs[:, 0]] - theta[pairs[:, 1]], eta)
    order = np.argsort(-theta)
    contrasts = np.zeros((k - 1, k))
    contrasts[np.arange(k - 1), order[:-1]] = 1
    contrasts[np.arange(k - 1), order[1:]] = -1
    if contrast_weights is not None:
        contrasts = contrasts * np.sqrt(np.asarray(contrast_weights, dtype=float))[:, None]
    centring = np.ones((k, k)) / k  # fixes the level (Σθ = 0), which no contrast reads
    w = np.full(len(pairs), 1 / len(pairs))
    for _ in range(iterations):
        info = (x * (w * h)[:, None]).T @ x + centring
        inv = np.linalg.inv(info)
        # −∂ tr(C I⁻¹ Cᵀ)/∂w_p = h_p ‖C I⁻¹ x_p‖²
        g = h * ((x @ inv @ contrasts.T) ** 2).sum(1)
        w = w * np.sqrt(g)
        w /= w.sum()
    return pairs, w


def pair_sampling_probabilities(theta: np.ndarray, done: np.ndarray, *, batch: int,
                                eta: float | None = None, floor: float = 0.1,
                                covariance: np.ndarray | None = None) -> tuple:
    """(pairs (P, 2), probabilities (P,)) for drawing the next `batch` comparisons, given the
    comparisons `done` so far per unordered pair (in `pairs` order): towards the optimal design
    of `optimal_pair_weights` (each pair's shortfall against its share of the total after the
    batch), mixed with a uniform `floor` so every pair keeps a known, positive probability.
    With the fit's `covariance`, each adjacent difference is weighted by how open its order
    still is (2Φ(−|d|/se) + 0.0001): votes go where the ranking is in doubt, not to pairs whose
    order is settled.
    Record the probabilities with each draw; the likelihood fit stays valid under this
    adaptive design (it depends on the data only through the outcomes' probabilities)."""
    if not 0 < floor <= 1:
        raise LeaderboardError(f"floor must be in (0, 1], got {floor}")
    weights = None
    if covariance is not None:
        order = np.argsort(-np.asarray(theta, dtype=float))
        weights = []
        for a, b in zip(order[:-1], order[1:], strict=True):
            c = np.zeros(covariance.shape[0])
            c[a], c[b] = 1, -1
            se = np.sqrt(max(float(c @ covariance @ c), 1e-12))
            weights.append(2 * stats.norm.sf(abs(theta[a] - theta[b]) / se) + 1e-4)
    pairs, w = optimal_pair_weights(theta, eta=eta, contrast_weights=weights)
    done = np.asarray(done, dtype=float)
    if done.shape != (len(pairs),):
        raise LeaderboardError(f"done must have one count per pair ({len(pairs)}), "
                               f"got shape {done.shape}")
    shortfall = np.maximum(w * (done.sum() + batch) - done, 0)
    share = shortfall / shortfall.sum() if shortfall.sum() > 0 else w
    return pairs, (1 - floor) * share + floor / len(pairs)
