"""The project report behind `manage.py report`, the REST endpoint and the dashboard, and its
cache in `Report` (valid while no newer judgment exists and the items are unchanged; worker
status is read fresh on every cache hit). Reads never write the cache: `report_refresh` and
`dashboard_charts_refresh` do, from the precompute paths (the Beat task for stale projects,
after an import, `manage.py report`)."""
from __future__ import annotations

import hashlib
import random

from django.conf import settings
from django.db import connection
from django.db.models import Count, Max, TextField
from django.db.models.fields.json import KT
from django.db.models.functions import Cast

from annotation.domain.agreement import NO_JUDGMENTS
from annotation.judgment_selectors import fetch_plain_rows, load_judgments, watermark
from annotation.models import Adjudication, Item, Judgment, Project, Stage, TaskKind, Worker
from annotation.selectors import (
    blocked_worker_ids_for,
    counting_fingerprint,
    practice_failed_worker_ids,
    qualification_only_items,
)
from annotation.services.redundancy import adaptive_redundancy_summary
from annotation.services.review import workers_review_rule_flags
from annotation.spot_check_selectors import spot_check_counts
from core.json_limits import json_ready

from ..judge_selectors import lerc_versions_read
from ..models import Report
from .agreement import agreement_report
from .annotator_pairs import annotator_pairs_report
from .estimates import estimates_report, judge_watermark, metric_watermark
from .leaderboard import leaderboard_report
from .lfqa import lfqa_report
from .likert import likert_report
from .stages import stages_report
from .starc import starc_report
from .store import report_cached, report_store
from .workers import own_items_reason, worker_report, worker_row_without_counted_work

REPORT_KIND = "project"
# Bump when the report's content or definitions change: cached reports of another version are
# recomputed even though no judgment arrived.
# 30: a worker the project's review rules act on is flagged for the rule's reason, in its words
# (`flag_reasons`), with a row even when none of their work counts any more;
# 29: a worker answering in under 2 s per item (median) is flagged "too fast";
# 28: the estimates read the study items (`items_measured_on`): an item released only in a
# qualification is no system "(none)" any more;
# 27: a report narrowed to a practice or qualification stage counts that stage's judgments
# (its headline, agreement and workers, as its stage row);
# 26: a STARC participant who failed practice is out of every number (the counting rule);
# 25: STARC's pilot criteria compare exact shares (a question at a boundary is not flagged);
# 24: position bias read on the votes that recorded the order shown beside imported ones;
# 23: a leaderboard's rounds are placed by the systems they measure (`_anchored`);
# 22: a long-form QA domain's undefined Fleiss' κ says why;
# 21: the estimates' bootstrap intervals do not depend on the items' order;
# 20: a leaderboard's intervals do not depend on item or worker ids (the import order);
# 19: a leaderboard does not depend on how its votes are listed (bootstrap draws, shared
# ranks, style scaled about zero);
# 18: a worker's undefined α contribution, an estimate that cannot be made, say why;
# 17: workers' same-justification share; 16: an undefined α says why, a leaderboard board its
# notes; 15: a learned judge leaves out the items it saw; 14: an excluded item's judgments are
# not data; 31: a leaderboard leaves out the votes on identical answers and groups system
# names by their one spelling (`normalize_system`); 32: a tie bounds a strength unless every
# decided vote agrees with one order; style control keeps the board's groups and open sides;
# a leaderboard without a vote between two systems says why (`no_board_reason`); an interval's
# end that the prior sets in many bootstrap rounds is open (`_round_open`); ranks by the
# intervals (`rank_ci_item`, `rank_ci_worker`).
# 33: an estimate from labels without
# spread, items unlabelled, has no interval (`estimates.no_spread`), not one of width 0; a
# judge's stored score off the task's scale is unparseable (`answer_score_problem`); an
# estimate's point stays on its scale as its interval does (`clip_to_scale`).
# 34: a Likert item is correct at or above the midpoint of the project's scale
# (`Project.correct_at`: 4 on a 7-point project, where 3 counted as correct before).
# 35: with the position effect fitted, a strength it lets grow is open (`model.position_open`).
# 36: the judge alone (`metric` of the estimates) reads only the judge's own verdicts, not the
# unsure value its unscored items get for the prediction-powered estimate.
# 37: the long-form A/B preference shares read the leaderboard's votes (`preference_mask`):
# no gold check's, none between two identical answers; a domain or dataset board without a
# vote between two systems is {error} (`no_board_reason`), not null.
# 38: a routed draw gives no judge numbers for a system whose population the judge scored none
# of (as the unrouted estimate); the judge alone's bias says when the judge scored none (or 1)
# of the human-labelled items.
# 39: a routed system whose judge scored only items outside its draw says so.
REPORT_VERSION = 39


