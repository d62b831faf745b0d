"""Dashboard page, report API, block action and the Celery refresh task."""
from __future__ import annotations

import json

import pytest
from django.urls import reverse

from annotation.models import ExperimentMode, StageKind, TaskKind, WorkerBlock, WorkerStatus
from annotation.selectors import blocked_worker_ids_for
from metrics_app.models import Report
from testing.factories import (
    make_item,
    make_judgment,
    make_project,
    make_stage,
    make_user,
    make_worker,
)
from worker.tasks.reports import report_refresh as report_refresh_task

pytestmark = pytest.mark.django_db


@pytest.fixture
def ab_project():
    owner = make_user("owner")
    project = make_project(TaskKind.AB, owner=owner, slug="ab-dash", title="A/B dashboard")
    stage = make_stage(project, kind=StageKind.TRIAL, name="trial")
    workers = [make_worker(external_id=f"expert-{i}") for i in range(3)]
    for n in range(6):
        item = make_item(project, domain="Biology" if n < 3 else "History")
        for i, worker in enumerate(workers):
            make_judgment(item=item, stage=stage, worker=worker,
                          choice="A" if (n + (i == 2)) % 2 else "B", difficult=bool(i),
                          aspects=["factuality"] if i == 0 else [], time_spent_ms=1000 * (i + 1))
    return project, owner, workers


def test_dashboard_renders_tables_and_inline_charts(client, ab_project):
    project, owner, _workers = ab_project
    client.force_login(owner)
    response = client.get(reverse("metrics:project-dashboard", args=[project.slug]))
    assert response.status_code == 200
    html = response.content.decode()
    assert "A/B dashboard" in html and "domain=Biology" in html
    assert html.count("<svg") >= 3  # agreement, long-form bars, worker scatter
    assert "expert-2" in html and "Long-form A/B preferences by domain" in html
    # A page view stores nothing; after the refresh (Beat, imports) it reads the cached charts.
    assert not Report.objects.filter(project=project).exists()
    report_refresh_task(project.pk)
    assert Report.objects.filter(project=project, kind="project-charts").count() == 1
    cached = client.get(reverse("metrics:project-dashboard", args=[project.slug]))
    assert cached.content.decode().count("<svg") == html.count("<svg")
    again = client.get(reverse("metrics:project-dashboard", args=[project.slug]),
                       {"sort": "speed", "group_by": "domain"})
    assert again.status_code == 200


def test_dashboard_shows_annotator_pairs_with_their_confusion_matrices(client, ab_project):
    project, owner, _workers = ab_project
    client.force_login(owner)
    html = client.get(reverse("metrics:project-dashboard", args=[project.slug])).content.decode()
    section = html[html.index('id="annotator-pairs"'):]
    # expert-0 and expert-1 always agree; expert-2 always answers the other way.
    pairs_table = section[:section.index("against the others")]
    assert "3 pairs" in pairs_table and pairs_table.count("<details>") == 3
    assert "confusion expert-0 × expert-1" in section
    row = section[section.index("<td>expert-0</td><td>expert-1</td>"):].split("</tr>")[0]
    assert "<td>6</td><td>100.0%</td><td>1.000</td>" in row
    row = section[section.index("<td>expert-0</td><td>expert-2</td>"):].split("</tr>")[0]
    assert "<td>6</td><td>0.0%</td><td>-1.000</td>" in row
    # expert-2 never sides with the majority (experts 0 and 1); for experts 0 and 1 the
    # others tie (one agrees, one does not), so they have no majority to compare with.
    against = section[section.index('id="against-majority"'):]
    assert "<td>expert-2</td><td>6</td><td>0.0%</td>" in against
    assert "<td>expert-0</td>" not in against


def test_dashboard_and_api_hide_other_researchers_projects(client, ab_project):
    project, _owner, _workers = ab_project
    client.force_login(make_user("stranger"))
    assert client.get(reverse("metrics:project-dashboard", args=[project.slug])).status_code == 404
    assert client.get(reverse("metrics-api:project-report", args=[project.slug])).status_code == 404
    client.logout()
    page = client.get(reverse("metrics:project-dashboard", args=[project.slug]))
    assert page.status_code == 302  # to the login page
    assert client.get(reverse("metrics-api:project-report", args=[project.slug])).status_code in (
        401, 403)


