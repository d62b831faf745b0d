"""Every server-side chart (matplotlib, Agg), drawn from numbers already read, never the database:
inline SVG (dashboard, model card), PNG for the plots behind their own .png URLs (`<img>`)."""
from __future__ import annotations

import io

from core.vocabulary import TaskKind

PALETTE = ["#2b6cb0", "#dd6b20", "#38a169", "#c53030", "#805ad5", "#d69e2e", "#319795"]


def _matplotlib_ready() -> None:
    """The Agg backend, and every text drawn as the characters it holds: labels are data
    (dataset, domain, system, stage and worker names), and with mathtext on a "$...$" in one
    was typeset as a formula, or raised ValueError ("$\\frac{$": the dashboard answered 500
    and the report refresh failed on every run)."""
    import matplotlib

    matplotlib.use("Agg")
    matplotlib.rcParams["text.parse_math"] = False


def _figure(width: float = 6.0, height: float = 3.0, *, left: float = 0.7, right: float = 0.2,
            top: float = 0.3, bottom: float = 0.6):
    """A figure with fixed margins in inches (a layout engine measures every text twice and
    costs more than drawing the chart)."""
    _matplotlib_ready()
    from matplotlib.figure import Figure

    # Figure() rather than pyplot: no global state shared between request threads.
    fig = Figure(figsize=(width, height), dpi=100)
    fig.subplots_adjust(left=left / width, right=1 - right / width, top=1 - top / height,
                        bottom=bottom / height)
    return fig


def _label_margin(labels: list[str], fontsize: float = 8) -> float:
    """Inches needed left of the axes for y tick labels of this length."""
    return 0.25 + 0.6 * fontsize / 72 * max((len(label) for label in labels), default=4)


def _svg(fig) -> str:
    import matplotlib

    buffer = io.StringIO()
    # Text as <text> elements rather than glyph paths: smaller, faster, selectable.
    with matplotlib.rc_context({"svg.fonttype": "none"}):
        fig.savefig(buffer, format="svg")
    text = buffer.getvalue()
    return text[text.index("<svg"):]  # drop the XML prolog so it can be inlined in HTML


