"""Long-form QA A/B analytics (Xu et al. 2023, Table 2): per domain, how often experts prefer
the higher-voted human answer in H/H pairs and the model answer in H/M pairs, Fleiss' κ over
the items every expert of the domain judged, the "difficult to choose" rate and aspect counts."""
from __future__ import annotations

from collections import Counter

import numpy as np

from annotation.domain.agreement import agreement_undefined_reason, fleiss_kappa_from_counts
from annotation.domain.answers import AB_TIE_CHOICES
from annotation.judgment_selectors import JudgmentFrame
from annotation.models import Item, Project
from core.vocabulary import AB_CHOICES

from .leaderboard import preference_mask


def _target_side(setting: str, a_kind: str, a_up, b_kind: str, b_up, metadata: dict) -> str:
    """The answer the preference share counts: the higher-voted human answer in H/H, the model
    answer in H/M; "" when it cannot be told (equal or unknown upvotes)."""
    if setting == "HM":
        if a_kind == "model" and b_kind != "model":
            return "A"
        if b_kind == "model" and a_kind != "model":
            return "B"
        return ""
    if setting == "HH":
        # An importer's explicit record wins: in the long-form QA release a few pairs carry
        # upvote counts that contradict which answer the label calls higher-voted.
        if (metadata or {}).get("higher_voted") in AB_CHOICES:
            return metadata["higher_voted"]
        if a_up is not None and b_up is not None and a_up != b_up:
            return "A" if a_up > b_up else "B"
        return ""
    return ""


def fleiss_undefined_reason(counts: np.ndarray, experts: int,
                            value_labels: list[str]) -> str | None:
    """Why Fleiss' κ of a domain (over the pairs all its `experts` judged) has no value, in the
    words the dashboard, the report API and `manage.py report` show; None when it has one."""
    if experts < 2:
        return ("one expert judged this domain (κ compares the answers of several experts to "
                "the same pairs)")
    full = counts[counts.sum(axis=1) == experts] if len(counts) else counts
    if len(full) == 0:
        return f"no pair was judged by all {experts} experts of this domain (κ reads those)"
    return agreement_undefined_reason(full, value_labels)


def _share(hits: list[bool]) -> float | None:
    return float(np.mean(hits)) if hits else None


def _preferences(frame: JudgmentFrame, idx: np.ndarray, target: dict[int, str],
                 setting: dict[int, str], compares: np.ndarray) -> tuple[list, list, list, Counter]:
    """For the judgments `idx`: whether each chose the target side of human-human (HH) and
    human-model (HM) pairs (ties, where a stage offers them, are left out of both shares, and
    so are the judgments `compares` does not hold: the leaderboard's `preference_mask`), the
    difficulty flags given, and the aspects named."""
    hh, hm, difficult, aspects = [], [], [], Counter()
    for j in idx:
        item_id = int(frame.item_id[j])
        side = target.get(item_id, "")
        if frame.choice[j] in AB_TIE_CHOICES or not compares[j]:
            side = ""
        if side and setting.get(item_id) == "HH":
            hh.append(frame.choice[j] == side)
        elif side and setting.get(item_id) == "HM":
            hm.append(frame.choice[j] == side)
        if frame.difficult[j] is not None:
            difficult.append(bool(frame.difficult[j]))
        aspects.update(frame.aspects[j] or [])
    return hh, hm, difficult, aspects


def lfqa_report(frame: JudgmentFrame, project: Project | None = None) -> dict:
    """Table 2 of the long-form QA paper per domain: how often experts prefer the higher-voted
    human answer (HH) and the model answer (HM), Fleiss' κ, difficulty and aspects. The
    preference shares read the votes the leaderboard reads (`preference_mask`, with
    `project`: no gold check's, none between two identical answers); κ, difficulty and aspects
    every judgment that counts, as the agreement section."""
    mask = frame.data_mask() & (frame.choice != "")
    compares = preference_mask(frame, project)
    item_info = {
        row[0]: row[1:]
        for row in Item.objects.filter(pk__in=frame.item_table_ids.tolist()).values_list(
            "id", "content__setting", "content__answer_a__kind", "content__answer_a__upvotes",
            "content__answer_b__kind", "content__answer_b__upvotes", "metadata",
        )
    }
    target = {pk: _target_side(*info) for pk, info in item_info.items()}
    setting = {pk: info[0] for pk, info in item_info.items()}
    labels = frame.value_labels() if len(frame) else []
    domains = frame.item_column("domain").astype(str) if len(frame) else np.array([], dtype=str)
    by_domain: dict[str, dict] = {}
    totals = {"hh": [], "hm": [], "difficult": [], "aspects": Counter()}
    for domain in sorted(set(domains[mask])):
        dmask = mask & (domains == domain)
        idx = np.nonzero(dmask)[0]
        hh, hm, difficult, aspects = _preferences(frame, idx, target, setting, compares)
        experts = len(set(frame.worker_id[idx].tolist()))
        counts, _domain_values = frame.counts(dmask)
        # Table 2 computes κ over the pairs all experts of the domain judged.
        fleiss = fleiss_kappa_from_counts(counts, n_raters=experts) if experts >= 2 else None
        kappa = fleiss.kappa if fleiss else None
        by_domain[domain or "(none)"] = {
            "n_experts": experts,
            "n_items": int(len(counts)),
            "n_judgments": int(len(idx)),
            "prefer_higher_voted_hh": _share(hh),
            "n_hh": len(hh),
            "prefer_model_hm": _share(hm),
            "n_hm": len(hm),
            "fleiss_kappa": kappa,
            "fleiss_undefined": (fleiss_undefined_reason(counts, experts, labels)
                                 if kappa is None else None),
            "fleiss_n_items": fleiss.n_items if fleiss else 0,
            "difficult_rate": _share(difficult),
            "aspect_counts": dict(aspects.most_common()),
        }
        totals["hh"] += hh
        totals["hm"] += hm
        totals["difficult"] += difficult
        totals["aspects"].update(aspects)

    def macro(key: str) -> float | None:
        values = [row[key] for row in by_domain.values() if row[key] is not None]
        return float(np.mean(values)) if values else None

    return {
        "by_domain": by_domain,
        # Table 2's "Average" row is the unweighted mean over domains; "overall" pools every
        # judgment (big domains weigh more) and is not the paper's number.
        "average": {"prefer_higher_voted_hh": macro("prefer_higher_voted_hh"),
                    "prefer_model_hm": macro("prefer_model_hm"),
                    "difficult_rate": macro("difficult_rate")},
        "overall": {"prefer_higher_voted_hh": _share(totals["hh"]),
                    "prefer_model_hm": _share(totals["hm"]),
                    "difficult_rate": _share(totals["difficult"]),
                    "aspect_counts": dict(totals["aspects"].most_common())},
        "definitions": {
            "average": "unweighted mean of the domain rows: the paper's Average row (Table 2)",
            "overall": "every judgment pooled (big domains weigh more); not the paper's row",
        },
    }