def test_report_api_for_owner_shared_user_and_superuser(client, ab_project):
    project, owner, _workers = ab_project
    colleague = make_user("colleague")
    project.shared_with.add(colleague)
    url = reverse("metrics-api:project-report", args=[project.slug])
    for user in (owner, colleague, make_user("root", superuser=True)):
        client.force_login(user)
        response = client.get(url, {"stage": "trial", "group_by": "domain"})
        assert response.status_code == 200
        data = response.json()
        assert set(data["agreement"]) == {"all", "domain=Biology", "domain=History"}
        assert data["agreement"]["all"]["n_judgments"] == 18
        assert data["lfqa"]["by_domain"]["Biology"]["n_experts"] == 3
    assert client.get(url, {"group_by": "colour"}).status_code == 400
    assert client.get(url, {"stage": "nope"}).status_code == 404


def test_block_action_blocks_a_worker_of_this_project_only(client, ab_project):
    project, owner, workers = ab_project
    other_project = make_project(TaskKind.AB, owner=owner, slug="ab-other", title="Another")
    client.force_login(owner)
    page = client.get(reverse("metrics:project-dashboard", args=[project.slug])).content.decode()
    assert page.count('class="block"') == 3
    url = reverse("metrics:worker-block", args=[project.slug, workers[2].pk])
    # One click does not block: the first step is a page that says how far the block reaches.
    confirm = client.get(url, {"reason": "lowers agreement"})
    assert confirm.status_code == 200
    text = confirm.content.decode()
    assert "in all 2 projects you own or that are shared with you" in text
    assert other_project.title in text and 'value="lowers agreement"' in text
    assert client.post(url, {"reason": "lowers agreement"}).status_code == 200  # no confirm
    assert not WorkerBlock.objects.filter(worker=workers[2]).exists()
    response = client.post(url, {"reason": "lowers agreement", "confirm": "1"})
    assert response.status_code == 302
    workers[2].refresh_from_db()
    # A researcher's block applies to their projects, not globally (#13).
    assert workers[2].status == WorkerStatus.ACTIVE
    block = WorkerBlock.objects.get(worker=workers[2])
    assert (block.researcher, block.reason) == (owner, "lowers agreement")
    assert workers[2].pk in blocked_worker_ids_for(project)
    # The dashboard (its report cached before the block) shows the worker as blocked at once,
    # still listed, with an Unblock button.
    page = client.get(reverse("metrics:project-dashboard", args=[project.slug])).content.decode()
    workers_section = _section(page, "workers")
    assert page.count('class="block"') == 2 and "expert-2" in workers_section
    unblock = reverse("metrics:worker-unblock", args=[project.slug, workers[2].pk])
    assert unblock in workers_section
    assert client.post(unblock).status_code == 302
    assert workers[2].pk not in blocked_worker_ids_for(project)
    outsider = make_worker()
    other = reverse("metrics:worker-block", args=[project.slug, outsider.pk])
    assert client.post(other, {"confirm": "1"}).status_code == 404
    outsider.refresh_from_db()
    assert outsider.status == WorkerStatus.ACTIVE
    assert not WorkerBlock.objects.filter(worker=outsider).exists()


def test_unblocking_says_when_someone_elses_block_remains(client, ab_project):
    from annotation.services.workers import worker_block

    project, owner, workers = ab_project
    worker_block(worker=workers[0], reason="fraud", by=make_user("root", superuser=True))
    client.force_login(owner)
    response = client.post(reverse("metrics:worker-unblock", args=[project.slug, workers[0].pk]),
                           follow=True)
    assert "still blocked here: a superuser blocked them" in response.content.decode()
    assert workers[0].pk in blocked_worker_ids_for(project)


def test_refresh_task_recomputes_stale_projects(ab_project, settings):
    settings.CELERY_TASK_ALWAYS_EAGER = True
    from worker.celery import app

    app.conf.task_always_eager = True
    try:
        from worker.tasks.reports import reports_refresh_stale

        project, _owner, workers = ab_project
        assert reports_refresh_stale() == [project.pk]
        assert Report.objects.filter(project=project, kind="project").count() == 1
        assert Report.objects.filter(project=project, kind="project-charts").count() == 1
        assert reports_refresh_stale() == []
        make_judgment(item=make_item(project), stage=project.stages.first(), worker=workers[0])
        assert reports_refresh_stale() == [project.pk]
        report = Report.objects.get(project=project, kind="project")
        assert report.data["agreement"]["all"]["n_judgments"] == 19
    finally:
        app.conf.task_always_eager = False