def likert_histograms(likert: dict) -> str | None:
    """Grouped bars: share of each score per dataset."""
    groups = likert.get("distribution") or {}
    if not groups:
        return None
    fig = _figure(7, 3, right=2.2)
    ax = fig.add_subplot()
    names = list(groups)[:7]
    scores = list(next(iter(groups.values()))["shares"])
    width = 0.8 / len(names)
    for i, name in enumerate(names):
        shares = [groups[name]["shares"].get(s) or 0 for s in scores]
        ax.bar([k + i * width for k in range(len(scores))], shares, width,
               label=f"{name} (n={groups[name]['n']})", color=PALETTE[i % len(PALETTE)])
    ax.set_xticks([k + 0.4 - width / 2 for k in range(len(scores))], scores)
    ax.set_xlabel("score")
    ax.set_ylabel("share of judgments")
    ax.legend(fontsize=8, frameon=False, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.spines[["top", "right"]].set_visible(False)
    return _svg(fig)


def agreement_chart(agreement: dict) -> str | None:
    """α per group with its bootstrap 95% CI as horizontal error bars."""
    rows = [(name, row) for name, row in agreement.items()
            if row.get("krippendorff_alpha") is not None]
    if not rows:
        return None
    rows = rows[:25]
    fig = _figure(7, 0.9 + 0.3 * len(rows), left=_label_margin([n for n, _r in rows]))
    ax = fig.add_subplot()
    ys = list(range(len(rows)))[::-1]
    alphas = [row["krippendorff_alpha"] for _name, row in rows]
    lows = [(row.get("alpha_ci") or {}).get("low") for _name, row in rows]
    highs = [(row.get("alpha_ci") or {}).get("high") for _name, row in rows]
    # One errorbar artist for all groups (one per group is slow to render).
    xerr = [[a - lo if lo is not None else 0 for a, lo in zip(alphas, lows, strict=True)],
            [hi - a if hi is not None else 0 for a, hi in zip(alphas, highs, strict=True)]]
    ax.errorbar(alphas, ys, xerr=xerr, fmt="o", color=PALETTE[0], ecolor="#718096",
                elinewidth=2, capsize=0)
    ax.set_yticks(ys, [name for name, _row in rows], fontsize=8)
    ax.axvline(0.8, color="#38a169", linestyle=":", linewidth=1)
    ax.axvline(0.667, color="#d69e2e", linestyle=":", linewidth=1)
    ax.set_xlabel("Krippendorff's α (dots) with 95% bootstrap CI; dotted: 0.667 and 0.8")
    ax.spines[["top", "right"]].set_visible(False)
    return _svg(fig)


def worker_scatter(workers: list[dict], *, kind: str) -> str | None:
    """Agreement with the others against median seconds per item; flagged workers in red."""
    points = [w for w in workers
              if w.get("agreement_with_others") is not None and w.get("median_time_s")]
    if not points:
        return None
    fig = _figure(7, 3.5, left=0.8)
    ax = fig.add_subplot()
    flagged = [w for w in points if w["flags"]]
    calm = [w for w in points if not w["flags"]]
    for group, color, label in ((calm, PALETTE[0], "ok"), (flagged, PALETTE[3], "flagged")):
        if group:
            ax.scatter([w["median_time_s"] for w in group],
                       [w["agreement_with_others"] for w in group], color=color, s=18,
                       label=f"{label} ({len(group)})")
    # Label the most suspicious few only; the table below lists everyone.
    for w in flagged[:12]:
        ax.annotate(w["external_id"][:14], (w["median_time_s"], w["agreement_with_others"]),
                    fontsize=7, xytext=(3, 3), textcoords="offset points")
    ax.legend(fontsize=8, frameon=False)
    from matplotlib.ticker import LogLocator, NullFormatter, StrMethodFormatter

    ax.set_xscale("log")
    # Plain numbers on the log axis: the default 2×10¹ minor labels go through mathtext,
    # which costs more than the rest of the chart.
    ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.xaxis.set_major_formatter(StrMethodFormatter("{x:g}"))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("median seconds per item (log scale)")
    # An axis that runs the usual way (it was inverted for Likert, which read as an error);
    # the label says which direction is better.
    ax.set_ylabel("mean |score − others' mean|\n(lower: closer to the others)" if kind == TaskKind.LIKERT
                  else "share of others choosing the same\n(higher: closer to the others)",
                  fontsize=8)
    ax.spines[["top", "right"]].set_visible(False)
    return _svg(fig)


def starc_choice_bars(starc: dict) -> str | None:
    """Stacked A/B/C/D choice rates per source/level (and before reading in the pilot)."""
    blocks = [("", starc.get("choice_rates") or {})]
    if starc.get("before_reading"):
        blocks.insert(0, ("before: ", starc["before_reading"]["choice_rates"]))
    bars = [(prefix + key, rates) for prefix, rates_by_key in blocks
            for key, rates in rates_by_key.items() if rates.get("n")]
    if not bars:
        return None
    fig = _figure(7, 1.1 + 0.32 * len(bars), top=0.5,
                  left=_label_margin([f"{key} (n={rates['n']})" for key, rates in bars]))
    ax = fig.add_subplot()
    ys = list(range(len(bars)))[::-1]
    left = [0.0] * len(bars)
    for i, role in enumerate("ABCD"):
        widths = [rates.get(role) or 0 for _key, rates in bars]
        ax.barh(ys, widths, left=left, color=PALETTE[i], label=role)
        left = [a + b for a, b in zip(left, widths, strict=True)]
    ax.set_yticks(ys, [f"{key} (n={rates['n']})" for key, rates in bars], fontsize=8)
    ax.set_xlim(0, 1)
    ax.set_xlabel("share of answers (A correct, B misreading, C distractor, D unsupported)")
    # Legend above the bars, never over them.
    ax.legend(ncols=4, fontsize=8, frameon=False, loc="lower center", bbox_to_anchor=(0.5, 1.0))
    ax.spines[["top", "right"]].set_visible(False)
    return _svg(fig)


def lfqa_bars(lfqa: dict) -> str | None:
    rows = lfqa.get("by_domain") or {}
    if not rows:
        return None
    fig = _figure(7, 3)
    ax = fig.add_subplot()
    names = list(rows)
    xs = range(len(names))
    ax.bar([x - 0.2 for x in xs], [rows[n]["prefer_higher_voted_hh"] or 0 for n in names], 0.4,
           label="H/H: prefers higher-voted", color=PALETTE[0])
    ax.bar([x + 0.2 for x in xs], [rows[n]["prefer_model_hm"] or 0 for n in names], 0.4,
           label="H/M: prefers model", color=PALETTE[1])
    ax.set_xticks(list(xs), names, fontsize=8)
    ax.set_ylim(0, 1)
    ax.axhline(0.5, color="#718096", linestyle=":", linewidth=1)
    ax.legend(fontsize=8, frameon=False)
    ax.spines[["top", "right"]].set_visible(False)
    return _svg(fig)


METHOD_STYLE = {"human": ("humans alone", PALETTE[0]),
                "ppi": ("prediction-powered", PALETTE[2])}


def _forest(rows: list[tuple[str, dict]], *, xlabel: str, zero_line: bool,
            judge: str = "LERC") -> str:
    """One line per row and method: point estimate and 95% interval; the metric alone (no
    interval) as a hollow marker."""
    labels = [name for name, _ in rows]
    fig = _figure(7, 0.45 * len(rows) + 1.0, left=_label_margin(labels), right=1.9)
    ax = fig.add_subplot()
    for row_index, (_name, methods) in enumerate(rows):
        y = len(rows) - 1 - row_index
        for offset, (method, (label, color)) in zip((0.15, -0.15), METHOD_STYLE.items(),
                                                     strict=True):
            cell = methods.get(method) or {}
            if cell.get("estimate") is None or cell.get("low") is None:
                continue
            ax.errorbar(cell["estimate"], y + offset,
                        xerr=[[cell["estimate"] - cell["low"]], [cell["high"] - cell["estimate"]]],
                        fmt="o", color=color, markersize=4, capsize=2,
                        label=label if row_index == 0 else None)
        metric = methods.get("metric") or {}
        if metric.get("estimate") is not None:
            ax.plot(metric["estimate"], y, marker="D", markersize=5, markerfacecolor="none",
                    color=PALETTE[1], linestyle="none",
                    label=f"{judge} alone (no interval)" if row_index == 0 else None)
    if zero_line:
        ax.axvline(0, color="#718096", linestyle=":", linewidth=1)
    ax.set_yticks(range(len(rows)), list(reversed(labels)), fontsize=8)
    ax.set_xlabel(xlabel)
    ax.legend(fontsize=8, frameon=False, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.spines[["top", "right"]].set_visible(False)
    return _svg(fig)


def estimates_forest(estimates: dict) -> str | None:
    """Each system's accuracy: humans alone, the estimates' judge (LERC by default) alone and
    prediction-powered."""
    systems = estimates.get("systems") or {}
    if not systems:
        return None
    return _forest([(name, _with_spread(row["accuracy"]))
                    for name, row in list(systems.items())[:20]],
                   xlabel="accuracy (share judged correct), 95% interval", zero_line=False,
                   judge=(estimates.get("metric") or {}).get("judge") or "LERC")


def _with_spread(methods: dict) -> dict:
    """Every item judged: the humans' interval over these items has width 0, so the plot shows
    the one for new questions like these instead (the table says which is which)."""
    human = methods.get("human") or {}
    general = methods.get("human_new_questions")
    if general and human.get("low") is not None and human.get("low") == human.get("high"):
        return {**methods, "human": general}
    return methods


def pairs_forest(estimates: dict) -> str | None:
    """Each pair's accuracy difference: an interval clear of 0 separates the two systems."""
    rows = []
    for pair in (estimates.get("pairs") or [])[:20]:
        methods = _with_spread({
            method: {"estimate": cell["difference"], "low": cell["low"], "high": cell["high"]}
            for method, cell in pair["accuracy"].items() if cell.get("difference") is not None})
        if methods:
            rows.append((f"{pair['a']} − {pair['b']}", methods))
    if not rows:
        return None
    return _forest(rows, xlabel="difference in accuracy, 95% interval", zero_line=True)


def dashboard_charts(report: dict) -> dict[str, str | None]:
    estimates = report.get("estimates") or {}
    return {
        "estimates": estimates_forest(estimates),
        "pairs": pairs_forest(estimates),
        "agreement": agreement_chart(report["agreement"]),
        "likert": likert_histograms(report["likert"]) if report["likert"] else None,
        "workers": worker_scatter(report["workers"], kind=report["kind"]),
        "starc": starc_choice_bars(report["starc"]) if report["starc"] else None,
        "lfqa": lfqa_bars(report["lfqa"]) if report["lfqa"] else None,
    }


def baseline_bars(rows: dict, *, measure: str, highlight: str = "lerc") -> str | None:
    """A model card's comparison: one horizontal bar per metric (the model and each baseline)
    for one measure (e.g. Pearson), with its 95% interval where measured; the model is drawn
    in its own colour. None when fewer than one row has the measure."""
    shown = [(name, row) for name, row in rows.items()
             if isinstance(row, dict) and row.get(measure) is not None]
    if not shown:
        return None
    names = [name for name, _ in shown]
    height = 0.6 + 0.32 * len(shown)
    fig = _figure(5.5, height + 0.6, left=_label_margin(names), right=0.5, top=0.15,
                  bottom=0.5)
    ax = fig.add_subplot()
    ys = list(range(len(shown)))[::-1]
    values = [row[measure] for _, row in shown]
    colours = [PALETTE[1] if name == highlight else PALETTE[0] for name in names]
    ax.barh(ys, values, 0.6, color=colours)
    for y, (_, row) in zip(ys, shown, strict=True):
        ci = row.get(f"{measure}_ci")
        if ci and None not in ci:
            ax.plot(ci, [y, y], color="#1a202c", linewidth=1)
    ax.set_yticks(ys, names, fontsize=8)
    low = min(0.0, *values)
    ax.set_xlim(low, max(1.0, *values))
    ax.set_xlabel(measure.replace("_", " "), fontsize=8)
    ax.tick_params(axis="x", labelsize=8)
    ax.spines[["top", "right"]].set_visible(False)
    return _svg(fig)


def _png(fig) -> bytes:
    """A figure laid out tightly (a standalone image has no page margins around it) as PNG."""
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    return buffer.getvalue()


def _image_figure(width: float, height: float):
    """A figure for a PNG plot (110 dpi, one axes)."""
    _matplotlib_ready()
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height), dpi=110)
    return figure, figure.subplots()


