"""The leaderboard through the API (JSON, CSV, who may read it) and the dashboard section, on
A/B items that name their systems, with ties and the order shown recorded."""
from __future__ import annotations

import csv
import io

import numpy as np
import pytest
from django.urls import reverse

from annotation.models import StageKind, TaskKind
from testing.factories import (
    make_item,
    make_judgment,
    make_project,
    make_stage,
    make_user,
    make_worker,
)

pytestmark = pytest.mark.django_db
STRENGTH = {"strong": 1.2, "middle": 0.0, "weak": -1.2}


@pytest.fixture
def arena():
    """40 items over three systems, 6 workers each judging every item; outcomes drawn from
    known strengths, a tenth of them ties, the order shown alternating."""
    rng = np.random.default_rng(0)
    owner = make_user("owner")
    project = make_project(TaskKind.AB, owner=owner, slug="arena", title="Arena")
    stage = make_stage(project, kind=StageKind.FULL, name="full")
    workers = [make_worker(external_id=f"judge-{i}") for i in range(6)]
    names = list(STRENGTH)
    for n in range(40):
        a, b = names[n % 3], names[(n + 1 + n // 3 % 2) % 3]
        item = make_item(project, domain="Biology" if n % 2 else "History", content={
            "question": f"q{n}", "evidence": [], "setting": "HM",
            "answer_a": {"text": " ".join(["x"] * (10 + n)), "kind": "model", "upvotes": None,
                         "system": a},
            "answer_b": {"text": " ".join(["y"] * 20), "kind": "model", "upvotes": None,
                         "system": b}})
        p = 1 / (1 + np.exp(-(STRENGTH[a] - STRENGTH[b])))
        for i, worker in enumerate(workers):
            u = rng.random()
            choice = "tie" if u < 0.1 else ("A" if rng.random() < p else "B")
            make_judgment(item=item, stage=stage, worker=worker, choice=choice,
                          presented_order=["A", "B"] if (n + i) % 2 else ["B", "A"])
    return project, owner


def test_leaderboard_api_json_and_csv(client, arena):
    project, owner = arena
    client.force_login(owner)
    url = reverse("metrics-api:project-leaderboard", args=[project.slug])
    board = client.get(url).json()
    overall = board["overall"]
    assert [r["system"] for r in overall["systems"]] == ["strong", "middle", "weak"]
    assert overall["model"]["name"] == "davidson" and overall["model"]["n_ties"] > 0
    assert overall["model"]["position_effect"] is not None  # the order shown was recorded
    assert board["tie_choices"]["tie"] == overall["model"]["n_ties"]
    assert all(r["ci_worker"] is not None for r in overall["systems"])
    assert set(board["by_domain"]) == {"Biology", "History"}
    response = client.get(url, {"output": "csv"})
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert {r["category"] for r in rows} == {"overall", "domain:Biology", "domain:History"}
    assert rows[0]["system"] == "strong" and rows[0]["rank"] == "1"
    assert client.get(url, {"output": "xlsx"}).status_code == 400


def test_leaderboard_api_is_private_and_only_for_ab(client, arena):
    project, _owner = arena
    url = reverse("metrics-api:project-leaderboard", args=[project.slug])
    client.force_login(make_user("stranger"))
    assert client.get(url).status_code == 404
    likert_owner = make_user("likert-owner")
    likert = make_project(TaskKind.LIKERT, owner=likert_owner, slug="lik")
    client.force_login(likert_owner)
    response = client.get(reverse("metrics-api:project-leaderboard", args=[likert.slug]))
    assert response.status_code == 400 and "A/B" in response.content.decode()


def test_metric_judges_side_by_side_with_the_humans(client, arena):
    from metrics_app.services.scoring import project_score_metrics

    project, owner = arena
    client.force_login(owner)
    url = reverse("metrics-api:project-leaderboard", args=[project.slug])
    assert "judges" not in client.get(url).json()  # cached now, without any metric
    project_score_metrics(project=project, metric_names=["length"])
    board = client.get(url).json()  # the new scores make the cached report stale
    (name, judge), = board["judges"].items()
    assert name.startswith("length@")
    # Answer A has 10 + n words, B 20: the length judge's votes follow n, not quality.
    n_items = 40
    assert judge["model"]["n_votes"] == n_items
    assert judge["model"]["n_ties"] == 1  # n = 10: both 20 words
    rows = {r["system"]: r for r in board["side_by_side"]}
    assert set(rows) == set(STRENGTH) and all(name in r for r in rows.values())
    assert rows["strong"]["human"]["rank"] == 1
    html = client.get(reverse("metrics:project-dashboard", args=[project.slug])).content.decode()
    assert "Humans and automatic judges side by side" in html and name in html


def test_dashboard_shows_the_leaderboard(client, arena):
    project, owner = arena
    client.force_login(owner)
    html = client.get(reverse("metrics:project-dashboard", args=[project.slug])).content.decode()
    section = html[html.index('id="leaderboard"'):html.index("</section>", html.index(
        'id="leaderboard"'))]
    assert "<td>1</td><td>strong</td>" in section
    assert "Style control: length" in section
    assert "Per domain" in section and "History" in section
    assert "?output=csv" in section


def _llm_judge_verdicts(project, *, position_bias: float):
    """The fake chat endpoint as an A/B LLM judge over the arena: it prefers the longer answer
    (A has 10 + n words, B 20), or with `position_bias` the answer shown first."""
    from metrics_app.services.judges.client import RetryPolicy
    from metrics_app.services.judges.runs import judge_project
    from metrics_app.services.judges.versions import judge_version_create
    from testing.openai_server import FakeChatServer

    with FakeChatServer(position_bias=position_bias) as server:
        version = judge_version_create(name="fake-ab", config={
            "base_url": server.url, "model": "fake-judge", "task": "ab"})[0]
        judge_project(project=project, version=version, concurrency=1,
                      retry=RetryPolicy(attempts=3, base_delay=0.001, max_delay=0.01))
    return version


def test_an_llm_judge_gets_its_own_board_and_a_combined_one(client, arena):
    from metrics_app.models import JudgeVerdict

    project, owner = arena
    client.force_login(owner)
    url = reverse("metrics-api:project-leaderboard", args=[project.slug])
    humans = client.get(url).json()
    assert "combined" not in humans  # cached now, without any judge
    version = _llm_judge_verdicts(project, position_bias=0.0)
    board = client.get(url).json()  # the new verdicts make the cached report stale
    judge = board["judges"][version.label]
    assert judge["judge"]["kind"] == "llm" and judge["judge"]["order_recorded"] is True
    # Asked in both orders, the length judge names the same side wherever the lengths differ;
    # on equal lengths it takes the answer shown first, so the two orders disagree.
    differ = sum(len(i.content["answer_a"]["text"]) != len(i.content["answer_b"]["text"])
                 for i in project.items.all())
    assert differ < 40
    assert judge["judge"]["position_consistency"] == {"items": 40, "consistent": differ,
                                                      "rate": differ / 40}
    # Its votes follow the stored verdicts: two per item, for the side the verdict names.
    expected_wins: dict[str, int] = {}
    for row in JudgeVerdict.objects.filter(judge_version=version).select_related("item"):
        side = "answer_a" if row.verdict == "A" else "answer_b"
        system = row.item.content[side]["system"]
        expected_wins[system] = expected_wins.get(system, 0) + 1
    assert judge["model"]["n_votes"] == 80
    assert {r["system"]: r["wins"] for r in judge["systems"]} == {
        s: expected_wins.get(s, 0) for s in STRENGTH}
    # The combined board: the humans' votes plus the judge's, the judge one labelled voter.
    combined = board["combined"][version.label]
    assert combined["model"]["n_votes"] == humans["overall"]["model"]["n_votes"] + 80
    assert combined["model"]["n_workers"] == humans["overall"]["model"]["n_workers"] + 1
    assert "humans + " + version.label in combined["voters"]
    labelled = [w for w in combined["robustness"]["position_bias"]["workers"]
                if w["worker"] == 0]
    assert labelled and labelled[0]["external_id"] == f"judge {version.label}"
    rows = {r["system"]: r for r in board["side_by_side"]}
    assert rows["strong"][version.label]["rank"] == next(
        r["rank"] for r in judge["systems"] if r["system"] == "strong")
    response = client.get(url, {"output": "csv"})
    categories = {r["category"] for r in csv.DictReader(io.StringIO(response.content.decode()))}
    assert {f"judge:{version.label}", f"humans+judge:{version.label}"} <= categories
    html = client.get(reverse("metrics:project-dashboard", args=[project.slug])).content.decode()
    assert "Humans + judge (the judge as one extra voter)" in html
    assert f"humans + {version.label}" in html
    assert f"<td>{version.label} alone</td>" in html
    assert f"{version.label}: position consistency" in html
    assert f"{differ} of 40 items give the same side" in html


def test_a_judge_that_always_picks_the_first_answer_is_position_inconsistent(client, arena):
    project, owner = arena
    client.force_login(owner)
    version = _llm_judge_verdicts(project, position_bias=1.0)
    board = client.get(reverse("metrics-api:project-leaderboard", args=[project.slug])).json()
    judge = board["judges"][version.label]
    # Always "the first shown": the two orders name opposite sides on every item, every vote
    # goes to the left position and the fit puts it in the position effect, not the systems.
    assert judge["judge"]["position_consistency"]["rate"] == 0.0
    assert all(r["wins"] == r["losses"] for r in judge["systems"])
    assert judge["model"]["position_effect"] > 3
    # Such votes place no system: every strength was 0 with an interval [0, 0] and rank 1-1.
    assert "every vote went to the answer shown first" in judge["model"]["bootstrap_notes"][
        "position"]
    for row in judge["systems"]:
        assert row["ci_item"] == [None, None] and row["unbounded"] == "both"
        assert row["rank_interval_item"] == [1, len(judge["systems"])]


def test_imported_ab_verdicts_without_an_order_are_a_board_without_position(client, arena,
                                                                           tmp_path):
    import json

    from metrics_app.services.judges.imports import verdicts_import

    project, owner = arena
    items = list(project.items.order_by("id"))
    # A judge file that names the item's side only (no order): A on even items, else B.
    rows = [{"item_id": item.external_id, "verdict": "AB"[n % 2]}
            for n, item in enumerate(items)]
    path = tmp_path / "ab.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    verdicts_import(project=project, path=path, judge="file-judge", version="1")
    client.force_login(owner)
    board = client.get(reverse("metrics-api:project-leaderboard", args=[project.slug])).json()
    judge = board["judges"]["file-judge@1"]
    assert judge["judge"]["kind"] == "imported" and judge["judge"]["order_recorded"] is False
    assert judge["judge"]["position_consistency"]["items"] == 0
    assert judge["model"]["position_effect"] is None and judge["model"]["n_votes"] == 40
    wins = {r["system"]: r["wins"] for r in judge["systems"]}
    assert wins == {system: sum(item.content[("answer_a", "answer_b")[n % 2]]["system"]
                                == system for n, item in enumerate(items))
                    for system in STRENGTH}
    # The combined board cannot fit a position effect either: the judge's order is unknown.
    assert board["combined"]["file-judge@1"]["model"]["position_effect"] is None


def test_a_judges_latest_verdict_on_changed_content_counts(client, arena):
    from metrics_app.models import JudgeVerdict
    from metrics_app.services.judges.client import RetryPolicy
    from metrics_app.services.judges.runs import judge_project
    from metrics_app.services.judges.versions import judge_version_create
    from testing.openai_server import FakeChatServer

    project, owner = arena
    item = project.items.order_by("id").first()
    retry = RetryPolicy(attempts=3, base_delay=0.001, max_delay=0.01)
    with FakeChatServer() as server:
        version = judge_version_create(name="fake-ab", config={
            "base_url": server.url, "model": "fake-judge", "task": "ab"})[0]
        judge_project(project=project, version=version, concurrency=1, retry=retry)
        # Item 0's answer B (20 words) beat A (10 words); A grows longer and is asked again.
        winner_before = item.content["answer_b"]["system"]
        item.content = {**item.content, "answer_a": {**item.content["answer_a"],
                                                     "text": " ".join(["x"] * 60)}}
        item.save()
        judge_project(project=project, version=version, concurrency=1, retry=retry)
    assert JudgeVerdict.objects.filter(judge_version=version, item=item).count() == 4
    client.force_login(owner)
    board = client.get(reverse("metrics-api:project-leaderboard", args=[project.slug])).json()
    judge = board["judges"][version.label]
    assert judge["model"]["n_votes"] == 80 and judge["judge"]["n_verdicts"] == 80
    assert item.content["answer_a"]["system"] != winner_before
    # The wins follow the newest verdict per item and order, on the content the item holds.
    newest = {}
    for row in JudgeVerdict.objects.filter(judge_version=version).order_by("id"):
        newest[(row.item_id, row.order)] = row
    expected = {s: 0 for s in STRENGTH}
    for row in newest.values():
        side = "answer_a" if row.verdict == "A" else "answer_b"
        expected[project.items.get(pk=row.item_id).content[side]["system"]] += 1
    assert newest[(item.pk, "AB")].verdict == newest[(item.pk, "BA")].verdict == "A"
    assert {r["system"]: r["wins"] for r in judge["systems"]} == expected


@pytest.mark.reliability
def test_a_judge_version_with_markup_is_escaped_on_the_dashboard(client, arena, tmp_path):
    import json

    from metrics_app.services.judges.imports import verdicts_import

    project, owner = arena
    rows = [{"item_id": item.external_id, "verdict": "A", "order": "AB"}
            for item in project.items.order_by("id")]
    path = tmp_path / "ab.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    verdicts_import(project=project, path=path, judge="file-judge", version="<b>x</b>")
    client.force_login(owner)
    html = client.get(reverse("metrics:project-dashboard", args=[project.slug])).content.decode()
    assert "humans + file-judge@&lt;b&gt;x&lt;/b&gt;" in html
    assert "<b>x</b>" not in html


def test_systems_never_compared_are_ranked_per_group_in_json_csv_dashboard_and_text(client):
    """Votes only between p and q, and only between r and s: each pair is a group of its own,
    and every door (JSON, CSV, dashboard, text report) ranks and labels them per group."""
    from django.core.management import call_command

    owner = make_user("owner")
    project = make_project(TaskKind.AB, owner=owner, slug="split-arena")
    stage = make_stage(project, kind=StageKind.FULL, name="full")
    workers = [make_worker(external_id=f"w{i}") for i in range(6)]
    for n in range(24):
        a, b = ("p", "q") if n % 2 else ("r", "s")
        item = make_item(project, content={
            "question": f"q{n}", "evidence": [], "setting": "HM",
            "answer_a": {"text": "one", "kind": "model", "upvotes": None, "system": a},
            "answer_b": {"text": "two", "kind": "model", "upvotes": None, "system": b}})
        for i, worker in enumerate(workers):
            make_judgment(item=item, stage=stage, worker=worker,
                          choice="A" if (n + i) % 3 else "B")
    client.force_login(owner)
    url = reverse("metrics-api:project-leaderboard", args=[project.slug])
    overall = client.get(url).json()["overall"]
    groups = overall["model"]["components"]
    assert sorted(map(sorted, groups)) == [["p", "q"], ["r", "s"]]
    assert sorted((r["component"], r["rank"]) for r in overall["systems"]) == \
        [(1, 1), (1, 2), (2, 1), (2, 2)]
    assert all(r["rank_interval_item"][1] <= 2 for r in overall["systems"])
    rows = list(csv.DictReader(io.StringIO(client.get(url, {"output": "csv"})
                                           .content.decode())))
    overall_rows = [r for r in rows if r["category"] == "overall"]
    assert sorted((r["component"], r["rank"]) for r in overall_rows) == \
        [("1", "1"), ("1", "2"), ("2", "1"), ("2", "2")]
    html = client.get(reverse("metrics:project-dashboard", args=[project.slug])).content.decode()
    assert "(group 2)" in html and "Each group is ranked on its own" in html
    out = io.StringIO()
    call_command("report", project.slug, stdout=out)
    assert "(group 2)" in out.getvalue()
    assert "Groups never compared with each other" in out.getvalue()


def test_too_many_systems_is_said_at_every_door_and_the_report_stands(client):
    """An import whose `system` names each item (a careless id): the board is refused with the
    reason in the JSON, on the dashboard and in the text report; the rest of the report is
    computed as before."""
    from django.core.management import call_command

    from metrics_app.domain.leaderboard import MAX_SYSTEMS

    owner = make_user("owner")
    project = make_project(TaskKind.AB, owner=owner, slug="many-systems")
    stage = make_stage(project, kind=StageKind.FULL, name="full")
    workers = [make_worker(external_id=f"w{i}") for i in range(2)]
    for n in range(MAX_SYSTEMS // 2 + 1):
        item = make_item(project, content={
            "question": f"q{n}", "evidence": [], "setting": "HM",
            "answer_a": {"text": "one", "kind": "model", "upvotes": None, "system": f"a-{n}"},
            "answer_b": {"text": "two", "kind": "model", "upvotes": None, "system": f"b-{n}"}})
        for worker in workers:
            make_judgment(item=item, stage=stage, worker=worker, choice="A")
    client.force_login(owner)
    board = client.get(reverse("metrics-api:project-leaderboard", args=[project.slug])).json()
    assert board["overall"]["error"].startswith(f"{MAX_SYSTEMS + 2} systems: at most")
    html = client.get(reverse("metrics:project-dashboard", args=[project.slug])).content.decode()
    assert "No leaderboard: " in html and "names the system that wrote it" in html
    out = io.StringIO()
    call_command("report", project.slug, stdout=out)
    assert f"Leaderboard: none ({MAX_SYSTEMS + 2} systems" in out.getvalue()
    assert "Agreement:" in out.getvalue()


def test_no_vote_between_two_systems_is_said_at_every_door(client):
    """A/B answers imported without a `system` (and without a model `kind`): every answer
    reads as one system ("human"), so no judgment compares two systems. The board vanished
    from the dashboard, the API (`{}`) and the text report without a word; now each says why,
    with the counts, and the CSV has no row."""
    from django.core.management import call_command

    owner = make_user("owner")
    project = make_project(TaskKind.AB, owner=owner, slug="no-systems")
    stage = make_stage(project, kind=StageKind.FULL, name="full")
    workers = [make_worker(external_id=f"w{i}") for i in range(3)]
    for n in range(4):
        item = make_item(project, content={
            "question": f"q{n}", "evidence": [],
            "answer_a": {"text": f"one {n}"}, "answer_b": {"text": f"two {n}"}})
        for worker in workers:
            make_judgment(item=item, stage=stage, worker=worker, choice="A")
    client.force_login(owner)
    url = reverse("metrics-api:project-leaderboard", args=[project.slug])
    board = client.get(url).json()
    reason = board["overall"]["error"]
    assert reason.startswith("none of the 12 votes compares two systems: 12 on items whose "
                             "two answers name one system (“human”)")
    assert board["skipped"]["same_system"] == 12
    rows = list(csv.reader(io.StringIO(client.get(url, {"output": "csv"}).content.decode())))
    assert len(rows) == 1  # the header
    html = client.get(reverse("metrics:project-dashboard", args=[project.slug])).content.decode()
    assert "No leaderboard: none of the 12 votes compares two systems" in html
    out = io.StringIO()
    call_command("report", project.slug, stdout=out)
    assert "Leaderboard: none (none of the 12 votes compares two systems" in out.getvalue()


def test_the_per_domain_and_judge_boards_say_why_an_interval_is_open_on_the_dashboard(client):
    """In Law the strong system won every vote: its Law interval is open above ("[0.9, —]").
    The API's board says why in its `notes`; the dashboard's per-domain table showed the dash
    alone (only the overall board's sentences were shown). Each board's sentences are shown
    beside its ranking, word for word."""
    owner = make_user("owner")
    project = make_project(TaskKind.AB, owner=owner, slug="open-domain")
    stage = make_stage(project, kind=StageKind.FULL, name="full")
    workers = [make_worker(external_id=f"w{i}") for i in range(6)]
    for n in range(24):
        domain = "Law" if n % 2 else "History"
        item = make_item(project, domain=domain, content={
            "question": f"q{n}", "evidence": [],
            "answer_a": {"text": f"one {n}", "kind": "model", "system": "strong"},
            "answer_b": {"text": f"two {n}", "kind": "model", "system": "weak"}})
        for i, worker in enumerate(workers):
            choice = "A" if domain == "Law" or (n + i) % 3 else "B"
            make_judgment(item=item, stage=stage, worker=worker, choice=choice)
    client.force_login(owner)
    board = client.get(reverse("metrics-api:project-leaderboard", args=[project.slug])).json()
    law = board["by_domain"]["Law"]
    sentence = next(note for note in law["notes"] if note.startswith("strong never lost"))
    html = client.get(reverse("metrics:project-dashboard", args=[project.slug])).content.decode()
    section = html[html.index("Per domain"):]
    assert sentence in section
    assert not any(note.startswith("strong never lost")
                   for note in board["by_domain"]["History"]["notes"])


def test_the_tie_choices_count_the_ties_the_board_counts(client, arena):
    """`tie_choices` (tie, both good, both bad) counts the tie votes of the board: ties on an
    item whose two answers are one text, left out of every board, counted there too (30
    "tie" beside the board's 24 ties)."""
    project, owner = arena
    stage = project.stages.get(name="full")
    same = make_item(project, domain="History", content={
        "question": "q same", "evidence": [],
        "answer_a": {"text": "one text", "kind": "model", "system": "strong"},
        "answer_b": {"text": "one text", "kind": "model", "system": "weak"}})
    for worker in {j.worker for j in stage.judgments.all()}:
        make_judgment(item=same, stage=stage, worker=worker, choice="tie")
    client.force_login(owner)
    board = client.get(reverse("metrics-api:project-leaderboard", args=[project.slug])).json()
    assert board["skipped"]["identical_answers"] == 6
    assert sum(board["tie_choices"].values()) == board["overall"]["model"]["n_ties"] > 0


def test_the_dashboard_sizes_no_gap_and_flips_no_top_the_votes_do_not_hold(client):
    """Two systems, one vote: the robustness list said "difference 3.91 ± 6.43; about 26 more
    direct comparisons for 80% power" (the prior's gap). It says why there is no difference."""
    owner = make_user("owner")
    project = make_project(TaskKind.AB, owner=owner, slug="one-vote")
    stage = make_stage(project, kind=StageKind.FULL, name="full")
    item = make_item(project, content={
        "question": "q", "evidence": [],
        "answer_a": {"text": "one", "kind": "model", "system": "a"},
        "answer_b": {"text": "two", "kind": "model", "system": "b"}})
    make_judgment(item=item, stage=stage, worker=make_worker(), choice="A")
    client.force_login(owner)
    html = client.get(reverse("metrics:project-dashboard", args=[project.slug])).content.decode()
    assert "a vs b: no finite difference: one never beat or tied the other" in html
    assert "more direct comparisons" not in html


def test_systems_whose_intervals_overlap_share_a_rank_by_ci_at_every_door(client):
    """x won 33 of 60 votes against y: the point ranks read 1 and 2, a strict order the votes
    do not settle. The rank by the intervals (Chatbot Arena's: 1 + the systems whose interval
    lies wholly above) is 1 for both, the same in the JSON, the CSV, on the dashboard and in
    `manage.py report`; a
    third system every interval puts below gets its own."""
    owner = make_user("owner")
    project = make_project(TaskKind.AB, owner=owner, slug="close")
    stage = make_stage(project, kind=StageKind.FULL, name="full")
    workers = [make_worker(external_id=f"w{i}") for i in range(6)]
    for n in range(20):
        first, second = ("x", "y") if n < 10 else (("x", "z") if n % 2 else ("y", "z"))
        item = make_item(project, content={
            "question": f"q{n}", "evidence": [],
            "answer_a": {"text": f"one {n}", "kind": "model", "system": first},
            "answer_b": {"text": f"two {n}", "kind": "model", "system": second}})
        for i, worker in enumerate(workers):
            wins = (n * 6 + i) % 60 < 33 if n < 10 else (n * 6 + i) % 6 != 0
            make_judgment(item=item, stage=stage, worker=worker, choice="A" if wins else "B")
    client.force_login(owner)
    url = reverse("metrics-api:project-leaderboard", args=[project.slug])
    rows = {r["system"]: r for r in client.get(url).json()["overall"]["systems"]}
    assert (rows["x"]["rank"], rows["y"]["rank"]) == (1, 2)
    assert rows["x"]["rank_ci_item"] == rows["y"]["rank_ci_item"] == 1
    assert rows["z"]["rank_ci_item"] == 3
    table = {r["system"]: r for r in csv.DictReader(io.StringIO(
        client.get(url, {"output": "csv"}).content.decode())) if r["category"] == "overall"}
    assert {name: table[name]["rank_ci_item"] for name in "xyz"} == {
        name: str(rows[name]["rank_ci_item"]) for name in "xyz"}
    from django.core.management import call_command

    out = io.StringIO()
    call_command("report", project.slug, stdout=out)
    for name in "xyz":
        assert any(line.split()[1] == name and line.endswith(f"by CI {rows[name]['rank_ci_item']}")
                   for line in out.getvalue().splitlines() if len(line.split()) > 1)
    html = client.get(reverse("metrics:project-dashboard", args=[project.slug])).content.decode()
    assert "rank by CI (items / workers)" in html
    for name in "xyz":
        cell = (f"<td>{rows[name]['rank_ci_item']} / {rows[name]['rank_ci_worker']}</td>")
        assert cell in html[html.index(f"<td>{name}</td>"):]


def test_a_stages_leaderboard_reads_the_judges_on_that_stages_items_only(client, arena):
    """With ?stage= the humans' board is that stage's judgments; the judges' boards read that
    stage's items too, not the whole project's."""
    from metrics_app.services.scoring import project_score_metrics

    project, owner = arena
    items = list(project.items.order_by("pk"))
    trial = make_stage(project, kind=StageKind.TRIAL, name="trial")
    trial.items.set(items[:10])
    for item in items[:10]:
        make_judgment(item=item, stage=trial, worker=make_worker(), choice="A")
    project_score_metrics(project=project, metric_names=["length"])
    client.force_login(owner)
    url = reverse("metrics-api:project-leaderboard", args=[project.slug])
    whole = client.get(url).json()
    (name, judge), = whole["judges"].items()
    assert judge["model"]["n_votes"] == 40
    staged = client.get(url, {"stage": trial.pk}).json()
    assert staged["judges"][name]["model"]["n_votes"] == 10


def test_a_board_mixing_imported_votes_says_how_many_lack_the_order_shown(client, arena):
    """Walking an A/B study on an imported expert file: 40 votes from the task pages carried the
    order shown, the 20 imported ones did not, and the dashboard said "the order shown was not
    recorded", as if the task page had lost it."""
    project, owner = arena
    imported = make_stage(project, kind=StageKind.IMPORTED, name="imported", provider="import")
    expert = make_worker(external_id="expert", provider="import")
    for item in project.items.all()[:5]:
        make_judgment(item=item, stage=imported, worker=expert, choice="A", presented_order=[])
    client.force_login(owner)
    board = client.get(reverse("metrics-api:project-leaderboard", args=[project.slug])).json()
    note = board["overall"]["robustness"]["position_bias"]["note"]
    total = board["overall"]["model"]["n_votes"]
    assert note.startswith(f"the order shown was not recorded for 5 of {total} votes")
    assert "order_unrecorded" not in board["skipped"]
    page = client.get(reverse("metrics:project-dashboard", args=[project.slug])).content.decode()
    assert f"not recorded for 5 of {total} votes" in page


@pytest.mark.reliability
def test_the_side_by_side_ranks_a_judge_on_the_items_the_humans_judged(client, arena):
    """The length judge also scored 20 pairs no human judged, where the weak system wrote the
    longer answer: its side-by-side column ranked the systems on 60 items against the humans'
    40, so a judge looked wrong (or right) by items the humans never saw."""
    from metrics_app.domain.leaderboard import leaderboard
    from metrics_app.reports.leaderboard import metric_votes
    from metrics_app.services.scoring import project_score_metrics

    project, owner = arena
    judged = [item.pk for item in project.items.all()]
    for n in range(20):
        make_item(project, domain="History", content={
            "question": f"unjudged {n}", "evidence": [], "setting": "HM",
            "answer_a": {"text": " ".join(["x"] * 60), "kind": "model", "upvotes": None,
                         "system": "weak"},
            "answer_b": {"text": "y", "kind": "model", "upvotes": None, "system": "strong"}})
    project_score_metrics(project=project, metric_names=["length"])
    client.force_login(owner)
    board = client.get(reverse("metrics-api:project-leaderboard", args=[project.slug])).json()
    (name, judge), = board["judges"].items()
    assert judge["model"]["n_votes"] == 60  # the judge's own board reads every pair it scored
    assert board["side_by_side_items"] == 40
    votes = metric_votes(project)[name]
    same_items = leaderboard(votes.subset(np.isin(votes.item, judged)), position=False,
                             style=False, robustness=False)
    expected = {r["system"]: (r["rank"], r["strength"]) for r in same_items["systems"]}
    everything = {r["system"]: (r["rank"], r["strength"]) for r in judge["systems"]}
    assert expected != everything
    for row in board["side_by_side"]:
        assert (row[name]["rank"], row[name]["strength"]) == pytest.approx(
            expected[row["system"]])
    html = client.get(reverse("metrics:project-dashboard", args=[project.slug])).content.decode()
    assert "On the 40 items the humans judged" in html


@pytest.mark.reliability
def test_a_judge_that_read_some_of_the_humans_items_is_ranked_beside_the_humans_on_those(
        client, arena):
    """An LLM judge run on a sample, or a learned judge beside the pairs it trained on, votes
    on part of the humans' items: its side-by-side column stood beside the humans' ranking on
    all 40 items, so the two rankings differed by the items as much as by the judge. Its cell
    now also carries the humans' ranking refitted on its own items."""
    from annotation.judgment_selectors import load_judgments
    from metrics_app.domain.leaderboard import leaderboard
    from metrics_app.models import MetricScore
    from metrics_app.reports.leaderboard import frame_votes

    project, owner = arena
    items = list(project.items.order_by("id"))
    sample = items[:20]
    # A judge that prefers B on these 20 pairs: its ranking is not the humans'.
    MetricScore.objects.bulk_create([
        MetricScore(item=item, metric="sampled", version="v1", side=side, value=value)
        for item in sample for side, value in (("A", 0.0), ("B", 1.0))])
    client.force_login(owner)
    board = client.get(reverse("metrics-api:project-leaderboard", args=[project.slug])).json()
    assert board["side_by_side_items"] == 40
    assert board["side_by_side_judge_items"] == {"sampled@v1": 20}
    frame = load_judgments(project=project, include_non_data_stages=True)
    votes, info = frame_votes(frame, frame.data_mask()
                              & np.isin(frame.item_id, [item.pk for item in sample]))
    humans_there = leaderboard(votes, position=info["order_recorded"], style=False,
                               robustness=False)
    expected = {r["system"]: (r["rank"], r["strength"]) for r in humans_there["systems"]}
    everywhere = {r["system"]: (r["human"]["rank"], r["human"]["strength"])
                  for r in board["side_by_side"]}
    assert expected != everywhere  # the same humans read differently on the judge's items
    for row in board["side_by_side"]:
        cell = row["sampled@v1"]
        assert (cell["human_rank"], cell["human_strength"]) == pytest.approx(
            expected[row["system"]])
    html = client.get(reverse("metrics:project-dashboard", args=[project.slug])).content.decode()
    assert "sampled@v1 voted on 20 of them" in html
    assert html.count("humans on its items:") == len(board["side_by_side"])


@pytest.mark.reliability
def test_the_dashboards_downloads_of_a_stage_are_that_stages_board(client, arena):
    """The dashboard narrowed to a stage showed that stage's board, but its CSV and JSON
    buttons (and the report's JSON link) fetched the whole project's: a different board for
    the same page. Each link now carries the stage the page shows."""
    import re
    from html import unescape

    project, owner = arena
    items = list(project.items.order_by("pk"))
    trial = make_stage(project, kind=StageKind.TRIAL, name="trial")
    trial.items.set(items[:12])
    for item in items[:12]:
        for _ in range(2):
            make_judgment(item=item, stage=trial, worker=make_worker(), choice="B")
    client.force_login(owner)
    page = reverse("metrics:project-dashboard", args=[project.slug])
    html = client.get(page, {"stage": trial.pk}).content.decode()
    section = html[html.index('id="leaderboard"'):]
    shown = int(re.search(r"fit of (\d+) votes", section).group(1))
    assert shown == 24
    links = {text: unescape(href) for href, text in re.findall(
        r'<a href="([^"]*)">(CSV|JSON)</a>', html)}
    csv_rows = list(csv.DictReader(io.StringIO(client.get(links["CSV"]).content.decode())))
    overall = [r for r in csv_rows if r["category"] == "overall"]
    assert sum(int(r["n_votes"]) for r in overall) == 2 * shown  # each vote counts twice
    board = client.get(links["JSON"]).json()
    assert board["overall"]["model"]["n_votes"] == shown
    report_link = unescape(re.search(r'<a href="([^"]*report/[^"]*)">JSON</a>', html).group(1))
    assert client.get(report_link).json()["n_judgments"] == shown
    # Without a stage the links read every data stage, as the page does.
    whole = client.get(page).content.decode()
    assert "stage=" not in re.search(r'<a href="([^"]*)">CSV</a>', whole).group(1)


@pytest.mark.reliability
def test_a_domain_without_a_vote_between_two_systems_says_why_at_every_door(client):
    """History's items all name one system on both sides: the overall board stands, and the
    History board was `null` in the API, an empty row on the dashboard and nothing in the CSV.
    It now says why, in the overall board's words (`no_board_reason`), at the API and on the
    dashboard; the CSV still has no row for it."""
    owner = make_user("owner")
    project = make_project(TaskKind.AB, owner=owner, slug="one-system-domain")
    stage = make_stage(project, kind=StageKind.FULL, name="full")
    workers = [make_worker(external_id=f"w{i}") for i in range(3)]
    for n in range(12):
        history = n % 2 == 0
        item = make_item(project, domain="History" if history else "Law", content={
            "question": f"q{n}", "evidence": [],
            "answer_a": {"text": f"one {n}", "system": "same" if history else "strong"},
            "answer_b": {"text": f"two {n}", "system": "same" if history else "weak"}})
        for i, worker in enumerate(workers):
            make_judgment(item=item, stage=stage, worker=worker, choice="AB"[(n + i) % 2])
    client.force_login(owner)
    url = reverse("metrics-api:project-leaderboard", args=[project.slug])
    board = client.get(url).json()
    assert board["overall"]["model"]["n_votes"] == 18
    why = board["by_domain"]["History"]["error"]
    assert why.startswith("none of the 18 votes compares two systems: 18 on items whose two "
                          "answers name one system (“same”)")
    html = client.get(reverse("metrics:project-dashboard", args=[project.slug])).content.decode()
    section = html[html.index("Per domain"):]
    assert "none of the 18 votes compares two systems" in section
    rows = list(csv.DictReader(io.StringIO(client.get(url, {"output": "csv"}).content.decode())))
    assert {r["category"] for r in rows} == {"overall", "domain:Law"}
