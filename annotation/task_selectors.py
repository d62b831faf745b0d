"""What a task page shows: the assignment's items in the order and form the worker sees them.

Only fields a worker may see go in here. Gold answers, answer roles (role A is the correct MC
answer), human/model labels of long-form answers, practice/qualification scoring and other
workers' judgments are never part of it; feedback appears only for items already confirmed
(`assignment_feedback`).
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from django.db.models import Exists, OuterRef, Q
from django.urls import reverse
from django.utils import timezone
from django.utils.crypto import salted_hmac

from core.vocabulary import AB_CHOICES, MC_ROLES

from .assignment_draft import (
    ATTEMPTS_KEY,
    CONTINUES_KEY,
    REFUSED_KEY,
    RETRY_MESSAGE,
    RETURN_KEY,
    RETURN_MESSAGE,
    SERVER_DRAFT_KEY,
    server_state,
)
from .domain.answers import (
    AB_SHOWN,
    BLANK_CLASS,
    MC_SHOWN,
    PADDING_RUN,
    answer_display_text,
    confirms_per_item,
    shown_roles,
)
from .domain.control_characters import IGNORABLE_CLASS
from .models import (
    Assignment,
    AssignmentItem,
    ExperimentMode,
    Hit,
    InhouseLink,
    Item,
    Judgment,
    ParticipantVerification,
    Provider,
    Stage,
    StageKind,
    TaskKind,
    WorkerQualification,
)


def answer_roles(kind: str) -> list[str]:
    """The answer roles an item of this task kind shows, in canonical order (none for Likert):
    what assignment creation shuffles into each item's `presented_order`, and a preview too."""
    return list(shown_roles(kind))


def item_view(item: Item, presented_order: list[str], *, kind: str, mode: str) -> dict[str, Any]:
    content = item.content or {}
    view: dict[str, Any] = {"id": item.pk, "is_practice": item.is_practice}
    if kind == TaskKind.LIKERT:
        view.update(
            passage=content.get("passage", ""),
            question=content.get("question", ""),
            references=list(content.get("references") or []),
            candidate=content.get("candidate", ""),
        )
    elif kind == TaskKind.AB:
        order = presented_order or list(AB_CHOICES)
        answers = {"A": content.get("answer_a") or {}, "B": content.get("answer_b") or {}}
        view.update(
            question=content.get("question", ""),
            evidence=list(content.get("evidence") or []),
            shown=[{"label": AB_SHOWN[i],
                    "text": answer_display_text(answers[role].get("text", ""))}
                   for i, role in enumerate(order)],
        )
    elif kind == TaskKind.MC:
        order = presented_order or list(MC_ROLES)
        answers = list(content.get("answers") or [])
        roles = "ABCD"
        view.update(
            question=content.get("question", ""),
            # Guessing and pilot: the paragraph is fetched only after the guess is confirmed.
            paragraph=content.get("paragraph", "") if mode in (ExperimentMode.QA,
                                                               ExperimentMode.VALIDITY) else "",
            options=[{"label": MC_SHOWN[i], "text": answers[roles.index(role)]}
                     for i, role in enumerate(order)],
        )
    return view


def task_item_rows(*, assignment: Assignment) -> list[AssignmentItem]:
    """The assignment's rows in page order with their items, each annotated `judged` (the
    worker confirmed it already): one query for what the page shows and what it has settled."""
    return list(AssignmentItem.objects.select_related("item").filter(assignment=assignment)
                .annotate(judged=Exists(Judgment.objects.filter(
                    assignment_id=OuterRef("assignment_id"), item_id=OuterRef("item_id"))))
                .order_by("position"))


def task_items(*, assignment: Assignment,
               rows: list[AssignmentItem] | None = None) -> list[dict[str, Any]]:
    """What the page shows of each item; `rows` as read by `task_item_rows` (read here if not
    given)."""
    project = assignment.stage.project
    if rows is None:
        rows = task_item_rows(assignment=assignment)
    return [item_view(row.item, row.presented_order, kind=project.kind,
                       mode=project.experiment_mode) for row in rows]


