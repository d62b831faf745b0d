"""The schema of `Stage.settings`: every key the code reads, its type, range, default, which task
kinds and providers it applies to, and its help text. One place for the stage admin form (a typed
field per key), the validation of a stage's settings (the form, the publish guards) and the key
table in docs/PROVIDERS.md (`settings_table_markdown`, checked by a test).

Pure: no Django. Keys nobody declared here are kept as they are (the admin shows them in an
"advanced" JSON box); keys the providers write themselves (`MANAGED_KEYS`) have no field.
Nested settings (`redundancy`, `review`) are objects; their members are declared with a dotted
key ("review.min_gold_accuracy").
"""
from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from annotation.domain.answers import SAME_JUSTIFICATION_SHARE
from annotation.domain.judge_refs import judge_ref_error
from annotation.domain.redundancy import MAX_JUDGMENTS, adaptive_redundancy
from core.vocabulary import RECRUITING_PROVIDERS, TASK_KINDS, Provider, TaskKind

# A setting applies to every task kind and every recruiting provider unless its spec says less.
KINDS = TASK_KINDS
PROVIDERS = RECRUITING_PROVIDERS
ROUTING_MODES = ("random", "uncertainty")
PAIRING_MODES = ("uniform", "adaptive")
AGREEMENT_LEVELS = ("nominal", "ordinal", "interval")
PROLIFIC_DEVICES = ("desktop", "tablet", "mobile")
MAX_GOLD_RATE = 0.9  # at least one regular item in every HIT
# A trial or full stage of a project with a qualification stage that requires none is open to
# every worker only when this says so (`annotation.selectors.stage_open_gate_problem`).
OPEN_TO_EVERY_WORKER = "open_to_every_worker"
NO_LOCALES = "none"  # what the admin field takes for "no locale requirement" (stored as [])

# Written by the providers at publish (ids of what they created there); shown, never typed.
MANAGED_KEYS = (
    "mturk_hit_type_id", "mturk_qualification_type_id", "prolific_study_id",
    "prolific_participant_group_id", "prolific_study_token",
)

GROUPS = ("Items and HITs", "Adaptive redundancy", "Agreement", "Cost", "Auto-review",
          "Crowd page", "MTurk", "Prolific")


class StageSettingError(ValueError):
    """A setting's value is not acceptable; the message names the key and what is wrong."""


@dataclass(frozen=True)
class SettingSpec:
    key: str  # top-level key, or "object.member" for a member of an object setting
    type: str  # int | float | decimal | bool | str | choice | str_list | json_list
    label: str
    help: str
    group: str
    default: str = ""  # what the code does when the key is absent, in words
    minimum: float | None = None
    maximum: float | None = None
    above: float | None = None  # exclusive lower bound
    choices: tuple[str, ...] = ()
    max_length: int | None = None
    kinds: tuple[str, ...] = KINDS
    providers: tuple[str, ...] = PROVIDERS
    field: bool = True  # False: validated, edited in the advanced JSON box

    @property
    def path(self) -> tuple[str, ...]:
        return tuple(self.key.split("."))

    def applies(self, *, kind: str | None, provider: str | None) -> bool:
        return ((kind is None and self.kinds == KINDS or kind in self.kinds)
                and (provider is None and self.providers == PROVIDERS
                     or provider in self.providers))

    def range_text(self) -> str:
        low = (f"> {_num(self.above)}" if self.above is not None else
               f"≥ {_num(self.minimum)}" if self.minimum is not None else "")
        high = f"≤ {_num(self.maximum)}" if self.maximum is not None else ""
        if self.choices:
            return "one of " + ", ".join(self.choices)
        return ", ".join(part for part in (low, high) if part)


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


