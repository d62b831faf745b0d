"""Every judge of a project against its human labels, side by side.

    python manage.py judge_report SLUG [--judge metric:f1,my-llm,imported@1] [--resamples N]
                                  [--labels N] [--json FILE] [--disagreements N]

Judges: `metric:NAME` (stored scores of a registered metric, LERC included) and LLM or imported
judges by name (`NAME` = latest version with verdicts on the project, `NAME@V`); by default
every metric stored on the project and every judge with verdicts on it. Printed: accuracy,
Cohen's kappa, ROC AUC, Pearson/Spearman, ECE with 95% bootstrap intervals; the human ceiling;
paired tests; bias cards; disagreements; prediction-powered accuracy with each judge and its
effective n (`--labels` human labels drawn at random, the rest read as unlabelled).
"""
from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from core.json_limits import json_dumps_strict
from core.output_files import OutputPathError, output_file
from core.statistics import MAX_RESAMPLES, resamples_check
from metrics_app.management.projects import projects_by_slug
from metrics_app.services.judges.alignment import ESTIMATE_LABELS, judge_alignment_report


def _f(value, digits=3, *, why: str | None = None) -> str:
    """The number, or why it is undefined (the pages' words), or "–"."""
    if value is None:
        return f"undefined ({why})" if why else "–"
    return f"{value:.{digits}f}"


def _interval(cell: dict) -> str:
    """An estimate's " [low, high]", or why it has none (the pages' words)."""
    if cell.get("low") is None and cell.get("undefined"):
        return f" (no interval: {cell['undefined']})"
    return f" [{_f(cell.get('low'))}, {_f(cell.get('high'))}]"


def _ci(cell) -> str:
    if not cell or cell[0] is None:
        return ""
    return f" [{_f(cell[0])}, {_f(cell[1])}]"