def preview_presented_order(*, kind: str, hit: Hit, item: Item) -> list[str]:
    """The answer order of an MTurk preview: shuffled like a real assignment's (role A is the
    correct STARC answer, so identity order would put it first on every preview), but stable
    across reloads of the same HIT. The seed is an HMAC under the site secret, so a worker who
    knows the HIT and item ids cannot recompute which shown option is which role."""
    # The same roles assignment creation shuffles, in a canonical order before seeding.
    roles = answer_roles(kind)
    seed = salted_hmac("qaj.mturk-preview-order", f"{hit.external_id}:{item.pk}").hexdigest()
    random.Random(seed).shuffle(roles)
    return roles


def hit_preview_items(*, hit: Hit, stage: Stage) -> list[dict[str, Any]]:
    """The read-only preview of a HIT: its first item, answers in a seeded shuffled order."""
    first = hit.items.order_by("hititem__position").first()
    if first is None:
        return []
    project = stage.project
    order = preview_presented_order(kind=project.kind, hit=hit, item=first)
    view = item_view(first, order, kind=project.kind, mode=project.experiment_mode)
    if project.kind == TaskKind.MC:
        # A preview names no worker, so it cannot be checked against what they read, and the
        # first items of a stage's Latin-square HITs are one paragraph at each level: showing
        # it would let a worker read one paragraph at several levels before accepting any HIT.
        # The paragraph comes with the accepted HIT (where the design is checked).
        view["paragraph"] = ""
    return [view]