_CROWD = (Provider.MTURK, Provider.PROLIFIC)
SETTINGS: tuple[SettingSpec, ...] = (
    # --- items and HITs ---
    SettingSpec("n_items", "int", "Number of items",
                "Items the stage releases when it chooses them by its kind: a qualification's "
                "gold items, a trial's or pilot's random sample (seeded by the stage).",
                "Items and HITs", "qualification 10, trial/pilot 200, full all", minimum=1),
    SettingSpec("items_per_hit", "int", "Items per HIT",
                "How many items one HIT (one assignment) holds.", "Items and HITs",
                "the project's items per HIT", minimum=1),
    SettingSpec("items_per_assignment", "int", "Items per assignment",
                "Items a page that picks items itself (Prolific, in-house) gives one "
                "assignment; the HITs (a Prolific study's places) and the cost estimate are "
                "planned with the same number. The project's practice items a worker has not "
                "done come first, on top of it. A qualification takes all its items.",
                "Items and HITs", "the stage's items per HIT, else the project's", minimum=1,
                providers=(Provider.PROLIFIC, Provider.INHOUSE)),
    SettingSpec("max_workers", "int", "Qualification takers",
                "Qualification stages: how many workers take the qualification in all.",
                "Items and HITs", "50", minimum=1),
    SettingSpec("gold_rate", "float", "Gold item rate",
                "Share of gold/attention items mixed into each HIT (or page of items), as a "
                "whole number per batch: items × rate rounded half up, at least one, at most "
                "one fewer than the batch (0.15 of 5 items: 1 gold item, 20%); a short batch "
                "(the last, or a Likert passage shorter than a batch) gets them in proportion, "
                "at least one, a Likert batch only from its passage. The release preview says "
                "what each batch gets.", "Items and HITs",
                "the project's gold rate", minimum=0.0, maximum=MAX_GOLD_RATE),
    SettingSpec("reuse_earlier_items", "bool", "Reuse earlier items",
                "Release the items (and gold items) the project's qualification released again, "
                "and serve a worker items they answered in another stage of the project (the "
                "qualification they were graded on). Other trial, pilot and full stages' items "
                "are still never chosen again, and no worker gets an item twice in one stage. In a "
                "STARC study a participant still never reads a paragraph or article twice.",
                "Items and HITs", "no"),
    SettingSpec(OPEN_TO_EVERY_WORKER, "bool", "Open to every worker",
                "Trial and full stages of a project with a qualification stage: yes publishes "
                "this stage without “Requires stage” on purpose, so every worker may "
                "work here, qualified or not. Without it such a stage is refused at publish "
                "until “Requires stage” names the qualification (or this says yes).",
                "Items and HITs", "no"),
    SettingSpec("latin_square", "bool", "STARC Latin square",
                "Serve each participant at most one item per paragraph (OneStopQA) or article "
                "(RACE), conditions rotated in a Latin square (the STARC design). Off lets a "
                "participant read one text several times.",
                "Items and HITs", "on when several items share a paragraph/article",
                kinds=(TaskKind.MC,)),
    SettingSpec("routing", "choice", "Routing",
                "Which items reach humans: all of them (random), or a draw weighted by LERC's "
                "uncertainty (run the 'Route by LERC uncertainty' action before publishing).",
                "Items and HITs", "random", choices=ROUTING_MODES, kinds=(TaskKind.LIKERT,)),
    SettingSpec("routing_judge", "str", "Routing judge",
                "Uncertainty routing: the judge whose P(correct) draws the items "
                "(metric:NAME, or an LLM or imported judge's NAME[@VERSION]); route_stage's "
                "--judge overrides it.", "Items and HITs", "the promoted LERC (metric:lerc_prob)",
                max_length=200, kinds=(TaskKind.LIKERT,)),
    SettingSpec("pairing", "choice", "A/B: pairing",
                "Which items (pairs of systems) reach the judges: all of them (uniform), or a "
                "draw favouring the pairs that most reduce the ranking's uncertainty given the "
                "judgments so far (run `route_stage` before publishing; probabilities "
                "recorded).", "Items and HITs", "uniform", choices=PAIRING_MODES,
                kinds=(TaskKind.AB,)),
    SettingSpec("pairing_budget", "int", "A/B: pairing budget",
                "Adaptive pairing: how many items are expected to go to the judges.",
                "Items and HITs", "none (the command asks for it)", minimum=1,
                kinds=(TaskKind.AB,)),
    SettingSpec("ab_ties", "bool", "A/B: tie options",
                "Offer 'Both good', 'Both bad' and 'Tie' besides answer A and B (stored as the "
                "choice; the leaderboard models them as ties). Off keeps the paper's protocol.",
                "Crowd page", "no", kinds=(TaskKind.AB,)),
    SettingSpec("routing_budget", "int", "Routing budget",
                "Routing by uncertainty: how many items are expected to go to humans.",
                "Items and HITs", "none (the action asks for it)", minimum=1,
                kinds=(TaskKind.LIKERT,)),
    # --- adaptive redundancy ---
    SettingSpec("redundancy.min", "int", "Adaptive: minimum judgments",
                "Judgments every item gets before agreement is checked. Setting any of the "
                "three turns adaptive redundancy on (the others take their defaults).",
                "Adaptive redundancy", "2 (when adaptive)", minimum=1, maximum=MAX_JUDGMENTS),
    SettingSpec("redundancy.max", "int", "Adaptive: maximum judgments",
                "At most this many judgments per item, however much the judges disagree.",
                "Adaptive redundancy", "5 (when adaptive)", minimum=1, maximum=MAX_JUDGMENTS),
    SettingSpec("redundancy.agreement", "float", "Adaptive: agreement to settle",
                "An item is settled when the most common label's share reaches this.",
                "Adaptive redundancy", "0.75 (when adaptive)", above=0.5, maximum=1.0),
    # --- agreement ---
    SettingSpec("agreement_stage_id", "int", "Agreement gate stage (id)",
                "The stage whose Krippendorff's alpha the agreement threshold checks.",
                "Agreement", "the closest earlier trial/pilot/full stage, else the required "
                "stage", minimum=1),
    SettingSpec("agreement_level", "choice", "Agreement level",
                "Measurement level of Krippendorff's alpha for the agreement gate.",
                "Agreement", "interval for Likert, nominal otherwise",
                choices=AGREEMENT_LEVELS),
    # --- cost ---
    SettingSpec("bonus_budget", "decimal", "Bonus budget",
                "Money set aside for bonuses in the cost estimate (the provider's fee is "
                "added).", "Cost", "STARC's bonus per correct answer × judgments", minimum=0),
    SettingSpec("seconds_per_item", "float", "Seconds per item",
                "Time per item the pay estimate assumes before a trial has measured it.",
                "Cost", "unknown until a trial", above=0.0),
    SettingSpec("allow_40pct_fee_tier", "bool", "Allow MTurk's 40% fee tier",
                "Let HITs have 10 or more assignments (MTurk then charges 40% instead of 20%).",
                "Cost", "no (at most 9 assignments per HIT)", providers=(Provider.MTURK,)),
    # --- auto-review ---
    SettingSpec("review.approve_after_seconds", "int", "Approve after (seconds)",
                "Wait this long after submission before auto-approving work that passes "
                "(the review decides nothing sooner). On MTurk, this wait plus the provider "
                "sync's period (QAJ_PROVIDER_SYNC_SECONDS) must be below the auto-approval "
                "delay, or MTurk pays the work before the review sees it.",
                "Auto-review", "0", minimum=0),
    SettingSpec("review.min_gold_accuracy", "float", "Minimum gold accuracy",
                "Accuracy on gold/attention items work needs to pass (when it has any).",
                "Auto-review", "0.5", minimum=0.0, maximum=1.0),
    SettingSpec("review.min_gold_checks_to_reject", "int", "Check items needed to reject",
                "Work failing fewer check items than this is held for you, never rejected "
                "(nor counted towards a block) on its gold accuracy alone: one or two answers "
                "are too little evidence.", "Auto-review", "2", minimum=1),
    SettingSpec("review.min_seconds_per_item", "float", "Minimum seconds per item",
                "Mean time per item below this looks like clicking through.", "Auto-review",
                "2", minimum=0.0),
    SettingSpec("review.max_same_answer_share", "float", "Maximum same-answer share",
                "Straight-lining: work whose most common answer reaches this share fails "
                "(A/B and multiple choice: the position on screen, the order being shuffled).",
                "Auto-review", "1.0 (only every answer identical)", minimum=0.0, maximum=1.0),
    SettingSpec("review.max_same_justification_share", "float",
                "Maximum same-justification share",
                "Work whose most repeated justification (compared ignoring case, spacing and "
                "punctuation) covers this share of its items fails: one sentence pasted on "
                "every item.", "Auto-review",
                f"{SAME_JUSTIFICATION_SHARE} (nearly all identical: 4 of 5, 8 of 10 items)",
                minimum=0.0, maximum=1.0, kinds=(TaskKind.AB,)),
    SettingSpec("review.straightline_min_items", "int", "Straight-lining judged from",
                "Straight-lining and repeated justifications are only judged on assignments "
                "with this many items or more.",
                "Auto-review", "5", minimum=1),
    SettingSpec("review.auto_reject", "bool", "Reject failing work",
                "Reject work that fails the rules (with the reasons) instead of flagging it "
                "for you.", "Auto-review", "no (flag it)"),
    SettingSpec("review.block_after_rejections", "int", "Block after rejections",
                "Block a worker after this many rejections (0: never).", "Auto-review", "0",
                minimum=0),
    # --- what the crowd sees ---
    SettingSpec("title", "str", "Title on the crowd platform",
                "The HIT's or study's title.", "Crowd page", "project title: stage name",
                max_length=120, providers=_CROWD),
    SettingSpec("description", "str", "Description on the crowd platform",
                "The HIT's or study's description.", "Crowd page",
                "the project's instructions", max_length=2000, providers=_CROWD),
    # --- MTurk ---
    SettingSpec("lifetime_seconds", "int", "HIT lifetime (seconds)",
                "How long the HITs stay on MTurk.", "MTurk", "604800 (7 days)",
                minimum=60, maximum=31536000, providers=(Provider.MTURK,)),
    SettingSpec("assignment_duration_seconds", "int", "Assignment duration (seconds)",
                "How long a worker has once they accept a HIT.", "MTurk",
                "the project's assignment timeout", minimum=30, maximum=31536000,
                providers=(Provider.MTURK,)),
    SettingSpec("auto_approval_delay_seconds", "int", "Auto-approval delay (seconds)",
                "MTurk approves and pays undecided work after this; decide flagged work "
                "before. Must be longer than the review's wait plus the provider sync's "
                "period (QAJ_PROVIDER_SYNC_SECONDS), when the review runs.", "MTurk", "259200 (3 days)", minimum=0, maximum=2592000,
                providers=(Provider.MTURK,)),
    SettingSpec("keywords", "str", "Keywords",
                "Comma-separated search keywords of the HIT type.", "MTurk",
                "question answering, reading, evaluation, judgment", max_length=1000,
                providers=(Provider.MTURK,)),
    SettingSpec("frame_height", "int", "Frame height (pixels)",
                "Height of the task frame on MTurk; 0 is the full window.", "MTurk", "0",
                minimum=0, providers=(Provider.MTURK,)),
    SettingSpec("min_approval_rate", "int", "Minimum approval rate (%)",
                "Workers need at least this approval rate; 0 drops the requirement.", "MTurk",
                "95", minimum=0, maximum=100, providers=(Provider.MTURK,)),
    SettingSpec("locales", "str_list", "Worker countries",
                "ISO country codes workers must be in, comma-separated (e.g. US, CA); "
                f"{NO_LOCALES!r} for no requirement.", "MTurk", "US", providers=(Provider.MTURK,)),
    # --- Prolific ---
    SettingSpec("estimated_minutes", "int", "Estimated minutes",
                "The study's estimated completion time shown to participants.", "Prolific",
                "10", minimum=1, providers=(Provider.PROLIFIC,)),
    SettingSpec("devices", "str_list", "Devices", "Devices participants may use.",
                "Prolific", "desktop, tablet, mobile", choices=PROLIFIC_DEVICES,
                providers=(Provider.PROLIFIC,)),
    SettingSpec("prolific_project_id", "str", "Prolific project id",
                "The Prolific project the study is created in.", "Prolific",
                "the workspace's default", max_length=100, providers=(Provider.PROLIFIC,)),
    SettingSpec("prolific_confirm_grace_seconds", "int", "Confirmation grace (seconds)",
                "A submission Prolific has not listed this long after it was made is "
                "flagged.", "Prolific", "86400 (one day)", minimum=0,
                providers=(Provider.PROLIFIC,)),
    SettingSpec("prolific_completion_code", "str", "Completion code",
                "The code participants get on completion.", "Prolific",
                "generated at publish", max_length=50, providers=(Provider.PROLIFIC,)),
    SettingSpec("prolific_filters", "json_list", "Prolific filters",
                "Prolific screener filters as Prolific's API takes them (a JSON list of "
                "objects with filter_id). Approval rate, approved submissions, countries and "
                "first languages have fields (Prolific screeners); other filters go in the "
                "advanced box.", "Prolific", "none",
                providers=(Provider.PROLIFIC,), field=False),
)

