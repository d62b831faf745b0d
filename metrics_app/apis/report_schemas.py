"""Response shapes of the report endpoints, for the OpenAPI schema (and so for clients generated
from it). The reports are built as plain dicts by the report services; these serializers only
document them (the views never run them), and the API fuzz test checks real responses against
them. Sections whose keys are the project's own names (metric names, groups, workers) are maps.
"""
from __future__ import annotations

from rest_framework import serializers

_NULLABLE_FLOAT = {"allow_null": True}


class CorrelationSerializer(serializers.Serializer):
    n = serializers.IntegerField()
    pearson = serializers.FloatField(**_NULLABLE_FLOAT)
    spearman = serializers.FloatField(**_NULLABLE_FLOAT)
    kendall = serializers.FloatField(**_NULLABLE_FLOAT)
    ci = serializers.DictField(
        child=serializers.ListField(child=serializers.FloatField(**_NULLABLE_FLOAT),
                                    min_length=2, max_length=2),
        help_text="Bootstrap interval [low, high] per correlation.")
    n_resamples = serializers.IntegerField(required=False)
    confidence = serializers.FloatField(required=False)
    undefined = serializers.CharField(
        allow_null=True, required=False,
        help_text="Why the correlations are null (fewer than 3 items, every item has the "
                  "same automatic or human score, or the metric could give no answer a value: "
                  "no reference answer); null when they have values.")


class AccuracySerializer(serializers.Serializer):
    accuracy = serializers.FloatField(**_NULLABLE_FLOAT, help_text="Ties count half.")
    n = serializers.IntegerField()
    ties = serializers.IntegerField(required=False)
    undefined = serializers.CharField(
        required=False,
        help_text="A metric's A/B accuracy only: why it is null when the metric could give "
                  "none of the answers a value (no reference answer to compare with).")


class PairwiseSerializer(serializers.Serializer):
    groups = serializers.ListField(child=serializers.CharField())
    baselines = serializers.DictField(
        child=serializers.DictField(child=AccuracySerializer()),
        help_text="random, always_human, longer_answer → group → accuracy.")
    metrics = serializers.DictField(child=serializers.DictField(child=AccuracySerializer()),
                                    help_text="metric → group → accuracy.")
    unit = serializers.CharField()


class DecisionCellSerializer(serializers.Serializer):
    n = serializers.IntegerField()
    threshold = serializers.FloatField(help_text="Chosen on the validation items.")
    positive_rate = serializers.FloatField(allow_null=True)
    accuracy = serializers.FloatField(allow_null=True)
    f1 = serializers.FloatField(allow_null=True, help_text='F1 of "correct".')
    kappa = serializers.FloatField(allow_null=True, help_text="Cohen's κ.")
    kappa_undefined = serializers.CharField(
        allow_null=True, required=False,
        help_text="Why kappa is null (no items, or both sides one and the same label); null "
                  "when it has a value.")
    roc_auc = serializers.FloatField(allow_null=True)
    ci = serializers.DictField(child=serializers.ListField(
        child=serializers.FloatField(allow_null=True), min_length=2, max_length=2))
    n_resamples = serializers.IntegerField()
    confidence = serializers.FloatField()


class DecisionSerializer(serializers.Serializer):
    correct_at = serializers.FloatField(help_text="Mean human score counted as correct.")
    threshold_chosen_on = serializers.CharField()
    n_validation_items = serializers.IntegerField()
    n_test_items = serializers.IntegerField()
    binary_gold = serializers.BooleanField(help_text="The human scores take two values only.")
    groups = serializers.ListField(child=serializers.CharField())
    metrics = serializers.DictField(child=serializers.DictField(child=DecisionCellSerializer()),
                                    help_text="metric → group → decision statistics.")
    best = serializers.DictField(child=serializers.CharField(allow_null=True),
                                 help_text="group → the metric with the highest accuracy.")


class WilliamsSerializer(serializers.Serializer):
    t = serializers.FloatField(allow_null=True)
    df = serializers.IntegerField()
    p_two_sided = serializers.FloatField(allow_null=True)
    p_one_sided = serializers.FloatField(allow_null=True, help_text='"a correlates higher".')


class PairedBootstrapSerializer(serializers.Serializer):
    difference = serializers.FloatField(allow_null=True)
    ci = serializers.ListField(child=serializers.FloatField(allow_null=True), min_length=2,
                               max_length=2)
    p_not_better = serializers.FloatField(allow_null=True)
    n = serializers.IntegerField()
    n_resamples = serializers.IntegerField()
    confidence = serializers.FloatField()