def _report_computations(monkeypatch) -> list[int]:
    """The ids of the projects whose report is computed from now on, in order."""
    from metrics_app.reports import project as project_reports

    real = project_reports.project_report_with_fingerprint
    asked: list[int] = []

    def counted(**kwargs):
        asked.append(kwargs["project"].pk)
        return real(**kwargs)

    monkeypatch.setattr(project_reports, "project_report_with_fingerprint", counted)
    return asked


def test_a_refresh_sent_again_for_a_fresh_project_computes_nothing(ab_project, monkeypatch):
    """The beat sends a refresh of every stale project every two minutes; a report slower
    than that is sent again while its refresh is queued or running. The copies that run after
    it find the report fresh and compute nothing (they recomputed it each, one after another,
    so a slow project's refreshes piled up on the queue)."""
    project, _owner, workers = ab_project
    watermark = report_refresh_task(project.pk)
    computed = {r.kind: r.computed_at for r in Report.objects.filter(project=project)}
    asked = _report_computations(monkeypatch)
    assert report_refresh_task(project.pk) == watermark
    assert asked == []
    assert {r.kind: r.computed_at for r in Report.objects.filter(project=project)} == computed
    # A new judgment makes it stale again: the next refresh computes.
    make_judgment(item=make_item(project), stage=project.stages.first(), worker=workers[0])
    assert report_refresh_task(project.pk) > watermark
    assert asked == [project.pk]


@pytest.mark.reliability
def test_refreshes_sent_while_judgments_keep_arriving_compute_once_for_what_they_were_sent_for(
        ab_project, monkeypatch):
    """A live study: judgments keep arriving while a slow report refreshes. The beat sent a
    refresh (A), then another (B) once a judgment arrived; A ran after both were sent and read
    B's judgment; then another judgment arrived. B finds what it was sent for read already and
    computes nothing, where it found the report stale again and recomputed it: every copy the
    beat sent during a slow refresh recomputed in turn, and the copies outgrew the queue that
    the provider syncs wait on too. What arrived after is the next beat's refresh."""
    from metrics_app.reports.project import stale_report_watermarks

    project, _owner, workers = ab_project
    stage = project.stages.first()
    make_judgment(item=make_item(project), stage=stage, worker=workers[0])
    sent_a = stale_report_watermarks()[project.pk]
    make_judgment(item=make_item(project), stage=stage, worker=workers[0])
    sent_b = stale_report_watermarks()[project.pk]
    assert sent_b > sent_a
    asked = _report_computations(monkeypatch)
    assert report_refresh_task(project.pk, sent_a) == sent_b  # A reads B's judgment too
    make_judgment(item=make_item(project), stage=stage, worker=workers[0])
    assert report_refresh_task(project.pk, sent_b) == sent_b  # B: nothing to compute
    assert asked == [project.pk]
    newest = stale_report_watermarks()[project.pk]
    assert report_refresh_task(project.pk, newest) == newest  # the next beat's computes
    assert asked == [project.pk, project.pk]
    # A refresh sent without a watermark (an import, a finished job) computes as before.
    make_judgment(item=make_item(project), stage=stage, worker=workers[0])
    assert report_refresh_task(project.pk) > newest
    assert len(asked) == 3


def test_admin_project_list_links_to_the_dashboard(client, ab_project):
    project, owner, _workers = ab_project
    client.force_login(owner)
    response = client.get(reverse("admin:annotation_project_changelist"))
    assert response.status_code == 200
    assert reverse("metrics:project-dashboard", args=[project.slug]) in response.content.decode()