def passage_blocks(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Likert: consecutive items sharing a passage are shown under it once."""
    blocks: list[dict[str, Any]] = []
    for number, item in enumerate(items, start=1):
        item["number"] = number
        if blocks and blocks[-1]["passage"] == item["passage"]:
            blocks[-1]["items"].append(item)
        else:
            blocks.append({"passage": item["passage"], "items": [item]})
    return blocks


def task_page_config(*, assignment: Assignment | None, stage: Stage, items: list[dict],
                     token: str = "", preview: bool = False,
                     complete_url: str = "", judged: list[int] | None = None) -> dict[str, Any]:
    """The JSON the page script reads (ids, rules, endpoints, the worker's own draft).
    `judged`: the ids of the assignment's items with a judgment, when the caller has read them
    (`task_item_rows`); read here otherwise."""
    project = stage.project
    confirmed: dict[str, dict] = {}
    locked_guesses: dict[str, str] = {}
    draft: dict[str, Any] = {}
    continues = None
    if assignment is not None:
        continues = server_state(assignment).get(CONTINUES_KEY)
        draft = {k: v for k, v in (assignment.draft or {}).items() if k != SERVER_DRAFT_KEY}
        if judged is None:
            judged = list(Judgment.objects.filter(assignment=assignment)
                          .values_list("item_id", flat=True))
        for item_id in judged:
            confirmed[str(item_id)] = assignment_feedback(assignment=assignment, item_id=item_id)
        server = (assignment.draft or {}).get(SERVER_DRAFT_KEY) or {}
        guesses = server.get("guesses") or {}
        # Only pilot pages lock guesses; skip the query everywhere else.
        orders = dict(AssignmentItem.objects.filter(assignment=assignment).values_list(
            "item_id", "presented_order")) if guesses else {}
        for item_id, role in guesses.items():
            order = orders.get(int(item_id)) or list(MC_ROLES)
            locked_guesses[item_id] = MC_SHOWN[order.index(role)]
    return {
        "kind": project.kind,
        "mode": project.experiment_mode if project.kind == TaskKind.MC else "",
        # Whether the page confirms each item on its own: the rule the confirm door keeps.
        "confirm_per_item": confirms_per_item(project.kind, project.experiment_mode),
        "preview": preview,
        "token": token,
        "items": [item["id"] for item in items],
        "practice": [item["id"] for item in items if item.get("is_practice")],
        "justification_min_length": project.justification_min_length,
        "justification_padding_run": PADDING_RUN,
        # The characters the count reads as one blank, the server's rule (`BLANK_CLASS`).
        "justification_blank": BLANK_CLASS,
        # The characters it leaves out beside category Cf (`IGNORABLE_CLASS`).
        "justification_invisible": IGNORABLE_CLASS,
        "scale_size": project.scale_top,
        "draft": draft,
        "confirmed": confirmed,
        "locked_guesses": locked_guesses,
        "endpoints": {
            "autosave": reverse("annotation:task-autosave"),
            "confirm": reverse("annotation:task-confirm"),
            "submit": reverse("annotation:task-submit"),
        },
        "complete_url": complete_url,
        "storage_key": storage_key(assignment.pk) if assignment is not None else "",
        # The assignment this one replaced (an MTurk HIT accepted again): the answers typed
        # there are read from this browser's storage only (`CONTINUES_KEY`).
        "continues_storage_key": storage_key(continues) if continues else "",
    }


def storage_key(assignment_pk: int) -> str:
    """Where the page keeps an assignment's draft in the browser (localStorage)."""
    return f"qaj-draft-{assignment_pk}"


def assignment_feedback(*, assignment: Assignment, item_id: int) -> dict[str, Any]:
    """What the page may show after an item was confirmed (never before): for STARC QA and
    guessing, whether the answer was right and which shown option is correct, plus the
    paragraph; nothing for qualification stages, whose scoring is never revealed."""
    row = AssignmentItem.objects.select_related("item__project", "assignment__stage").get(
        assignment=assignment, item_id=item_id
    )
    judgment = Judgment.objects.filter(assignment=assignment, item_id=item_id).first()
    state = server_state(row.assignment)
    if judgment is None:
        refused = (state.get(REFUSED_KEY) or {}).get(str(item_id))
        if refused:
            return {"refused": refused, "settled": True}
        if str(item_id) in (state.get(ATTEMPTS_KEY) or {}):
            # Right or wrong only: the correct answer is not shown before the last attempt.
            return {"retry": True, "is_correct": False, "message": RETRY_MESSAGE}
        return {}
    item = row.item
    project = item.project
    feedback: dict[str, Any] = {"confirmed": True}
    if state.get(RETURN_KEY):
        feedback["return_study"] = RETURN_MESSAGE
    if project.kind != TaskKind.MC:
        return feedback
    mode = project.experiment_mode
    order = row.presented_order or list(MC_ROLES)
    if judgment.choice in order:
        # The answer kept, as shown: a second tab (or a reload) shows it checked, not
        # whichever option that page had selected when its late confirm was refused.
        feedback["chosen_shown"] = MC_SHOWN[order.index(judgment.choice)]
    if mode in (ExperimentMode.GUESSING, ExperimentMode.QA):
        feedback["paragraph"] = item.content.get("paragraph", "")
    reveal = (mode in (ExperimentMode.QA, ExperimentMode.GUESSING)
              and row.assignment.stage.kind != StageKind.QUALIFICATION and item.gold)
    if reveal:
        correct_role = item.gold.get("choice")
        if correct_role in order:
            feedback["correct_shown"] = MC_SHOWN[order.index(correct_role)]
            feedback["is_correct"] = judgment.choice == correct_role
    return feedback
# --- What the task views look up (annotation/views/task_pages.py) -------------------------------


def provider_task_stage(*, stage_id: int, provider: str) -> Stage | None:
    """The stage an MTurk or Prolific entry URL names, when it is published on that provider:
    an in-house or another provider's stage is not reachable through a made-up URL (ids are
    small integers)."""
    return Stage.objects.select_related("project").filter(pk=stage_id,
                                                          provider=provider).first()


@dataclass(frozen=True)
class HitPreview:
    items: list[dict[str, Any]]  # what the preview shows (its first item), empty for no items
    total: int  # how many items the HIT holds


def hit_preview(*, hit: Hit, stage: Stage) -> HitPreview:
    """An MTurk preview page: the HIT's first item (`hit_preview_items`) and its item count."""
    return HitPreview(items=hit_preview_items(hit=hit, stage=stage), total=hit.items.count())


def guess_label_shown(*, assignment: Assignment, item_id: int, role: str) -> str:
    """The label ("a".."d") under which the worker saw the MC answer `role` of an item: roles
    are shuffled per assignment (`AssignmentItem.presented_order`), so the page never learns
    which label is the correct role."""
    order = AssignmentItem.objects.get(assignment=assignment,
                                       item_id=item_id).presented_order or list(MC_ROLES)
    return MC_SHOWN[order.index(role)]


@dataclass(frozen=True)
class InhouseCompletion:
    # The annotator's newest live link (not revoked, not expired) to this stage or to the
    # whole project: where they go on from the completion page. None when there is none.
    link: InhouseLink | None
    # Their result when the finished stage is a qualification.
    qualification: WorkerQualification | None


def inhouse_link_live(link: InhouseLink | None, now=None) -> bool:
    """Whether an in-house link still opens pages: not revoked, not past its expiry."""
    return link is not None and not link.revoked and (
        link.expires_at is None or link.expires_at > (now or timezone.now()))


def inhouse_page_link(*, assignment: Assignment, link_id: int) -> InhouseLink | None:
    """The in-house link a page of `assignment` was opened through (named by the page's token),
    while it still opens that page: live (`inhouse_link_live`), the assignment's worker's, to
    its stage or its whole project. None once it is revoked (a leaked link reissued), expired,
    or names something else. The one rule of the page's writes
    (`annotation/services/access.py:assignment_access_recheck`) and of where its completion
    page goes on (`inhouse_completion`): a page opened through a link keeps no more than the
    link gave, and never learns the link that replaced it."""
    stage = assignment.stage
    link = InhouseLink.objects.filter(
        Q(stage=stage) | Q(stage__isnull=True), pk=link_id, worker_id=assignment.worker_id,
        project_id=stage.project_id,
    ).select_related("stage").first()
    return link if inhouse_link_live(link) else None


def inhouse_completion(*, assignment: Assignment,
                       link_id: int | None = None) -> InhouseCompletion:
    """What the completion page of an in-house assignment reads: the link to go on with and,
    for a qualification stage, the worker's result. `link_id`: the link the page was opened
    through (its token names it), the only one it goes on with (`inhouse_page_link`); without
    one (a token from before tokens named their link), the annotator's newest live link."""
    stage = assignment.stage
    if link_id is not None:
        link = inhouse_page_link(assignment=assignment, link_id=link_id)
    else:
        link = InhouseLink.objects.filter(
            Q(stage=stage) | Q(stage__isnull=True),
            worker=assignment.worker, project=stage.project, revoked=False,
        ).order_by("-pk").select_related("stage").first()
        if not inhouse_link_live(link):
            link = None
    qualification = (assignment.worker.qualifications.filter(stage=stage).first()
                     if stage.kind == StageKind.QUALIFICATION else None)
    return InhouseCompletion(link=link, qualification=qualification)


def completion_withheld(*, assignment: Assignment) -> str:
    """Why the completion page shows no completion code (and no way back to the provider's
    completion URL), "" when it shows them: a Prolific session Prolific says it does not know
    (made up, someone else's link, replaced by the participant's verified one) is never
    counted nor paid, so it gets no study completion code to claim payment with either."""
    if (assignment.worker.provider == Provider.PROLIFIC
            and assignment.verification == ParticipantVerification.FAILED):
        return ("Prolific does not know this session for your participant ID in this study, so "
                "there is no completion code for it. If you opened the study from your "
                "Prolific account, message the researcher there.")
    return ""