class MetricPairSerializer(serializers.Serializer):
    a = serializers.CharField()
    b = serializers.CharField()
    n = serializers.IntegerField()
    pearson_a = serializers.FloatField(allow_null=True)
    pearson_b = serializers.FloatField(allow_null=True)
    pearson_a_b = serializers.FloatField(allow_null=True)
    williams = WilliamsSerializer(allow_null=True)
    bootstrap = PairedBootstrapSerializer()


class SignificanceSerializer(serializers.Serializer):
    group = serializers.CharField()
    statistic = serializers.CharField()
    pairs = serializers.ListField(child=MetricPairSerializer())


class LeftOutSeenSerializer(serializers.Serializer):
    version = serializers.CharField()
    items = serializers.IntegerField(help_text="Scored items its version trained or "
                                               "calibrated on, left out.")
    measured_on = serializers.IntegerField(help_text="Scored items it never saw.")


class MeasuredOnSerializer(serializers.Serializer):
    items = serializers.IntegerField(help_text="Study items the report reads.")
    labelled = serializers.IntegerField(help_text="Of those, items with a human label from "
                                        "judgments that count.")
    imported = serializers.IntegerField(help_text="Of those, items scored by the human score "
                                        "their file gave them.")
    text = serializers.CharField()


class MetricReportSerializer(serializers.Serializer):
    project = serializers.CharField()
    kind = serializers.CharField()
    params = serializers.DictField(help_text="The options the report was computed with.")
    human_score = serializers.CharField(
        help_text='"mean", "median" (the project\'s aggregation) or "z-normalized mean/median".')
    metrics = serializers.DictField(child=serializers.CharField(),
                                    help_text="metric → the version whose scores were used.")
    correlations = serializers.DictField(
        child=serializers.DictField(child=CorrelationSerializer()), required=False,
        help_text="Likert projects: metric → group → correlation with the human score.")
    groups = serializers.ListField(child=serializers.CharField(), required=False)
    best = serializers.DictField(child=serializers.CharField(allow_null=True), required=False,
                                 help_text="group → the metric with the highest Pearson.")
    n_skipped_imported_gold = serializers.IntegerField(required=False)
    n_imported_gold = serializers.IntegerField(
        required=False, help_text="Likert projects: items whose human score is their imported "
        "gold score, since no judgment of theirs counts.")
    measured_on = MeasuredOnSerializer(
        required=False, help_text="Likert projects: the study items (not gold checks, practice, "
        "qualification-only or excluded items) and how many carry a human label, as the judges "
        "report says it.")
    minimal_pairs = serializers.DictField(
        child=serializers.DictField(child=AccuracySerializer()), required=False,
        help_text="Likert projects with minimal pairs: metric → group → accuracy.")
    pairwise = PairwiseSerializer(required=False, help_text="A/B projects.")
    decision = DecisionSerializer(required=False, help_text="Likert projects: correct / "
                                  "incorrect at a threshold chosen on validation items.")
    significance = SignificanceSerializer(
        required=False, help_text="Likert projects: Williams' test and a paired bootstrap for "
                                  "every two metrics.")
    score_watermark = serializers.IntegerField(required=False)
    item_fingerprint = serializers.CharField(
        required=False, help_text="What the report read besides judgments and scores (the "
                                  "counting rule, items, settings): changed → stale.")
    aggregation = serializers.CharField(
        required=False, help_text="The project's aggregation model the human gold used.")
    counting_fingerprint = serializers.CharField(
        required=False, help_text="Which judgments count (rejections, blocks): kept apart "
                                  "from item_fingerprint so staleness can name that cause.")
    format_version = serializers.IntegerField(
        required=False, help_text="How the report is read; a copy of an older format is "
                                  "stale.")
    left_out_seen = serializers.DictField(
        child=LeftOutSeenSerializer(), required=False,
        help_text="Learned metrics (lerc, lerc_prob, lerc_ab) whose version trained or "
                  "calibrated on some scored items: those items are left out of every cell "
                  "of that metric (its n is then below the others').")


class MetricReportResponseSerializer(serializers.Serializer):
    project = serializers.CharField()
    stale = serializers.BooleanField(help_text="Judgments or scores arrived since computing.")
    stale_reason = serializers.CharField(
        allow_blank=True, help_text="Why the report is stale, as the metrics page says it "
                                    "(\"new judgments arrived\", …); empty when it is not.")
    computed_at = serializers.DateTimeField()
    report = MetricReportSerializer()


class StageSummarySerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    kind = serializers.CharField()
    status = serializers.CharField()
    n_judgments = serializers.IntegerField()
    n_items = serializers.IntegerField()
    n_workers = serializers.IntegerField()
    krippendorff_alpha = serializers.FloatField(allow_null=True)
    alpha_undefined = serializers.CharField(
        allow_null=True, help_text="Why krippendorff_alpha is null (no judgments that count, "
                                   "no item judged twice, one answer only); null when it has "
                                   "a value.")
    gate = serializers.DictField(allow_null=True, help_text="The agreement gate, if any: stage, "
                                 "alpha, alpha_undefined, threshold, passes, overridden.")


class AnnotatorPairSerializer(serializers.Serializer):
    a = serializers.CharField()
    b = serializers.CharField()
    n_shared = serializers.IntegerField()
    cohen_kappa = serializers.FloatField(allow_null=True)
    weighted_kappa = serializers.FloatField(allow_null=True, required=False,
                                            help_text="Likert: quadratic weights, 1-5 scale.")
    alpha = serializers.FloatField(allow_null=True, help_text="Krippendorff's α of the two.")
    agreement = serializers.FloatField()
    confusion = serializers.ListField(child=serializers.ListField(
        child=serializers.IntegerField()), help_text="rows: a's label, columns: b's.")


class AnnotatorAgainstOthersSerializer(serializers.Serializer):
    n = serializers.IntegerField()
    agreement_with_majority = serializers.FloatField(allow_null=True)
    confusion = serializers.ListField(child=serializers.ListField(
        child=serializers.IntegerField()), help_text="rows: the worker's label, columns: the "
                                                     "others' majority label.")


class AnnotatorPairsSerializer(serializers.Serializer):
    labels = serializers.ListField(child=serializers.CharField())
    min_shared = serializers.IntegerField()
    n_pairs = serializers.IntegerField(help_text="Pairs sharing at least min_shared items.")
    pairs = serializers.ListField(child=AnnotatorPairSerializer())
    workers = serializers.DictField(child=AnnotatorAgainstOthersSerializer())


class ProjectReportSerializer(serializers.Serializer):
    project = serializers.CharField()
    kind = serializers.CharField()
    stage = serializers.CharField(allow_null=True, help_text="null: every data stage.")
    group_by = serializers.CharField(allow_null=True)
    judgment_watermark = serializers.IntegerField(help_text="Highest judgment id included.")
    n_judgments = serializers.IntegerField(help_text="Judgments that count (data stages).")
    agreement = serializers.DictField(
        child=serializers.DictField(),
        help_text="group (\"all\" or a group_by value) → Krippendorff's α with its bootstrap "
                  "interval, Fleiss' κ, percent agreement and counts; `alpha_undefined` says "
                  "why α (and κ) is null.")
    stages = serializers.ListField(child=StageSummarySerializer())
    workers = serializers.ListField(
        child=serializers.DictField(),
        help_text="Per worker: judgments, agreement with the others and what removing them "
                  "does to α, gold/practice accuracy, time, status, spot checks "
                  "(`spot_checked`, `spot_problems`, as the dashboard's table) and flags.")
    annotator_pairs = AnnotatorPairsSerializer(required=False)
    likert = serializers.DictField(help_text="Likert projects: score distributions.")
    lfqa = serializers.DictField(help_text="A/B projects: preferences and agreement.")
    leaderboard = serializers.DictField(
        required=False,
        help_text="A/B projects: the answers' systems ranked by Bradley–Terry with ties "
                  "(Davidson), bootstrap intervals by item and by worker, rank intervals, "
                  "win-rate and expected-win matrices, style control, robustness; overall, "
                  "by_domain, by_dataset (docs/LEADERBOARD.md).")
    starc = serializers.DictField(help_text="Multiple-choice projects: accuracy by answer role.")
    estimates = serializers.DictField(
        required=False,
        help_text="Likert projects: per system (item source) accuracy and mean score from the "
                  "human judgments alone (bootstrap interval), the stored LERC alone (with its "
                  "bias against the humans) and prediction-powered (PPI++: humans + LERC on "
                  "every item, with the effective number of human judgments it is worth); per "
                  "pair of systems the difference and the judgments still needed to separate "
                  "them at 95%; `assumptions` states what each interval rests on; "
                  "`metric.left_out_seen` and `left_out_note`: the items a learned judge's "
                  "version trained or calibrated on, counted as unscored (predicted unsure). "
                  "An estimate that cannot be made says why: each estimate's `undefined` (and "
                  "`effective_n_undefined`), the judge alone's `bias_undefined`, a system's "
                  "`judge_undefined` (no prediction on its items), a pair's `undefined`; "
                  "labels without spread, items unlabelled, give no interval (`undefined`), "
                  "and a pair's `shown` names the difference its verdict reads (`ppi`, else "
                  "`human` where the judge's cannot be made).")
    adaptive_redundancy = serializers.ListField(
        child=serializers.DictField(), required=False,
        help_text="Stages with adaptive redundancy: items settled by agreement or at max, "
                  "judgments given, and judgments saved against a fixed redundancy of max.")
    item_fingerprint = serializers.CharField(required=False)