def test_a_block_takes_the_workers_judgments_out_of_the_cached_report_at_once(client, ab_project):
    """Blocked workers' judgments do not count (`judgments_that_count`): blocking adds no
    judgment, yet the cached report is recomputed without them (#13)."""
    from annotation.services.workers import worker_block

    project, owner, workers = ab_project
    client.force_login(owner)
    url = reverse("metrics-api:project-report", args=[project.slug])
    report_refresh_task(project.pk)
    before = client.get(url).json()
    assert {w["worker_id"]: w["status"] for w in before["workers"]}[workers[2].pk] == \
        WorkerStatus.ACTIVE
    computed = Report.objects.get(project=project, kind="project", stage=None).computed_at
    worker_block(worker=workers[2], reason="random answers", by=owner)
    after = client.get(url).json()
    # Still listed (so the dashboard can unblock them), with no counted judgment.
    blocked_row = {w["worker_id"]: w for w in after["workers"]}[workers[2].pk]
    assert (blocked_row["status"], blocked_row["n_judgments"]) == ("blocked", 0)
    assert blocked_row["n_blocked_judgments"] == 6
    assert {w["worker_id"] for w in after["workers"]
            if w["status"] == "active"} == {workers[0].pk, workers[1].pk}
    assert after["agreement"]["all"]["n_judgments"] < before["agreement"]["all"]["n_judgments"]
    # The GET computed the new numbers without storing them; the next refresh stores them.
    assert Report.objects.get(project=project, kind="project", stage=None).computed_at == computed
    report_refresh_task(project.pk)
    assert Report.objects.get(project=project, kind="project", stage=None).computed_at > computed


def _section(html: str, section_id: str) -> str:
    start = html.index(f'<section id="{section_id}">')
    return html[start:html.index("</section>", start)]


def test_dashboard_renders_a_likert_project_with_its_histogram(client):
    owner = make_user("likert-owner")
    project = make_project(TaskKind.LIKERT, owner=owner, slug="likert-dash")
    stage = make_stage(project, name="full")
    workers = [make_worker(external_id=f"rater-{i}") for i in range(3)]
    for n in range(8):
        item = make_item(project, dataset="narrativeqa" if n < 4 else "drop")
        for i, worker in enumerate(workers):
            make_judgment(item=item, stage=stage, worker=worker, score=1 + (n + i) % 5,
                          time_spent_ms=3000)
    client.force_login(owner)
    response = client.get(reverse("metrics:project-dashboard", args=[project.slug]))
    assert response.status_code == 200
    likert = _section(response.content.decode(), "likert")
    assert "Score distribution" in likert and "<svg" in likert  # the histogram
    assert "narrativeqa" in likert and "drop" in likert


def test_dashboard_renders_a_starc_project_with_choice_bars(client):
    owner = make_user("starc-owner")
    project = make_project(TaskKind.MC, owner=owner, slug="starc-dash")
    stage = make_stage(project, name="full")
    people = [make_worker(external_id=f"reader-{i}") for i in range(4)]
    for question in ("q1", "q2"):
        for level in ("Ele", "Adv"):
            item = make_item(project, external_id=f"{question}_{level}", text_level=level,
                             dataset="onestopqa", gold={"choice": "A"})
            for i, person in enumerate(people):
                make_judgment(item=item, stage=stage, worker=person, choice="ABCA"[i])
    client.force_login(owner)
    response = client.get(reverse("metrics:project-dashboard", args=[project.slug]))
    assert response.status_code == 200
    starc = _section(response.content.decode(), "starc")
    assert "STARC: accuracy and answer choices" in starc
    assert "<svg" in starc  # the stacked A-D choice-rate bars
    assert "onestopqa/Ele" in starc and "onestopqa/Adv" in starc


@pytest.mark.parametrize("mode", [ExperimentMode.VALIDITY, ExperimentMode.GUESSING])
def test_the_starc_section_says_what_each_mode_measures(client, mode):
    """A validity project showed an accuracy table with its header and no rows; a guessing
    project's column read "accuracy (A)" for answers given without the paragraph."""
    owner = make_user("starc-owner")
    project = make_project(TaskKind.MC, owner=owner, experiment_mode=mode)
    stage = make_stage(project)
    item = make_item(project, text_level="Ele", dataset="onestopqa", gold={"choice": "A"})
    for choice in "AB":
        make_judgment(item=item, stage=stage, worker=make_worker(), choice=choice,
                      choices=[choice] if mode == ExperimentMode.VALIDITY else [])
    client.force_login(owner)
    starc = _section(client.get(reverse("metrics:project-dashboard", args=[project.slug]))
                     .content.decode(), "starc")
    if mode == ExperimentMode.VALIDITY:
        assert "<th>source / level</th>" not in starc and "no accuracy" in starc
        assert "Validity judging" in starc
    else:
        assert "guessed right (A), no paragraph" in starc and "accuracy (A)" not in starc