class Command(BaseCommand):
    help = "Judges (LLM, imported, metrics, LERC) against the human labels, side by side."

    def add_arguments(self, parser):
        parser.add_argument("slug")
        parser.add_argument("--judge", default="", help="Comma-separated judge references.")
        parser.add_argument("--resamples", type=int, default=1000,
                            help=f"Bootstrap resamples for the intervals (0: none; at most "
                                 f"{MAX_RESAMPLES}, as the API).")
        parser.add_argument("--labels", type=int, default=ESTIMATE_LABELS,
                            help="Human labels the prediction-powered estimates use (at "
                                 "least 2).")
        parser.add_argument("--disagreements", type=int, default=3,
                            help="Disagreements shown per judge (0 or more).")
        parser.add_argument("--json", type=Path, default=None, help="Write the whole report.")
        parser.add_argument("--plan", type=float, default=None, metavar="USD",
                            help="Recommend a judge and a number of human labels for this "
                                 "budget (a power/cost table) and stop.")
        parser.add_argument("--label-cost", type=float, default=0.5,
                            help="USD per human label, for --plan (default 0.5).")
        parser.add_argument("--estimates-with", default="",
                            help="Print each system's accuracy estimated with this judge "
                                 "(the project's real human sample) and stop.")

    def handle(self, *args, **options):
        try:
            resamples_check(options["resamples"], "--resamples")  # the API's limits
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        # Said, not bent: `--labels -4` ran with 2 labels and `--disagreements -1` listed every
        # disagreement but the last (a negative slice).
        if options["labels"] < 2:
            raise CommandError(f"--labels: at least 2 human labels for the estimates, not "
                               f"{options['labels']}")
        if options["disagreements"] < 0:
            raise CommandError(f"--disagreements: how many to show, 0 or more, not "
                               f"{options['disagreements']}")
        (project,) = projects_by_slug([options["slug"]])
        if options["plan"] is not None:
            return self._plan(project, options)
        if options["estimates_with"]:
            return self._estimates(project, options["estimates_with"])
        refs = [r.strip() for r in options["judge"].split(",") if r.strip()] or None
        try:  # a bad --json path is said before the report is computed, not after it
            json_out = output_file(options["json"]) if options["json"] else None
        except OutputPathError as exc:
            raise CommandError(f"--json {exc}") from None
        report = judge_alignment_report(project=project, refs=refs,
                                        n_resamples=options["resamples"],
                                        estimate_labels=options["labels"])
        if json_out is not None:
            with json_out as handle:
                handle.write(json_dumps_strict(report, indent=1, default=str))
        if "skipped" in report:
            self.stdout.write(report["skipped"])
            return
        out = self.stdout.write
        out(f"{project.slug}: {report['measured_on']['text']}; 95% bootstrap intervals "
            f"({report['n_resamples']} resamples)")
        ceiling = report["ceiling"]
        out("human ceiling (each judgment vs the others' majority): " + (
            f"accuracy {_f(ceiling['accuracy'])}{_ci(ceiling['ci']['accuracy'])}, kappa "
            f"{_f(ceiling['kappa'], why=ceiling.get('kappa_undefined'))}"
            f"{_ci(ceiling['ci']['kappa'])} on {ceiling['n_items']} items"
            if ceiling["n_pairs"] else "no item has two human labels"))
        for label, error in report["errors"].items():
            out(f"{label}: not compared: {error}")
        for label, j in report["judges"].items():
            left_out = (f", {j['left_out_seen']} it saw left out (its version trained or "
                        "calibrated on them)" if j.get("left_out_seen") else "")
            out(f"\n{label} ({j['kind']}, {j['judged_with_labels']} items{left_out}; "
                f"{j['decision']}; {j['unparseable']} of {j['asked']} unparseable)")
            for name in ("accuracy", "kappa", "roc_auc", "pearson", "spearman", "ece"):
                why = (j.get("undefined") or {}).get(name)
                out(f"  {name:9} {_f(j.get(name), why=why)}{_ci(j['ci'].get(name))}")
            c = j["confusion"]
            out(f"  confusion (judge/human): c/c {c['judge_correct_human_correct']}  c/i "
                f"{c['judge_correct_human_incorrect']}  i/c {c['judge_incorrect_human_correct']}"
                f"  i/i {c['judge_incorrect_human_incorrect']}")
            bias = j["bias"]
            if "length" in bias and bias["length"]["difference"] is not None:
                lb = bias["length"]
                out(f"  length bias: Spearman(length, judge) - Spearman(length, human) = "
                    f"{_f(lb['difference'])}{_ci(lb['ci'])}"
                    f"{' (favours longer answers)' if lb['favours_longer'] else ''}")
            if "position" in bias:
                pb = bias["position"]
                out(f"  position: first shown wins {_f(pb['first_position_rate'])}"
                    f"{_ci(pb['ci_first'])}, consistent across orders "
                    f"{_f(pb['position_consistency'])}{_ci(pb['ci_consistency'])}")
            for column in ("source", "dataset"):
                for name, g in (bias.get(column) or {}).items():
                    out(f"  {column} {name}: accuracy {_f(g['accuracy'])}"
                        f"{_ci(g['accuracy_ci'])}, judge - human "
                        f"positive rate {_f(g['gap'])}{_ci(g['ci'])}")
            for row in j["disagreements"][:options["disagreements"]]:
                out(f"  disagrees on {row['item']}: humans {row['human_label']} "
                    f"(n={row['human_n']}, {row.get('human_mean_of', 'mean')} "
                    f"{row['human_mean']:.2f}), judge "
                    f"{row['judge_verdict']}: {row['reasoning'][:100]!r}")
        if report["paired"]:
            out("\npaired (same items): accuracy A - B [95%], McNemar p")
            for p in report["paired"]:
                out(f"  {p['a']} vs {p['b']}: {_f(p['accuracy_difference'])}{_ci(p['ci'])}, "
                    f"p={_f(p['mcnemar_p'], 4)} (n={p['n']})")
        if report["estimates"]:
            out("\naccuracy estimates with each judge (PPI++; the labels drawn at random)")
            for label, e in report["estimates"].items():
                if "skipped" in e:
                    continue
                ppi, alone = e["ppi"], e["human"]
                out(f"  {label}: {_f(ppi['estimate'])}{_interval(ppi)} "
                    f"effective n {_f(ppi['effective_n'], 0)} from {e['n_labels']} labels "
                    f"(humans alone [{_f(alone['low'])}, {_f(alone['high'])}]; all "
                    f"{e['labels_available']} labels: {_f(e['all_labels_accuracy'])})")
        for name, rows in report["history"].items():
            if len(rows) > 1:
                out(f"\nhistory of {name}: " + "; ".join(
                    f"v{r['version']} accuracy {_f(r['accuracy'])} kappa {_f(r['kappa'])}"
                    for r in rows))

    def _estimates(self, project, ref: str) -> None:
        from annotation.judgment_selectors import load_judgments
        from metrics_app.reports.estimates import estimates_report

        report = estimates_report(load_judgments(project=project), project=project, judge=ref)
        if "skipped" in report:
            raise CommandError(report["skipped"])
        self.stdout.write(f"system estimates with {report['metric']['judge']} "
                          f"(accuracy, 95% intervals)")
        if report.get("left_out_note"):
            self.stdout.write(f"  {report['left_out_note']}")
        for system, row in report["systems"].items():
            human = row["accuracy"]["human"]
            ppi = row["accuracy"].get("ppi") or {}
            no_judge = row["accuracy"].get("judge_undefined")
            self.stdout.write(
                f"  {system}: {row['n_judged']} of {row['n_items']} judged by humans; humans "
                f"{_f(human['estimate'], why=human.get('undefined'))}"
                f"{_interval(human) if human['estimate'] is not None else ''}; with the judge "
                f"{_f(ppi.get('estimate'), why=ppi.get('undefined') or no_judge)}"
                f"{_interval(ppi) if ppi.get('estimate') is not None else ''}, effective n "
                f"{_f(ppi.get('effective_n'), 0, why=ppi.get('effective_n_undefined'))}")

    def _plan(self, project, options) -> None:
        from metrics_app.services.judges.planning import judge_plan

        refs = [r.strip() for r in options["judge"].split(",") if r.strip()] or None
        try:
            result = judge_plan(project=project, budget=options["plan"],
                                label_cost=options["label_cost"], refs=refs)
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        out = self.stdout.write
        out(f"budget ${result['budget']:g} at ${result['label_cost']:g} per human label; "
            f"{result['n_items']} items; widths predicted from {result['pilot_labels']} "
            f"labelled items (95% half-width of the accuracy over the project's items)")
        out(f"  {'judge':24} {'judge cost':>10} {'labels':>7} {'half-width':>10} "
            f"{'worth (labels)':>14}")
        for name, row in sorted(result["per_judge"].items(),
                                key=lambda kv: kv[1]["half_width_at_budget"] or 9):
            out(f"  {name:24} {row['judge_cost']:>10.2f} {row['affordable_labels']:>7} "
                f"{_f(row['half_width_at_budget']):>10} {_f(row['worth_labels'], 0):>14}")
        sizes = sorted({row["n_labels"] for row in result["table"]})
        if sizes:
            out("  half-width by human labels: " + " ".join(f"{n:>6}" for n in sizes))
            widths = {(row["judge"], row["n_labels"]): row["half_width"]
                      for row in result["table"]}
            for name in result["per_judge"]:
                out(f"  {name:27}" + " ".join(
                    f"{_f(widths.get((name, n))):>6}" for n in sizes))
        for name, row in result["per_judge"].items():
            if row.get("half_width_undefined"):
                out(f"  {name}: no width predicted: {row['half_width_undefined']}")
        best = result["best"]
        out("recommended: " + (f"{best['judge']} with {best['n_labels']} human labels "
                               f"(±{best['half_width']:.3f}, ${best['cost']:g})"
                               if best else result.get("best_undefined")
                               or "nothing fits this budget"))
        for ref, error in result["errors"].items():
            out(f"{ref}: left out: {error}")
        for label, n in result.get("left_out_seen", {}).items():
            out(f"{label}: its predictions on the {n} answers its version trained or "
                "calibrated on are not used; the plan predicts them unsure (0.5), as the "
                "estimates do")