def _params(group_by: str | None) -> dict:
    return {"group_by": group_by, "version": REPORT_VERSION}


def project_report(
    *, project: Project, stage: Stage | None = None, group_by: str | None = None
) -> dict:
    """Every analysis of a project (or one stage) as one JSON-ready dict with the keys
    `agreement`, `workers`, `likert`, `lfqa`, `leaderboard` (A/B: systems ranked from the
    judgments), `starc` (empty dicts for other task kinds) and
    `estimates` (each system's accuracy from humans, the project's estimates judge (LERC by
    default) and both; Likert projects)."""
    # Practice/qualification judgments are loaded too: workers are scored on them; every
    # item-level analysis masks them out.
    frame = load_judgments(project=project, stage=stage, include_non_data_stages=True)
    report = {
        "project": project.slug,
        "kind": project.kind,
        "stage": stage.name if stage else None,
        "group_by": group_by,
        "judgment_watermark": frame.watermark,
        "n_judgments": int(frame.data_mask().sum()) if len(frame) else 0,
        "agreement": agreement_report(frame, group_by=group_by),
        "stages": stages_report(frame, project=project, narrowed_to=stage),
        "workers": worker_report(frame, tolerance=project.qualification_tolerance,
                                 rule_flags=workers_review_rule_flags(project=project,
                                                                      stage=stage)),
        "annotator_pairs": annotator_pairs_report(frame),
        "likert": likert_report(frame) if project.kind == TaskKind.LIKERT else {},
        "lfqa": lfqa_report(frame, project) if project.kind == TaskKind.AB else {},
        "leaderboard": leaderboard_report(frame, project=project, stage=stage)
        if project.kind == TaskKind.AB else {},
        "starc": starc_report(frame, experiment_mode=project.experiment_mode,
                              excluded=practice_failed_worker_ids(project))
        if project.kind == TaskKind.MC else {},
        "estimates": estimates_report(frame, project=project),
        "adaptive_redundancy": [
            summary for summary in (adaptive_redundancy_summary(stage=s)
                                    for s in project.stages.order_by("order", "pk"))
            if summary is not None],
    }
    return json_ready(report)  # numpy scalars → Python, NaN/inf → None: strict JSON


def judgment_watermark(*, project: Project, stage: Stage | None = None) -> int:
    queryset = Judgment.objects.filter(item__project=project)
    if stage is not None:
        queryset = queryset.filter(stage=stage)
    return watermark(queryset)


# Item columns the reports read: editing one (gold, practice flag, exclusion, grouping fields)
# changes the report without adding a judgment.
ITEM_FINGERPRINT_FIELDS = ("dataset", "source", "split", "domain", "text_level",
                           "is_gold_check", "is_practice", "excluded")