def test_lfqa_difficult_rate_and_aspect_counts_per_domain(ab_project):
    from metrics_app.reports.project import project_report

    project, _owner, _workers = ab_project
    lfqa = project_report(project=project)["lfqa"]
    for domain in ("Biology", "History"):
        # experts 1 and 2 mark every pair difficult, expert 0 none; expert 0 names factuality
        assert lfqa["by_domain"][domain]["difficult_rate"] == pytest.approx(2 / 3)
        assert lfqa["by_domain"][domain]["aspect_counts"] == {"factuality": 3}
    assert lfqa["overall"]["difficult_rate"] == pytest.approx(2 / 3)
    assert lfqa["overall"]["aspect_counts"] == {"factuality": 6}


def test_the_lfqa_table_says_when_no_aspect_was_ticked(client, ab_project):
    """The real expert files record no aspects: the "top aspects" cell was left blank."""
    project, owner, workers = ab_project
    stage = project.stages.get()
    for n in range(2):
        item = make_item(project, domain="Law")
        for worker in workers[:2]:
            make_judgment(item=item, stage=stage, worker=worker, choice="AB"[n], aspects=[])
    client.force_login(owner)
    lfqa = _section(client.get(reverse("metrics:project-dashboard",
                                       args=[project.slug])).content.decode(), "lfqa")
    law = lfqa[lfqa.index("<td>Law</td>"):]
    assert law[:law.index("</tr>")].endswith("<td>none ticked</td>")
    assert "factuality 3</td>" in lfqa


def test_the_lfqa_table_says_why_a_domains_kappa_is_undefined_at_every_door(client, ab_project):
    """Fleiss' κ of a domain judged by one expert, by experts who never judged the same pair,
    or by experts who all gave one answer has no value: the dashboard, the report API and
    `manage.py report` say which, as the agreement section does, not a bare dash beside an
    item count (the real files' Chemistry, Law and TechCS read "– (0)")."""
    import io

    from django.core.management import call_command

    project, owner, workers = ab_project
    stage = project.stages.get()
    for n in range(2):
        make_judgment(item=make_item(project, domain="Law"), stage=stage, worker=workers[0],
                      choice="AB"[n])
        make_judgment(item=make_item(project, domain="Physics"), stage=stage,
                      worker=workers[n], choice="A")
        both = make_item(project, domain="Economics")
        for worker in workers[:2]:
            make_judgment(item=both, stage=stage, worker=worker, choice="B")
    why = {"Law": "one expert judged this domain",
           "Physics": "no pair was judged by all 2 experts",
           "Economics": "every judgment of the items judged twice gives the same answer (B)"}
    client.force_login(owner)
    api = client.get(reverse("metrics-api:project-report", args=[project.slug])).json()
    out = io.StringIO()
    call_command("report", project.slug, stdout=out)
    lfqa = _section(client.get(reverse("metrics:project-dashboard",
                                       args=[project.slug])).content.decode(), "lfqa")
    for domain, reason in why.items():
        row = api["lfqa"]["by_domain"][domain]
        assert row["fleiss_kappa"] is None and reason in row["fleiss_undefined"], domain
        line = next(line for line in out.getvalue().splitlines()
                    if line.strip().startswith(domain))
        assert f"κ undefined: {reason}" in line, line
        cells = lfqa[lfqa.index(f"<td>{domain}</td>"):]
        assert f"undefined: {reason}" in cells[:cells.index("</tr>")], domain
    assert api["lfqa"]["by_domain"]["Biology"]["fleiss_undefined"] is None


