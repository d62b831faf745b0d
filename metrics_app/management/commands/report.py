"""Print a project's analytics report.

    python manage.py report SLUG --json [--stage NAME|ID] [--group-by FIELD] [--refresh]

One JSON object with the keys agreement, workers, likert, lfqa, leaderboard, starc, estimates (see
metrics_app/reports/project.py). Served from the report cache unless judgments arrived since.
"""
from __future__ import annotations

from django.core.management.base import CommandError

from annotation.access_selectors import project_stage_by_ref
from annotation.judgment_selectors import GROUP_FIELDS
from annotation.models import Project
from core.json_limits import json_dumps_strict
from core.output_files import REPORT_NOT_STORED_NOTE, REPORT_STORED_NOTE, InterruptibleCommand
from metrics_app.reports.project import (
    fresh_cached_report,
    report_refresh,
    with_current_worker_columns,
)
from metrics_app.reports.workers import flags_with_reasons


class Command(InterruptibleCommand):
    help = "Agreement, worker, Likert, long-form A/B and STARC report of a project."
    interrupted_note = REPORT_NOT_STORED_NOTE

    def add_arguments(self, parser):
        parser.add_argument("slug")
        parser.add_argument("--json", action="store_true", help="print one JSON object")
        parser.add_argument("--stage", help="only this stage (its name or id)")
        parser.add_argument("--group-by", choices=GROUP_FIELDS, help="agreement groups")
        parser.add_argument("--refresh", action="store_true", help="ignore the cache")

    def handle(self, *args, **options):
        project = Project.objects.filter(slug=options["slug"]).first()
        if project is None:
            raise CommandError(f"project {options['slug']!r} does not exist")
        stage = None
        if options["stage"]:
            stage = project_stage_by_ref(project=project, ref=options["stage"])
            if stage is None:
                names = ", ".join(project.stages.values_list("name", flat=True)) or "none"
                raise CommandError(f"no stage {options['stage']!r} (stages: {names})")
        # A precompute path: a stale or missing report is recomputed and stored here.
        report = None if options["refresh"] else fresh_cached_report(
            project=project, stage=stage, group_by=options["group_by"])
        if report is None:
            report = report_refresh(project=project, stage=stage, group_by=options["group_by"])
        self.interrupted_note = REPORT_STORED_NOTE
        report = with_current_worker_columns(report, project=project)
        if options["json"]:
            self.stdout.write(json_dumps_strict(report, ensure_ascii=False))
            return
        self.stdout.write(_summary(report))


def _fmt(value) -> str:
    return "—" if value is None else f"{value:.3f}" if isinstance(value, float) else str(value)