def item_fingerprint(*, project: Project) -> str:
    """Hash of the project's items as the reports see them, and of every other input that
    changes the numbers without a new judgment (the counting rule, the project's and its
    stages' settings, LERC scores, judge verdicts, adjudications). Items carry no
    `updated_at`, so the cache compares this hash; JSON columns are read as text (no decoding),
    which keeps it to one light query even for 40,000 items. It also covers what decides
    which judgments count (`counting_fingerprint`): rejecting work or blocking a worker adds
    no judgment but changes every number."""
    queryset = (Item.objects.filter(project=project).order_by("id")
                .annotate(_gold=Cast("gold", TextField()), _meta=Cast("metadata", TextField()))
                .values_list("id", *ITEM_FINGERPRINT_FIELDS, "_gold", "_meta"))
    digest = hashlib.blake2b(digest_size=16)
    if connection.vendor == "postgresql":
        # Hashed where the rows are: shipping 333,334 item rows to Python to hash them took
        # twice as long, and every cached dashboard read pays this.
        sql, params = queryset.order_by().query.sql_with_params()
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT md5(string_agg(t::text, ',' ORDER BY t.id)) FROM ({sql}) AS t",
                           params)
            digest.update(str(cursor.fetchone()[0]).encode())
    else:
        for row in fetch_plain_rows(queryset):
            digest.update(repr(row).encode())
    digest.update(counting_fingerprint(project=project).encode())
    # The settings the numbers are defined by, which change no judgment and no item: the gold
    # tolerance (worker accuracy), the aggregation model (the human score of the estimates and
    # the metric report), the scale (its midpoint is the correctness cut), and each stage's
    # name, kind, status and gate (which judgments are data, the stage rows, the gate's α and its level).
    digest.update(repr((str(project.kind), str(project.experiment_mode),
                        float(project.qualification_tolerance or 0),
                        str(project.aggregation_model), project.scale_top)).encode())
    digest.update(repr(list(Stage.objects.filter(project=project).order_by("pk").values_list(
        "pk", "name", "kind", "status", "order", "settings", "agreement_threshold",
        "requires_stage_id"))).encode())
    # Which items are study items (`items_measured_on`) also depends on the stages' item
    # lists: an item released in a qualification becomes one when a data stage lists it.
    digest.update(repr(list(qualification_only_items(project).order_by("pk")
                            .values_list("pk", flat=True))).encode())
    # LERC scores feed the prediction-powered estimates: newly stored ones change the report.
    digest.update(f"lerc:{metric_watermark(project)}".encode())
    # ... and which version's scores they are: a promotion or a rollback stores no score.
    digest.update(f"lerc_versions:{lerc_versions_read(project)}".encode())
    # Judge verdicts feed the leaderboard's judge boards (and a chosen estimates judge).
    digest.update(f"verdicts:{judge_watermark(project)}".encode())
    # The project's choice of estimates judge decides which predictions the estimates use.
    digest.update(f"estimates_judge:{project.estimates_judge}".encode())
    # A researcher's adjudication replaces an item's human label at every door
    # (`with_adjudications`) and adds no judgment; adjudications are append-only, so the
    # newest id marks every change.
    digest.update(f"adjudications:{watermark(Adjudication.objects.filter(item__project=project))}"
                  .encode())
    return digest.hexdigest()


def with_current_worker_status(report: dict, *, project: Project) -> dict:
    """The report with each worker's status for this project read now ("blocked" when blocked
    globally or by one of the project's researchers): blocking a worker adds no judgment, so a
    cached report would show them active until the next judgment arrives."""
    workers = report.get("workers") or []
    blocked = blocked_worker_ids_for(project)
    rows = [{**w, "status": "blocked" if w["worker_id"] in blocked else "active"}
            for w in workers]
    # A blocked worker's judgments no longer count, so the report has no row for them: list
    # them anyway (marked blocked, numbers empty), so the dashboard can unblock them.
    listed = {w["worker_id"] for w in workers}
    missing = blocked - listed
    if missing:
        blocked_why = own_items_reason(NO_JUDGMENTS)
        for pk, external_id, name, n in (
                Worker.objects.filter(pk__in=missing, judgments__item__project=project)
                .annotate(n=Count("judgments")).order_by("external_id")
                .values_list("pk", "external_id", "display_name", "n")):
            rows.append(worker_row_without_counted_work(
                worker_id=pk, external_id=external_id, name=name, status="blocked",
                why=blocked_why, n_blocked_judgments=n,
                flags=["blocked: judgments not counted"]))
    if not rows:
        return report
    return {**report, "workers": rows}


def with_spot_checks(workers: list[dict], *, project: Project) -> list[dict]:
    """The workers table's rows with each worker's spot checks of this project read now
    ("spot_checked", "spot_problems": `spot_check_counts`; a spot check adds no judgment, so a
    cached report could not carry them)."""
    checks = spot_check_counts(project=project)
    return [{**w, **checks.get(w["worker_id"], {"spot_checked": 0, "spot_problems": 0})}
            for w in workers]


def with_current_worker_columns(report: dict, *, project: Project) -> dict:
    """The report with the workers table's columns that no cached report can carry read now:
    each worker's status (`with_current_worker_status`) and spot checks (`with_spot_checks`).
    Every door that shows the table reads it through here (the dashboard, the report API,
    `manage.py report`): the API and `report --json` had no spot-check counts while the
    dashboard's table showed them."""
    report = with_current_worker_status(report, project=project)
    if not report.get("workers"):
        return report
    return {**report, "workers": with_spot_checks(report["workers"], project=project)}