def metric_scatter_png(xs: list[float], ys: list[float], *, total: int, metric: str,
                       znormalize: bool) -> bytes:
    """One metric against the human gold score (jittered: scores are discrete)."""
    import numpy as np

    rng = np.random.default_rng(0)
    y = np.asarray(ys) + rng.uniform(-0.12, 0.12, len(ys)) * (0 if znormalize else 1)
    figure, axes = _image_figure(3.6, 2.8)
    axes.scatter(xs, y, s=6, alpha=0.25 if len(xs) > 500 else 0.6, color="#0b57d0",
                 edgecolors="none")
    axes.set_xlabel(metric)
    axes.set_ylabel("human score (z)" if znormalize else "human score")
    shown = f"n={total}" if total == len(xs) else f"{len(xs)} of n={total} shown"
    axes.set_title(f"{metric} vs human ({shown})", fontsize=9)
    axes.tick_params(labelsize=8)
    return _png(figure)


def roc_png(curves: dict[str, dict]) -> bytes:
    """Every metric's ROC curve, best AUC first in the legend."""
    figure, axes = _image_figure(4.6, 3.6)
    axes.plot([0, 1], [0, 1], linestyle=":", color="#888888", linewidth=1)
    ranked = sorted(curves.items(), key=lambda entry: -entry[1]["auc"])
    for name, curve in ranked:
        axes.plot(curve["fpr"], curve["tpr"], linewidth=1.3,
                  label=f"{name} (AUC {curve['auc']:.3f})")
    axes.set_xlabel("false positive rate (wrong answers accepted)", fontsize=8)
    axes.set_ylabel("true positive rate", fontsize=8)
    axes.set_title(f"ROC, n={next(iter(curves.values()))['n']} measured items", fontsize=9)
    axes.legend(fontsize=7, loc="lower right")
    axes.tick_params(labelsize=8)
    return _png(figure)


def reliability_png(judge: dict, *, label: str) -> bytes:
    """A judge's reliability diagram: mean probability vs observed rate per bin."""
    figure, axes = _image_figure(3.6, 3.4)
    axes.plot([0, 1], [0, 1], linestyle=":", color="#888888", linewidth=1)
    bins = judge["reliability"]
    axes.plot([b["mean_probability"] for b in bins], [b["observed"] for b in bins],
              marker="o", linewidth=1.3)
    for b in bins:
        axes.annotate(str(b["n"]), (b["mean_probability"], b["observed"]), fontsize=6,
                      textcoords="offset points", xytext=(3, -8))
    axes.set_xlim(0, 1)
    axes.set_ylim(0, 1)
    axes.set_xlabel("judge's probability", fontsize=8)
    axes.set_ylabel("share humans call correct", fontsize=8)
    axes.set_title(f"{label}: ECE {judge['ece']:.3f}", fontsize=9)
    axes.tick_params(labelsize=8)
    return _png(figure)