class LeaderboardBoardSerializer(serializers.Serializer):
    """A fitted board; one that cannot be fitted carries `error` only (and the report its
    `skipped`): no vote compares two systems, or more systems than a board ranks."""

    error = serializers.CharField(
        required=False,
        help_text="Why there is no board, in the words the dashboard and `manage.py report` "
                  "show (no vote compares two systems; more than 100 systems); then the "
                  "board's other fields are absent.")
    systems = serializers.ListField(
        child=serializers.DictField(), required=False,
        help_text="By component (the group of systems compared with each other, even "
                  "through others), then best first: rank (within the component), component, "
                  "system, strength (log-odds, Σ = 0 within the component), score (1000 + "
                  "400·strength/ln 10), se, ci_item, ci_worker (95% percentile bootstrap; "
                  "null with fewer than 5 clusters; θ ± 1.96·se for a system with only ties), "
                  "rank_interval_item/_worker, rank_ci_item/_worker (rank by the interval: 1 + the "
                  "systems of the component whose interval lies wholly above; overlapping "
                  "intervals share a rank), n_votes, wins, losses, ties.")
    model = serializers.DictField(required=False, help_text="davidson or bradley_terry, tie parameter, "
                                            "position effect, counts, bootstrap notes, "
                                            "components (when the systems fall into groups "
                                            "never compared), curvature_intervals, "
                                            "position_open (systems the fitted position "
                                            "effect leaves without a finite strength).")
    win_rate = serializers.DictField(required=False, help_text="Observed (wins + ties/2) / votes, row over "
                                               "column, and vote counts.")
    expected = serializers.DictField(required=False, help_text="Model P(row beats column) and P(tie).")
    style_control = serializers.DictField(allow_null=True, required=False, help_text="Strengths with style "
                                          "covariates and the style coefficients.")
    robustness = serializers.DictField(required=False, help_text="drop_to_flip_top, "
                                       "position_bias, flagged_workers, power.")
    notes = serializers.ListField(
        child=serializers.CharField(), required=False,
        help_text="Why intervals or ranks are missing or unusual, one sentence each (the "
                  "dashboard's and `manage.py report`'s): bootstrap schemes left out, systems "
                  "without a finite strength, systems placed only by ties.")
    voters = serializers.CharField(
        required=False, help_text="A combined board (humans + judge): who voted, the judge "
                                  "one extra voter (worker 0).")


class LeaderboardSerializer(serializers.Serializer):
    judge = serializers.CharField(required=False)
    overall = LeaderboardBoardSerializer(required=False, allow_null=True)
    by_domain = serializers.DictField(child=LeaderboardBoardSerializer(allow_null=True),
                                      required=False)
    by_dataset = serializers.DictField(child=LeaderboardBoardSerializer(allow_null=True),
                                       required=False)
    skipped = serializers.DictField(child=serializers.IntegerField(), required=False)
    order_recorded = serializers.BooleanField(required=False)
    tie_choices = serializers.DictField(child=serializers.IntegerField(), required=False)
    judges = serializers.DictField(
        child=serializers.DictField(), required=False,
        help_text="Automatic judges as voters, each a board like `overall` (or {error}) with "
                  "`judge`: kind, label and, for a metric, `left_out_seen` (the items a "
                  "learned metric's version trained or calibrated on: it votes only on the "
                  "others); LLM judges: position consistency, unparseable verdicts.")
    side_by_side = serializers.ListField(
        child=serializers.DictField(), required=False,
        help_text="Per system (the humans' order): rank and strength by the humans and by "
                  "each judge, the judge's on the humans' items only (`side_by_side_items`); "
                  "a judge that read only some of them also carries `human_rank` and "
                  "`human_strength`: the humans' board refitted on that judge's items.")
    side_by_side_items = serializers.IntegerField(
        required=False, help_text="The items of the humans' board, on which the side by side "
                                  "ranks every judge.")
    side_by_side_judge_items = serializers.DictField(
        child=serializers.IntegerField(), required=False,
        help_text="Per judge, how many of the humans' items it voted on.")
    combined = serializers.DictField(
        child=LeaderboardBoardSerializer(), required=False,
        help_text="Per LLM or imported judge: the humans' votes and the judge's in one board, "
                  "the judge one extra voter (`voters`).")
