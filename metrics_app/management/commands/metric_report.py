"""How well each metric tracks the human judgments of a project.

    python manage.py metric_report SLUG [--json] [--znormalize] [--drop-exact-matches]
                                        [--drop-number-pairs] [--resamples N] [--refresh]

Per metric and group (overall, dataset:..., source:...): {pearson, spearman, kendall, n} with
bootstrap intervals; plus `minimal_pairs` and `pairwise` (A/B) sections where the project has
them. Uses the cached report unless it is stale or --refresh is given; scores must have been
computed first (`score_project`, the metrics page or the API). Likert projects also get
`decision` (accuracy, F1, Cohen's κ at a threshold chosen on validation items, ROC AUC) and
`significance` (Williams' test and a paired bootstrap for every two metrics).
"""
from __future__ import annotations

from django.core.management.base import CommandError

from annotation.judgment_selectors import human_score_name
from annotation.models import Project
from core.json_limits import json_dumps_strict
from core.output_files import REPORT_NOT_STORED_NOTE, REPORT_STORED_NOTE, InterruptibleCommand
from core.statistics import MAX_RESAMPLES, resamples_check
from metrics_app.management.scoring_options import unscorable_advice
from metrics_app.services.meta_evaluation_report import (
    metric_report_cached,
    metric_report_refresh,
)


def _fmt(value) -> str:
    return "   –  " if value is None else f"{value:6.3f}"


class Command(InterruptibleCommand):
    help = "Correlations of automatic metrics with the human judgments of a project."
    interrupted_note = REPORT_NOT_STORED_NOTE

    def add_arguments(self, parser):
        parser.add_argument("slug")
        parser.add_argument("--json", action="store_true", help="Print the report as JSON.")
        parser.add_argument("--znormalize", action="store_true",
                            help="z-normalize each annotator's scores before averaging.")
        parser.add_argument("--drop-exact-matches", action="store_true")
        parser.add_argument("--drop-number-pairs", action="store_true")
        parser.add_argument("--resamples", type=int, default=1000,
                            help=f"Bootstrap resamples for the intervals (0: none; at most "
                                 f"{MAX_RESAMPLES}, as the API).")
        parser.add_argument("--refresh", action="store_true", help="Ignore the cached report.")

    def handle(self, *args, **options):
        try:
            resamples_check(options["resamples"], "--resamples")  # the API's limits
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        try:
            project = Project.objects.get(slug=options["slug"])
        except Project.DoesNotExist as exc:
            raise CommandError(f"no project with slug {options['slug']!r}") from exc
        params = {"znormalize": options["znormalize"],
                  "drop_exact_matches": options["drop_exact_matches"],
                  "drop_number_pairs": options["drop_number_pairs"],
                  "n_resamples": options["resamples"]}
        report, stale = metric_report_cached(project=project, params=params)
        if report is None or stale or options["refresh"]:
            report = metric_report_refresh(project=project, params=params)
        self.interrupted_note = REPORT_STORED_NOTE
        data = report.data
        if options["json"]:
            self.stdout.write(json_dumps_strict(data, indent=2, ensure_ascii=False))
            return
        if not data.get("metrics") and (advice := unscorable_advice(project)):
            self.stdout.write(f"No metric scores for {project.slug!r}: {advice}.")
        elif not data.get("metrics"):
            self.stdout.write(
                f"No metric scores yet for {project.slug!r}: compute them first, e.g.\n"
                f"  python manage.py score_project {project.slug} --metric em,f1,bleu1,rougeL,"
                "meteor,bertscore\n(or the metrics page, or the API).")
        if data.get("measured_on"):
            self.stdout.write(f"{project.slug}: {data['measured_on']['text']}.")
        for name, left in sorted((data.get("left_out_seen") or {}).items()):
            # The page's note: without it a LERC n below the other metrics' reads as a bug.
            self.stdout.write(
                f"{name} {left['version']} is measured on the {left['measured_on']} scored "
                f"answers it never saw: its version trained, or chose its epoch and "
                f"calibrator, on the other {left['items']} (or on another answer to the same "
                "passage), and measured there it would score its memory.")
        for name, groups in data.get("correlations", {}).items():
            self.stdout.write(f"\n{name} ({data['metrics'][name]})")
            self.stdout.write(f"  {'group':32} pearson spearman kendall      n")
            for group, row in groups.items():
                why = f"  undefined: {row['undefined']}" if row.get("undefined") else ""
                self.stdout.write(f"  {group:32} {_fmt(row['pearson'])} {_fmt(row['spearman'])}"
                                  f"  {_fmt(row['kendall'])} {row['n']:6d}{why}")
        self._decision(data.get("decision"), project)
        self._significance(data.get("significance"))
        for name, groups in data.get("minimal_pairs", {}).items():
            cells = ", ".join(f"{g} {_fmt(r['accuracy']).strip()} (n={r['n']})"
                              for g, r in groups.items())
            self.stdout.write(f"minimal pairs {name}: {cells}")
        pairwise = data.get("pairwise")
        if pairwise:
            rows = {**{f"[{k}]": v for k, v in pairwise["baselines"].items()},
                    **pairwise["metrics"]}
            for name, groups in rows.items():
                cells = ", ".join(
                    f"{g} {_fmt(groups[g]['accuracy']).strip()}"
                    + (f" (undefined: {groups[g]['undefined']})"
                       if groups[g].get("undefined") else "")
                    for g in pairwise["groups"])
                self.stdout.write(f"pairwise {name}: {cells}")

    def _decision(self, decision: dict | None, project: Project) -> None:
        if not decision:
            return
        self.stdout.write(
            f"\ncorrect / incorrect ({human_score_name(project)} ≥ "
            f"{decision['correct_at']:g}); each "
            f"metric's threshold chosen on {decision['threshold_chosen_on']} "
            f"({decision['n_validation_items']} items), measured on the other "
            f"{decision['n_test_items']}:")
        self.stdout.write(f"  {'metric':12} {'group':28} threshold accuracy     f1  kappa"
                          "  roc_auc      n")
        for name, groups in decision["metrics"].items():
            for group, row in groups.items():
                self.stdout.write(
                    f"  {name:12} {group:28} {_fmt(row['threshold'])}   {_fmt(row['accuracy'])}"
                    f" {_fmt(row['f1'])} {_fmt(row['kappa'])}   {_fmt(row['roc_auc'])}"
                    f" {row['n']:6d}"
                    + (f"  kappa undefined: {row['kappa_undefined']}"
                       if row.get("kappa_undefined") else ""))

    def _significance(self, significance: dict | None) -> None:
        if not significance or not significance["pairs"]:
            return
        self.stdout.write("\ndoes a correlate better with the human scores than b? (Pearson, "
                          "overall; Williams' test one-sided, paired bootstrap)")
        for pair in significance["pairs"]:
            williams = pair["williams"] or {}
            boot = pair["bootstrap"]
            low, high = boot["ci"]
            self.stdout.write(
                f"  {pair['a']:>10} {_fmt(pair['pearson_a']).strip()} vs {pair['b']:<10} "
                f"{_fmt(pair['pearson_b']).strip()}: Williams p = "
                f"{_p(williams.get('p_one_sided'))}, difference "
                f"{_fmt(boot['difference']).strip()} [{_fmt(low).strip()}, {_fmt(high).strip()}]"
                f", bootstrap p = {_p(boot['p_not_better'])}")


def _p(value) -> str:
    if value is None:
        return "–"
    return "< 0.001" if value < 0.001 else f"{value:.3f}"