BY_KEY = {spec.key: spec for spec in SETTINGS}
OBJECT_KEYS = tuple(sorted({spec.path[0] for spec in SETTINGS if len(spec.path) > 1}))


def settings_for(*, kind: str | None, provider: str | None,
                 fields_only: bool = True) -> list[SettingSpec]:
    """The settings that apply to a stage of this task kind and provider (None: unknown, then
    only the settings that apply to every kind / provider)."""
    return [spec for spec in SETTINGS if spec.applies(kind=kind, provider=provider)
            and (spec.field or not fields_only)]


def value_at(settings: dict | None, key: str) -> Any:
    """The stored value of a (dotted) key, or None."""
    value: Any = settings or {}
    for part in key.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


def setting_check(spec: SettingSpec, value: Any) -> Any:
    """The value as stored, or StageSettingError naming the key and what is wrong."""
    name = spec.key

    def wrong(what: str) -> StageSettingError:
        return StageSettingError(f"{name} {what}, not {value!r}")

    if spec.type == "bool":
        if not isinstance(value, bool):
            raise wrong("must be true or false")
        return value
    if spec.type in ("int", "float", "decimal"):
        if isinstance(value, bool):
            raise wrong("must be a number")
        if spec.type == "int":
            if isinstance(value, float) and value.is_integer():
                value = int(value)
            if not isinstance(value, int):
                raise wrong("must be a whole number")
            number = float(value)
        elif spec.type == "decimal":
            try:
                number = float(Decimal(str(value)))
            except InvalidOperation:
                raise wrong("must be an amount of money") from None
            if isinstance(value, str):
                value = str(Decimal(value))
        else:
            if not isinstance(value, int | float) or not math.isfinite(value):
                raise wrong("must be a number")
            number = float(value)
        too_low = (spec.above is not None and number <= spec.above
                   or spec.minimum is not None and number < spec.minimum)
        too_high = spec.maximum is not None and number > spec.maximum
        if too_low or too_high:
            raise wrong(f"must be {spec.range_text()}")
        return value
    if spec.type == "choice":
        if value not in spec.choices:
            raise StageSettingError(f"{name} {value!r} is not one of {', '.join(spec.choices)}")
        return value
    if spec.type == "str":
        if not isinstance(value, str):
            raise wrong("must be text")
        if spec.max_length and len(value) > spec.max_length:
            raise StageSettingError(f"{name} is {len(value)} characters long; at most "
                                    f"{spec.max_length}")
        if spec.key == "routing_judge":
            error = judge_ref_error(value, field=name)
            if error:
                raise StageSettingError(error)
        return value
    if spec.type == "str_list":
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise wrong("must be a list of texts")
        if spec.choices:
            unknown = [v for v in value if v not in spec.choices]
            if unknown:
                raise StageSettingError(f"{name}: {', '.join(map(repr, unknown))} not among "
                                        f"{', '.join(spec.choices)}")
        if spec.key == "locales":
            bad = [v for v in value if not re.fullmatch(r"[A-Z]{2}", v)]
            if bad:
                raise StageSettingError(f"locales: {', '.join(map(repr, bad))} are not "
                                        "two-letter country codes like US")
        return value
    if spec.type == "json_list":
        if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
            raise wrong("must be a list of objects")
        return value
    raise AssertionError(f"unknown setting type {spec.type}")


