"""The migration that trims names and labels stored with spaces around them (items' external ids
and labels, import workers, stage names) trims every row whose trimmed value no other row holds
or trims to, and leaves the others as they are, naming each on one line for an operator."""
from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from tests.support.migrations import migration_and_parent

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.reliability]


def test_stored_names_are_trimmed_unless_the_trimmed_name_is_taken(capsys):
    _, parent = migration_and_parent("annotation", "trim_stored_names")
    executor = MigrationExecutor(connection)
    executor.migrate([parent])
    apps = executor.loader.project_state([parent]).apps
    Project = apps.get_model("annotation", "Project")
    Item = apps.get_model("annotation", "Item")
    Worker = apps.get_model("annotation", "Worker")
    Stage = apps.get_model("annotation", "Stage")
    project = Project.objects.create(slug="old", title="Old", kind="likert")
    other = Project.objects.create(slug="other", title="Other", kind="likert")
    content = {"passage": "p", "question": "q", "references": ["r"], "candidate": "c"}
    for target, external_id, dataset in [
            # Spaces PostgreSQL's `\s` leaves out (no-break space, NEL) are trimmed too.
            (project, "\u00a0q1\x85", "narrativeqa\u00a0"), (project, "q2 ", " mcscript"),
            (project, "q2", "narrativeqa"), (project, " q3", ""), (project, "q3\t", ""),
            (other, " q2", " cosmosqa\n")]:
        Item.objects.create(project=target, external_id=external_id, dataset=dataset,
                            source=" gpt2 ", domain="", text_level="", group_key=" g ",
                            design_unit="", exclusion_reason="dup ", content=content)
    for external_id in ("\u3000w1 ", "w2 ", "w2"):
        Worker.objects.create(provider="import", external_id=external_id)
    Worker.objects.create(provider="mturk", external_id=" A1")
    for target, name in [(project, "batch1\x1f"), (project, "trial "), (project, "trial"),
                         (other, " trial")]:
        Stage.objects.create(project=target, kind="imported", name=name)

    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())
    from annotation.models import Item as CurrentItem
    from annotation.models import Stage as CurrentStage
    from annotation.models import Worker as CurrentWorker

    items = CurrentItem.objects.order_by("id")
    assert [(i.project.slug, i.external_id, i.dataset) for i in items] == [
        ("old", "q1", "narrativeqa"), ("old", "q2 ", "mcscript"), ("old", "q2", "narrativeqa"),
        ("old", " q3", ""), ("old", "q3\t", ""), ("other", "q2", "cosmosqa")]
    assert {(i.source, i.group_key, i.exclusion_reason) for i in items} == {("gpt2", "g", "dup")}
    assert list(CurrentWorker.objects.order_by("id").values_list("external_id", flat=True)) \
        == ["w1", "w2 ", "w2", " A1"]
    assert list(CurrentStage.objects.order_by("id").values_list("name", flat=True)) \
        == ["batch1", "trial ", "trial", "trial"]
    left = [line for line in capsys.readouterr().out.splitlines() if "trim_stored_names" in line]
    assert sorted(left) == sorted([
        "trim_stored_names: left item of project 'old': external_id 'q2 ' (trimmed 'q2' is "
        "taken by another row): merge them by hand",
        "trim_stored_names: left item of project 'old': external_id ' q3' (trimmed 'q3' is "
        "taken by another row): merge them by hand",
        "trim_stored_names: left item of project 'old': external_id 'q3\\t' (trimmed 'q3' is "
        "taken by another row): merge them by hand",
        "trim_stored_names: left worker of provider 'import': external_id 'w2 ' (trimmed 'w2' "
        "is taken by another row): merge them by hand",
        "trim_stored_names: left stage of project 'old': name 'trial ' (trimmed 'trial' is "
        "taken by another row): merge them by hand",
    ])
