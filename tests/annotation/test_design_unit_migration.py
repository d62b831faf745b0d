"""The migration that adds Item.design_unit fills it for the items already stored, by the one
derivation rule (OneStopQA/in-lab ids, metadata), and leaves it empty where nothing names one."""
from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from tests.support.migrations import migration_and_parent

pytestmark = pytest.mark.django_db(transaction=True)


def _this_and_previous():
    return migration_and_parent("annotation", "item_design_unit")


def test_existing_items_get_their_design_unit():
    node, parent = _this_and_previous()
    executor = MigrationExecutor(connection)
    executor.migrate([parent])
    apps = executor.loader.project_state([parent]).apps
    Project = apps.get_model("annotation", "Project")
    Item = apps.get_model("annotation", "Item")
    project = Project.objects.create(slug="old", title="Old", kind="mc")
    content = {"paragraph": "p", "question": "q", "answers": ["a", "b", "c", "d"]}
    for external_id, metadata in [("os21_1_2_Int", {}), ("r3919_1_Middle", {}),
                                  ("mine", {"article": 7, "paragraph": 2}), ("lone", {})]:
        Item.objects.create(project=project, external_id=external_id, content=content,
                            metadata=metadata)
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())
    from annotation.models import Item as CurrentItem

    assert dict(CurrentItem.objects.values_list("external_id", "design_unit")) == {
        "os21_1_2_Int": "os21_1", "r3919_1_Middle": "r3919",
        "mine": "article 7 paragraph 2", "lone": ""}