def fresh_cached_report(
    *, project: Project, stage: Stage | None = None, group_by: str | None = None
) -> dict | None:
    """The stored `project_report` while no judgment arrived and no item changed since it was
    computed (judgments are append-only, so their `watermark` is a complete change marker for
    them; items are compared by `item_fingerprint`), else None. Reads only."""
    cached = _cached_row(project=project, stage=stage, group_by=group_by)
    # The project's watermark, a stage's report too: its gate reads the gating stage's
    # judgments (`stages_report`).
    if (cached is not None
            and cached.judgment_watermark == judgment_watermark(project=project)
            and _reads_current_inputs(cached.data.get("item_fingerprint"), project)):
        return cached.data
    return None


def _reads_current_inputs(stored_fingerprint: str | None, project: Project) -> bool:
    """Whether a report stored under `stored_fingerprint` read what the project holds now
    besides its judgments (`item_fingerprint`: the counting rule, items, settings, LERC
    versions, verdicts, adjudications). The one rule of the readers (`fresh_cached_report`),
    the beat (`stale_report_watermarks`) and the refresh's skip (`project_reports_refresh`)."""
    return stored_fingerprint == item_fingerprint(project=project)


def project_report_with_fingerprint(
    *, project: Project, stage: Stage | None = None, group_by: str | None = None
) -> dict:
    """`project_report` plus the `item_fingerprint` it was computed under: what the cache
    stores and what a read returns on a miss."""
    # Taken before reading: an item edited meanwhile makes the next read recompute.
    fingerprint = item_fingerprint(project=project)
    data = project_report(project=project, stage=stage, group_by=group_by)
    data["item_fingerprint"] = fingerprint
    return data


def cached_project_report(
    *, project: Project, stage: Stage | None = None, group_by: str | None = None,
    refresh: bool = False,
) -> dict:
    """The fresh cached report, else computed in this call, with worker status and spot
    checks read now (`with_current_worker_columns`).
    Writes nothing: a GET never stores a report. The cache is filled by the precompute paths
    (`report_refresh`: the Beat task for stale projects, after an import, `manage.py report`)."""
    report = None if refresh else fresh_cached_report(project=project, stage=stage,
                                                      group_by=group_by)
    if report is None:
        report = project_report_with_fingerprint(project=project, stage=stage, group_by=group_by)
    return with_current_worker_columns(report, project=project)


def _cached_row(*, project: Project, stage: Stage | None, group_by: str | None) -> Report | None:
    return report_cached(project=project, stage=stage, kind=REPORT_KIND, params=_params(group_by))


def report_refresh(
    *, project: Project, stage: Stage | None = None, group_by: str | None = None
) -> dict:
    """Recompute and store the report (one row per project, stage and parameters), marked
    with the project's judgment watermark read before computing: the newest judgment of any
    stage, counted or not (a rejected or blocked worker's newest judgment would otherwise leave
    the stored copy looking stale forever, and a stage's report miss the gate stage's)."""
    mark = judgment_watermark(project=project)
    data = project_report_with_fingerprint(project=project, stage=stage, group_by=group_by)
    params = _params(group_by)
    # Reports of an older REPORT_VERSION for the same parameters are replaced, not kept.
    report_store(
        project=project, stage=stage, kind=REPORT_KIND, params=params, data=data,
        judgment_watermark=mark,
        supersedes=lambda r: (r.kind in (REPORT_KIND, CHARTS_KIND)
                              and (r.params or {}).get("group_by") == group_by
                              and r.params != params),
    )
    return data


def project_reports_refresh(*, project_id: int, up_to: int | None = None) -> int:
    """The background refresh of one project: its project-wide report and dashboard charts
    recomputed and stored. Returns the report's judgment watermark (0: the project is gone).

    `up_to`: the project's newest judgment when the beat sent this refresh
    (`stale_report_watermarks`). A report stored since that reads up to it already answers
    what the refresh was sent for, so it computes nothing: while judgments keep arriving, each
    copy the beat sent during a slow refresh found the report stale again and recomputed it,
    one after another, and the copies outgrew the queue (provider syncs wait on the same one).
    The next beat sends one for what arrived since."""
    project = Project.objects.filter(pk=project_id).first()
    if project is None:
        return 0
    if up_to is not None:
        stored = _cached_row(project=project, stage=None, group_by=None)
        if (stored is not None and stored.judgment_watermark >= up_to
                and _charts_fresh(_charts_row(project=project, stage=None, group_by=None),
                                  stored.data)):
            return stored.judgment_watermark
    fresh = fresh_cached_report(project=project)
    if fresh is not None and _charts_fresh(_charts_row(project=project, stage=None,
                                                       group_by=None), fresh):
        # A copy of a refresh that already ran: the beat sends a stale project again every
        # few minutes while its refresh is queued or running (a slow report), and each copy
        # recomputing it piled them up on the queue.
        return fresh["judgment_watermark"]
    report = report_refresh(project=project)
    dashboard_charts_refresh(project=project)
    return report["judgment_watermark"]