# MTurk's auto-approval delay when the stage does not set one (`auto_approval_delay_seconds`).
MTURK_AUTO_APPROVAL_DELAY_SECONDS = 3 * 86400


def mturk_auto_approval_delay(settings: dict | None) -> int:
    """The AutoApprovalDelayInSeconds of a stage's MTurk HIT type."""
    return int((settings or {}).get("auto_approval_delay_seconds",
                                    MTURK_AUTO_APPROVAL_DELAY_SECONDS))


def _whole_seconds(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def review_window(settings: Any) -> tuple:
    """What `review_window_problem` reads of a stage's settings: (the review's wait, the
    auto-approval delay), as stored."""
    if not isinstance(settings, dict):
        return (None, None)
    review = settings.get("review")
    return (review.get("approve_after_seconds") if isinstance(review, dict) else None,
            settings.get("auto_approval_delay_seconds"))


def review_window_problem(settings: Any, *, provider: str | None, sync_seconds: float) -> str:
    """Why an MTurk stage's review could never decide its work ("" when it can): MTurk
    approves and pays whatever is undecided `auto_approval_delay_seconds` after it was
    submitted, and the review decides nothing before `review.approve_after_seconds` (it holds
    and rejects no sooner either; 0 or unset: no wait), and then only at the next run of the
    provider sync, which reviews every `sync_seconds` (`QAJ_PROVIDER_SYNC_SECONDS`, passed in
    by the door that reads the settings: `annotation/services/stages.py:stage_settings_problems`).
    So the delay must be longer than the wait plus the sync's period, or MTurk may approve a
    submission before the review ever sees it, which the sync mirrors: failing work paid and
    counted, no rejection possible any more (a delay of 0 pays every submission at once).
    Pure; the rule of every door that sets a stage's settings (the stage form, the API) and of
    publishing (`stage_settings_errors` with the stage's provider)."""
    if provider != Provider.MTURK or not isinstance(settings, dict):
        return ""
    review = settings.get("review")
    wait = review.get("approve_after_seconds") if isinstance(review, dict) else None
    wait = 0 if wait is None else wait
    delay = settings.get("auto_approval_delay_seconds", MTURK_AUTO_APPROVAL_DELAY_SECONDS)
    if not (_whole_seconds(wait) and _whole_seconds(delay)):
        return ""  # a wrong type is named by the field's own check
    wait = max(wait, 0)
    if delay > wait + sync_seconds:
        return ""
    shorten = "Shorten the wait, or lengthen" if wait > 0 else "Lengthen"
    return (f"auto_approval_delay_seconds ({delay:.0f} s) must be longer than "
            f"review.approve_after_seconds ({wait:.0f} s) plus the provider sync's period "
            f"({sync_seconds:.0f} s, QAJ_PROVIDER_SYNC_SECONDS), which is when the review runs: "
            f"MTurk approves and pays undecided work {delay:.0f} s after it is submitted, "
            "before the review would decide it, so failing work would be paid and counted and "
            f"could no longer be rejected. {shorten} the auto-approval delay (before "
            "publishing)")


def stage_settings_errors(settings: Any, *, provider: str | None = None,
                          sync_seconds: float | None = None) -> list[str]:
    """Everything wrong with a stage's settings (empty when they are fine). Known keys are
    checked whatever the kind or provider (a key that does not apply is simply unused);
    unknown keys are kept as they are. With the stage's `provider` (and the provider sync's
    period, `sync_seconds`, which its rules need), the rules across keys that depend on it
    too (`review_window_problem`)."""
    if provider is not None and sync_seconds is None:
        raise TypeError("stage_settings_errors: a provider's rules need sync_seconds")
    if settings is None:
        return []
    if not isinstance(settings, dict):
        return ["settings must be a JSON object like {\"n_items\": 200}"]
    errors = []
    for key in OBJECT_KEYS:
        if key in settings and not isinstance(settings[key], dict):
            if key == "redundancy":
                continue  # adaptive_redundancy names the expected shape below
            errors.append(f"{key} must be an object like {{\"{_member(key)}\": …}}")
    for spec in SETTINGS:
        value = value_at(settings, spec.key)
        if value is None:
            continue
        try:
            setting_check(spec, value)
        except StageSettingError as exc:
            errors.append(str(exc))
    if not errors:
        try:
            adaptive_redundancy(settings)  # min ≤ max, unknown members
        except ValueError as exc:
            errors.append(str(exc))
    if not errors and provider is not None and (problem := review_window_problem(
            settings, provider=provider, sync_seconds=sync_seconds)):
        errors.append(problem)
    return errors


def managed_keys_kept(settings: dict, *, stored: dict | None) -> dict:
    """`settings` as typed by hand (the API's body, the admin's box) checked against the keys the
    providers write at publish (`MANAGED_KEYS`): a managed key added or changed by hand is
    refused (`StageSettingError` naming them); one left out, or posted as stored, keeps its
    stored value. Returns the settings with the stored managed keys."""
    stored = stored or {}
    changed = sorted(key for key in MANAGED_KEYS
                     if key in settings and settings[key] != stored.get(key))
    if changed:
        raise StageSettingError(
            f"{', '.join(changed)}: written by the provider at publish, never by hand")
    kept = {key: value for key, value in settings.items() if key not in MANAGED_KEYS}
    return {**kept, **{key: stored[key] for key in MANAGED_KEYS if key in stored}}


def _member(key: str) -> str:
    return next(spec.path[1] for spec in SETTINGS if spec.path[0] == key)


def stage_settings_merge(settings: dict | None, values: dict[str, Any]) -> dict:
    """`settings` with the given (dotted) keys set, or removed where the value is None; every
    other key, known or not, is kept. An object setting left empty is removed."""
    merged = {key: (dict(value) if isinstance(value, dict) else value)
              for key, value in (settings or {}).items()}
    for key, value in values.items():
        path = key.split(".")
        if len(path) == 1:
            if value is None:
                merged.pop(key, None)
            else:
                merged[key] = value
            continue
        parent = merged.get(path[0])
        parent = dict(parent) if isinstance(parent, dict) else {}
        if value is None:
            parent.pop(path[1], None)
        else:
            parent[path[1]] = value
        if parent:
            merged[path[0]] = parent
        else:
            merged.pop(path[0], None)
    return merged


def settings_without(settings: dict | None, keys: Iterable[str]) -> dict:
    """The settings minus the given (dotted) keys: what the advanced box shows beside the
    typed fields."""
    return stage_settings_merge(settings, dict.fromkeys(keys))


def settings_table_markdown() -> str:
    """The key table of docs/PROVIDERS.md, generated from the schema."""
    rows = ["| key | type | applies to | default | meaning |", "| --- | --- | --- | --- | --- |"]
    for spec in SETTINGS:
        scope = []
        if spec.kinds != KINDS:
            scope.append("/".join(spec.kinds) + " projects")
        if spec.providers != PROVIDERS:
            scope.append("/".join(spec.providers))
        kind = spec.type + (f" ({spec.range_text()})" if spec.range_text() else "")
        rows.append(f"| `{spec.key}` | {kind} | {', '.join(scope) or 'all'} | "
                    f"{spec.default or '–'} | {spec.help} |")
    for key in MANAGED_KEYS:
        rows.append(f"| `{key}` | written at publish | {key.split('_')[0]} | – | "
                    "the id of what the provider created; shown, not edited |")
    return "\n".join(rows)


# Once a stage is published, what its settings may still change (everything else was used to
# choose its items, build its HITs or create them on the provider, and is fixed): the review
# rules (the next sync applies them), the pay assumption of the estimate, Prolific's grace
# before an unlisted submission is flagged and the agreement level of reports. The bonus budget
# may change too, within the project's budget cap (annotation.services.stages checks the money).
LIVE_EDITABLE_KEYS = ("review", "seconds_per_item", "prolific_confirm_grace_seconds",
                      "agreement_level", "bonus_budget")

_FIXED_WHY = {
    "Items and HITs": "the stage's items, HITs and assignment sizes were chosen with it at "
                      "publish",
    "Adaptive redundancy": "adaptive redundancy is checked at publish (the provider must pick "
                           "items per worker) and the stage's targets were set with it",
    "Agreement": "the agreement gate was checked at publish",
    "Cost": "the HITs were planned with it at publish",
    "Crowd page": "it decides what the workers' page offers: changed mid-stage, one stage "
                  "would mix answers given under two protocols",
    "MTurk": "the HIT type and HITs on MTurk were created with it at publish; a change here "
             "would not reach them",
    "Prolific": "the study on Prolific was created with it at publish; a change here would "
                "not reach it",
}
_FIXED_KEY_WHY = {
    OPEN_TO_EVERY_WORKER: "who may work here was set at publish (the qualification the HITs "
                          "require on the provider, or none, checked when the stage was "
                          "published)",
    "latin_square": "the STARC design (each participant reads a text once, conditions in a "
                    "Latin square) was checked and its lists built at publish; changed now, "
                    "participants could read one paragraph at several levels",
    "prolific_completion_code": "Prolific checks the code the study was created with: "
                                "participants sent back with another code cannot complete",
    "title": "the HITs or the study were created on the provider with it at publish; a "
             "change here would not reach them",
    "description": "the HITs or the study were created on the provider with it at publish; a "
                   "change here would not reach them",
}


def _same(spec: SettingSpec | None, old: Any, new: Any) -> bool:
    if old == new:
        return True
    if spec is not None and spec.type == "json_list" and isinstance(old, list) \
            and isinstance(new, list):
        # The admin rebuilds Prolific's filters (screener fields after the others): the same
        # filters in another order are the same study.
        return sorted(map(repr, old)) == sorted(map(repr, new))
    if spec is not None and spec.type in ("int", "float", "decimal") and None not in (old, new):
        try:
            return Decimal(str(old)) == Decimal(str(new))
        except (InvalidOperation, ValueError):
            return False
    return False


def settings_fixed_once_published(stored: dict | None, new: dict | None) -> dict[str, str]:
    """{key: why} for each declared setting that `new` changes (sets, changes or removes)
    against `stored` although it is fixed once the stage is published (not one of
    `LIVE_EDITABLE_KEYS`); unknown and provider-managed keys are not judged here. Pure."""
    stored, new = stored or {}, new or {}
    refused = {}
    for spec in SETTINGS:
        if spec.path[0] in LIVE_EDITABLE_KEYS:
            continue
        if _same(spec, value_at(stored, spec.key), value_at(new, spec.key)):
            continue
        why = _FIXED_KEY_WHY.get(spec.key) or _FIXED_WHY[spec.group]
        refused[spec.key] = f"{why}; it cannot change once the stage is published"
    return refused