def test_a_stage_is_named_by_id_or_name_in_the_dashboard_report_api_and_cli(client, ab_project):
    """One rule (annotation.access_selectors.project_stage_by_ref): id or name, everywhere."""
    import io

    from django.core.management import CommandError, call_command

    project, owner, _workers = ab_project
    stage = project.stages.get(name="trial")
    client.force_login(owner)
    page = reverse("metrics:project-dashboard", args=[project.slug])
    api = reverse("metrics-api:project-report", args=[project.slug])
    for ref in ("trial", str(stage.pk)):
        assert client.get(page, {"stage": ref}).status_code == 200
        response = client.get(api, {"stage": ref})
        assert response.status_code == 200
        assert response.json()["agreement"]["all"]["n_judgments"] == 18
        out = io.StringIO()
        call_command("report", project.slug, "--json", "--stage", ref, stdout=out)
        assert json.loads(out.getvalue())["agreement"]["all"]["n_judgments"] == 18
    for bad in ("nope", "12abc", "99999", "-1"):
        assert client.get(page, {"stage": bad}).status_code == 404  # never a 500
        assert client.get(api, {"stage": bad}).status_code == 404
        with pytest.raises(CommandError, match="no stage"):
            call_command("report", project.slug, "--json", "--stage", bad, stdout=io.StringIO())
    # NUL was a 500 on PostgreSQL, which cannot compare text holding one; the API's
    # serializer refuses it first (400).
    assert client.get(page, {"stage": "trial\x00"}).status_code == 404
    with pytest.raises(CommandError, match="no stage"):
        call_command("report", project.slug, "--json", "--stage", "trial\x00",
                     stdout=io.StringIO())



def test_one_judgment_per_item_shows_why_there_is_no_agreement_instead_of_dashes(client):
    """STARC in-lab data: every reader answers each question once at one level."""
    owner = make_user("single-owner")
    project = make_project(TaskKind.MC, owner=owner, slug="single-rater")
    stage = make_stage(project, name="full")
    for n in range(4):
        make_judgment(item=make_item(project, gold={"choice": "A"}), stage=stage,
                      worker=make_worker(), choice="AB"[n % 2])
    client.force_login(owner)
    html = client.get(reverse("metrics:project-dashboard", args=[project.slug])).content.decode()
    agreement = _section(html, "agreement")
    # The statement the API's `alpha_undefined`, the cockpit and `manage.py report` give.
    assert ("undefined: no item has two judgments that count yet (agreement compares "
            "judgments of the same item). It is measured once two workers have judged the same "
            "items") in agreement
    # Not "set the redundancy above 1": a trial asking 3 per item reads this before its work.
    assert "Set the redundancy above 1" not in agreement
    assert "Krippendorff" not in agreement


def test_a_worker_is_named_the_same_way_in_every_table(client, ab_project):
    """The worker table showed the display name ("Ann"), the annotator pairs and the chart the
    id ("ann")."""
    from annotation.models import Worker

    project, owner, workers = ab_project
    Worker.objects.filter(pk=workers[0].pk).update(external_id="ann", display_name="Ann")
    Worker.objects.filter(pk=workers[1].pk).update(display_name="Dr. Bea Smith")
    client.force_login(owner)
    page = client.get(reverse("metrics:project-dashboard", args=[project.slug])).content.decode()
    workers_table = _section(page, "workers")
    assert "<td>ann</td>" in workers_table and "Ann" not in workers_table
    assert "expert-1 <small>(Dr. Bea Smith)</small>" in workers_table
    assert "<td>ann</td>" in _section(page, "annotator-pairs")


def test_stale_reports_can_be_refreshed_in_process_before_the_first_visit(client, ab_project):
    """rundemo precomputes the demo dashboards this way (the first LFQA visit took 18 s)."""
    from worker.tasks.reports import reports_refresh_stale

    project, owner, _workers = ab_project
    assert reports_refresh_stale(here=True) == [project.pk]
    computed = {r.kind: r.computed_at for r in Report.objects.filter(project=project)}
    # The judges report too: its page read it from the cache only after a judge job ran.
    assert set(computed) == {"project", "project-charts", "judge_alignment"}
    assert reports_refresh_stale(here=True) == []
    client.force_login(owner)
    assert client.get(reverse("metrics:project-dashboard", args=[project.slug])).status_code == 200
    # The visit read the cache: nothing was computed again.
    assert {r.kind: r.computed_at for r in Report.objects.filter(project=project)} == computed


@pytest.mark.parametrize("reason", ["spam\x00", "x" * 501])
def test_block_refuses_a_reason_the_form_would_not_send(client, ab_project, reason):
    """The reason is stored with the block: NUL was a 500 on PostgreSQL (and stored on SQLite)
    and the form's 500-character limit was not checked. The confirmation page answers 400 with
    the cause, and nobody is blocked."""
    project, owner, workers = ab_project
    client.force_login(owner)
    url = reverse("metrics:worker-block", args=[project.slug, workers[0].pk])
    response = client.post(url, {"reason": reason, "confirm": "1"})
    assert response.status_code == 400
    assert "The reason" in response.content.decode()
    assert not WorkerBlock.objects.filter(worker=workers[0]).exists()
    workers[0].refresh_from_db()
    assert workers[0].status == WorkerStatus.ACTIVE