def stale_report_projects() -> list[int]:
    """Ids of projects whose project-wide report is missing or older than their judgments."""
    return sorted(stale_report_watermarks())


def stale_report_watermarks() -> dict[int, int | None]:
    """Project id → what the beat sends its refresh `up_to`, for the projects whose
    project-wide report the readers would not serve (`fresh_cached_report`): missing or older
    than their judgments (their newest judgment's id), or reading every judgment but computed
    before a change that adds none (work rejected, a worker blocked, an item excluded, a stage
    closed, a LERC promotion, a judge run: `_reads_current_inputs`), sent with None, as an
    import's refresh is (computed unless a copy stored since is fresh). Before, the beat asked
    only the judgments: a finished study's report stayed stale after such a change, and every
    dashboard visit computed it in the request."""
    latest = dict(
        Judgment.objects.values_list("item__project").annotate(top=Max("id")).values_list(
            "item__project", "top"
        )
    )
    cached = {
        project_id: (watermark, fingerprint)
        for project_id, watermark, params, fingerprint in Report.objects.filter(
            kind=REPORT_KIND, stage=None
        ).values_list("project_id", "judgment_watermark", "params",
                      KT("data__item_fingerprint"))
        if params == _params(None)
    }
    stale: dict[int, int | None] = {
        pk: top for pk, top in latest.items() if cached.get(pk, (-1, None))[0] < top}
    # Checking another input costs a fingerprint per project (about 16 queries and a hash of
    # its items): a bounded random draw a beat, so finished studies do not cost every beat
    # (`QAJ_REPORT_FINGERPRINT_CHECKS`; a page that reads a stale report recomputes it).
    candidates = [pk for pk in latest if pk not in stale]
    limit = max(0, int(getattr(settings, "QAJ_REPORT_FINGERPRINT_CHECKS", 20)))
    if len(candidates) > limit:
        candidates = random.sample(candidates, limit)
    read_all = Project.objects.in_bulk(candidates)
    stale.update({pk: None for pk, project in read_all.items()
                  if not _reads_current_inputs(cached[pk][1], project)})
    return dict(sorted(stale.items()))


CHARTS_KIND = "project-charts"
_CHARTS_FINGERPRINT = "_item_fingerprint"  # stored beside the SVGs, never returned as a chart


def _charts_row(*, project: Project, stage: Stage | None, group_by: str | None
                ) -> Report | None:
    return report_cached(project=project, stage=stage, kind=CHARTS_KIND, params=_params(group_by))


def dashboard_data(
    *, project: Project, stage: Stage | None = None, group_by: str | None = None
) -> tuple[dict, dict]:
    """(report, chart SVGs) for the dashboard. Reads only: the charts come from the cache
    beside the report while they have its watermark and item fingerprint (a page view after
    the Celery refresh renders nothing), else they are rendered here and not stored."""
    from .charts import dashboard_charts

    report = cached_project_report(project=project, stage=stage, group_by=group_by)
    row = _charts_row(project=project, stage=stage, group_by=group_by)
    if _charts_fresh(row, report):
        return report, {k: v for k, v in row.data.items() if k != _CHARTS_FINGERPRINT}
    return report, dashboard_charts(report)


def _charts_fresh(row: Report | None, report: dict) -> bool:
    """Whether the stored charts were drawn from this report (its watermark and items)."""
    return (row is not None and row.judgment_watermark == report["judgment_watermark"]
            and row.data.get(_CHARTS_FINGERPRINT) == report.get("item_fingerprint"))


def dashboard_charts_refresh(
    *, project: Project, stage: Stage | None = None, group_by: str | None = None
) -> dict:
    """Render and store the dashboard charts of the cached report (after `report_refresh`)."""
    from .charts import dashboard_charts

    report = cached_project_report(project=project, stage=stage, group_by=group_by)
    charts = dashboard_charts(report)
    stored = {**charts, _CHARTS_FINGERPRINT: report.get("item_fingerprint")}
    report_store(project=project, stage=stage, kind=CHARTS_KIND, params=_params(group_by),
                 data=stored, judgment_watermark=report["judgment_watermark"])
    return charts