def _summary(report: dict) -> str:
    lines = [f"Project {report['project']} ({report['kind']}), "
             f"{report['n_judgments']} judgments"]
    lines.append("Agreement:")
    for group, row in report["agreement"].items():
        undefined = row.get("alpha_undefined")
        agreement = (f"α undefined: {undefined};" if row["krippendorff_alpha"] is None
                     and undefined else
                     f"α={_fmt(row['krippendorff_alpha'])} κ={_fmt(row.get('fleiss_kappa'))}")
        lines.append(
            f"  {group:<30} {agreement} items={row['n_items']} judgments={row['n_judgments']}"
        )
    if report.get("stages"):
        lines.append("Stages:")
        for row in report["stages"]:
            alpha = (f"α undefined: {row['alpha_undefined']}"
                     if row["krippendorff_alpha"] is None and row.get("alpha_undefined")
                     else f"α={_fmt(row['krippendorff_alpha'])}")
            line = (f"  {row['name']:<30} {alpha}; judgments={row['n_judgments']} "
                    f"items={row['n_items']} workers={row['n_workers']}")
            gate = row.get("gate")
            if gate:
                gate_alpha = (f"undefined ({gate['alpha_undefined']})"
                              if gate["alpha"] is None and gate.get("alpha_undefined")
                              else _fmt(gate["alpha"]))
                verdict = ("passes" if gate["passes"] else
                           f"published with an override (“{gate['overridden']}”)"
                           if gate.get("overridden") else "blocked")
                line += (f"; agreement guard {verdict}: α of “{gate['stage'] or '—'}” "
                         f"{gate_alpha} vs {_fmt(gate['threshold'])}")
            lines.append(line)
    flagged = [w for w in report["workers"] if w["flags"]]
    lines.append(f"Workers: {len(report['workers'])}, flagged {len(flagged)}")
    for w in flagged[:20]:
        lines.append(f"  {w['external_id']}: {', '.join(flags_with_reasons(w))}")
    lines += _undefined_worker_lines(report["workers"])
    if report["lfqa"]:
        lines.append("Long-form A/B by domain:")
        for domain, row in report["lfqa"]["by_domain"].items():
            lines.append(f"  {domain:<12} H/H {_fmt(row['prefer_higher_voted_hh'])} "
                         f"H/M {_fmt(row['prefer_model_hm'])} " + (
                             f"κ undefined: {row['fleiss_undefined']}"
                             if row["fleiss_kappa"] is None and row.get("fleiss_undefined")
                             else f"κ {_fmt(row['fleiss_kappa'])}"))
    board = (report.get("leaderboard") or {}).get("overall") or {}
    if board.get("error"):
        lines.append(f"Leaderboard: none ({board['error']})")
    if board.get("systems"):
        lines.append(f"Leaderboard ({board['model']['name']}, {board['model']['n_votes']} votes; "
                     "strength [95% CI by item] ranks, rank by that CI):")
        groups = board["model"].get("components")
        for row in board["systems"]:
            ci = row["ci_item"] or [None, None]
            ranks = row["rank_interval_item"] or ["?", "?"]
            # Systems never compared, even through others, are ranked within their group.
            group = f" (group {row['component']})" if groups else ""
            # The rank by the interval (`rank_ci_item`): overlapping intervals share one.
            by_ci = row.get("rank_ci_item")
            lines.append(f"  {row['rank']}. {row['system']:<24} {_fmt(row['strength'])} "
                         f"[{_fmt(ci[0])}, {_fmt(ci[1])}] ranks {ranks[0]}-{ranks[1]}"
                         f", by CI {_fmt(by_ci)}{group}")
        if groups:
            lines.append("  Groups never compared with each other, ranked each on its own: "
                         + " | ".join(", ".join(names) for names in groups))
        # Why an interval or a rank is missing: the dashboard's notes, word for word.
        lines += [f"  {note}" for note in board.get("notes") or []]
    lines += _estimate_lines(report.get("estimates") or {})
    if report["starc"]:
        lines += _starc_lines(report["starc"])
    return "\n".join(lines)


def _undefined_worker_lines(workers: list[dict]) -> list[str]:
    """The workers whose α contribution is undefined, grouped by why (the dashboard's words):
    one line per reason, the first 10 workers named."""
    by_reason: dict[str, list[str]] = {}
    for w in workers:
        if w.get("alpha_contribution") is None and w.get("alpha_undefined"):
            by_reason.setdefault(w["alpha_undefined"], []).append(w["external_id"])
    lines = []
    for why, names in by_reason.items():
        more = f" and {len(names) - 10} more" if len(names) > 10 else ""
        lines.append(f"  α contribution undefined ({why}): {', '.join(names[:10])}{more}")
    return lines


def _starc_lines(starc: dict) -> list[str]:
    """The dashboard's STARC section as text: choice rates (and A before reading), the
    weighted rows, validity judging, the questions to revise."""
    lines = [f"STARC ({starc['experiment_mode'] or 'no mode'}): {starc['n_participants']} "
             f"participants, {starc['n_excluded_practice']} excluded for failing practice "
             f"items; {starc['n_judgments']} trials analysed"]
    before = (starc.get("before_reading") or {}).get("accuracy") or {}
    if starc["choice_rates"]:
        lines.append(f"  {'source / level':<20} {'n':>5} {'A':>6} {'B':>6} {'C':>6} {'D':>6}"
                     + (f" {'A before reading':>17}" if before else ""))
        for key, r in starc["choice_rates"].items():
            lines.append(f"  {key:<20} {r['n']:>5} {_fmt(r['A']):>6} {_fmt(r['B']):>6} "
                         f"{_fmt(r['C']):>6} {_fmt(r['D']):>6}"
                         + (f" {_fmt(before.get(key)):>17}" if before else ""))
        for key, value in starc["accuracy_weighted"].items():
            lines.append(f"  {key + ', levels weighted':<26} {_fmt(value):>6}")
    for key, v in (starc.get("validity") or {}).items():
        lines.append(f"  validity {key:<20} items={v['n_items']} all judges invalid "
                     f"{_fmt(v['invalid_share'])} approximate ceiling {_fmt(v['ceiling'])}")
    flags = starc.get("question_flags") or {}
    if flags:
        lines.append(f"  Questions to revise: {len(flags)}")
        for question, met in list(flags.items())[:20]:
            lines.append(f"    {question}: {', '.join(met)}")
    return lines