def test_an_unknown_sort_shows_the_default_order_as_chosen(client, ab_project):
    project, owner, _workers = ab_project
    client.force_login(owner)
    url = reverse("metrics:project-dashboard", args=[project.slug])
    for sort in ("bogus", "<script>", ""):
        page = client.get(url, {"sort": sort})
        assert page.status_code == 200
        assert "#workers\"><strong>contribution</strong></a>" in page.content.decode()


def test_the_sort_links_keep_the_grouping(client, ab_project):
    """Sorting the workers while agreement is grouped by a field keeps the grouping (the links
    carried only the stage)."""
    project, owner, _workers = ab_project
    client.force_login(owner)
    url = reverse("metrics:project-dashboard", args=[project.slug])
    html = client.get(url, {"group_by": "domain"}).content.decode()
    links = html[html.index("Sort by:"):html.index("Sort by:") + 600]
    assert "group_by=domain&amp;sort=" in links, links


@pytest.mark.reliability
def test_the_beat_refreshes_a_report_made_stale_without_a_new_judgment(ab_project):
    """A finished study: no judgment arrives any more, and the researcher blocks a worker (or
    rejects work, excludes an item, promotes a LERC version: `item_fingerprint`). The report
    reads decide freshness by the judgments' watermark AND that fingerprint; the beat asked
    only the watermark, so it never refreshed such a project, and every visit to its dashboard
    computed the whole report in the request (18 s on the demo's LFQA project), forever. The
    beat now finds it stale by the readers' rule and stores a fresh copy once."""
    from annotation.services.workers import worker_block
    from metrics_app.reports.project import fresh_cached_report
    from worker.tasks.reports import reports_refresh_stale

    project, owner, workers = ab_project
    assert reports_refresh_stale(here=True) == [project.pk]
    assert reports_refresh_stale(here=True) == []
    before = fresh_cached_report(project=project)
    assert before["agreement"]["all"]["n_judgments"] == 18
    worker_block(worker=workers[2], reason="spam", by=owner)
    assert fresh_cached_report(project=project) is None  # the readers compute it live
    assert reports_refresh_stale(here=True) == [project.pk]
    after = fresh_cached_report(project=project)
    assert after is not None and after["agreement"]["all"]["n_judgments"] == 12
    assert reports_refresh_stale(here=True) == []  # once: the stored copy is fresh again


def test_the_beat_checks_a_bounded_draw_of_finished_studies_for_other_changes(settings,
                                                                             monkeypatch):
    """The check of a finished study's other inputs costs a fingerprint (about 16 queries and
    a hash of its items): the beat draws at most QAJ_REPORT_FINGERPRINT_CHECKS of them a time
    (it checked every one every 2 minutes), and a study changed is still found by a later
    beat."""
    from annotation.services.workers import worker_block
    from metrics_app.reports import project as project_reports
    from worker.tasks.reports import reports_refresh_stale

    owner = make_user("owner")
    projects, blockable = [], None
    for n in range(4):
        project = make_project(TaskKind.AB, owner=owner, slug=f"done-{n}")
        stage = make_stage(project, kind=StageKind.TRIAL, name="trial")
        for w in range(2):
            worker = make_worker(external_id=f"w{n}-{w}")
            blockable = blockable or worker
            make_judgment(item=make_item(project), stage=stage, worker=worker, choice="A")
        projects.append(project)
    assert sorted(reports_refresh_stale(here=True)) == sorted(p.pk for p in projects)
    settings.QAJ_REPORT_FINGERPRINT_CHECKS = 1
    checked = []
    real = project_reports._reads_current_inputs

    def counted(fingerprint, project):
        checked.append(project.pk)
        return real(fingerprint, project)

    monkeypatch.setattr(project_reports, "_reads_current_inputs", counted)
    assert reports_refresh_stale(here=True) == [] and len(checked) == 1
    worker_block(worker=blockable, reason="spam", by=owner)  # changes the first study only
    found = []
    for _beat in range(60):  # a draw of 1 in 4 a beat: found within a few
        found = reports_refresh_stale(here=True)
        if found:
            break
    assert found == [projects[0].pk]