def _interval(row: dict | None, why: str | None = None) -> str:
    """An estimate with its interval, or why it cannot be made (the dashboard's words)."""
    why = (row or {}).get("undefined") or why
    if not row or row.get("estimate") is None:
        return f"undefined ({why})" if why else "—"
    if row.get("low") is None and why:
        return f"{row['estimate']:.3f} (no interval: {why})"
    if row.get("low") is None:
        return f"{row['estimate']:.3f}"
    return f"{row['estimate']:.3f} [{row['low']:.3f}, {row['high']:.3f}]"


def _points(cell: dict) -> str:
    return (f"{cell['difference'] * 100:+.1f} points "
            f"[{cell['low'] * 100:+.1f}, {cell['high'] * 100:+.1f}]")


def _estimate_lines(estimates: dict) -> list[str]:
    """Each system's accuracy from humans, the judge (LERC by default) and both, and which
    pairs are told apart."""
    if not estimates.get("systems"):
        return [f"System accuracy: {estimates['skipped']}"] if estimates.get("judge") else []
    judge = (estimates.get("metric") or {}).get("judge") or "LERC"
    lines = [f"System accuracy (95% intervals; human | {judge} alone | prediction-powered):"]
    if estimates.get("measured_on"):
        lines.append(f"  {estimates['measured_on']['text']}")
    for system, row in estimates["systems"].items():
        accuracy = row["accuracy"]
        metric = accuracy.get("metric") or {}
        ppi = accuracy.get("ppi") or {}
        worth = (f", worth {ppi['effective_n']:.0f} human judgments"
                 if ppi.get("effective_n") else
                 f", worth: {ppi['effective_n_undefined']}" if ppi.get("effective_n_undefined")
                 else "")
        if row["n_judged"] and row["n_judged"] == row["n_items"]:
            worth = (f", all judged: exact for these items; on new questions "
                     f"{_interval(accuracy.get('human_new_questions'))}")
        bias = (_fmt(metric.get("bias")) if metric.get("bias") is not None
                else f"undefined: {metric.get('bias_undefined')}")
        alone = (f"{_fmt(metric.get('estimate'))} (bias {bias})" if metric
                 else f"undefined ({accuracy.get('judge_undefined')})")
        lines.append(f"  {system:<20} {_interval(accuracy['human'])} | {alone} | "
                     f"{_interval(ppi, accuracy.get('judge_undefined'))}  "
                     f"[{row['n_judged']} judged of {row['n_items']}{worth}]")
    for pair in estimates["pairs"]:
        best = pair["accuracy"].get(pair.get("shown") or "ppi") or pair["accuracy"].get("human")
        if best and best.get("difference") is None and best.get("undefined"):
            lines.append(f"  {pair['a']} − {pair['b']}: undefined ({best['undefined']})")
        if not best or best.get("difference") is None:
            continue
        verdict = ("every item judged: exact for these items"
                   if best.get("se") == 0 and pair.get("every_item_judged") else
                   "separated" if best["separated"] else
                   f"not separated; about {best['more_judgments_needed']} more judgments"
                   if best["more_judgments_needed"] is not None else "not separated")
        line = (f"  {pair['a']} − {pair['b']}: {_points(best)} ({best['method']}), {verdict}")
        general = pair["accuracy"].get("human_new_questions")
        if general and general.get("difference") is not None and best["method"] == "human":
            line += (f"; on new questions {_points(general)}, "
                     f"{'separated' if general['separated'] else 'not separated'}")
        lines.append(line)
    for key in ("left_out_note", "note"):
        if estimates.get(key):
            lines.append(f"  {estimates[key]}")
    return lines
