"""Likert items stored without a group key (the items API, the item admin, JSON Lines without
`group_key`) get their passage's key, as every door now stores them
(`annotation.domain.item_content.group_key_for`): candidates of one passage share HITs and
assignments instead of every keyless item of a split sharing one group of mixed passages."""

from django.db import migrations

from annotation.domain.item_content import group_key_for


def likert_group_keys_fill(apps, schema_editor):
    Item = apps.get_model("annotation", "Item")
    keyless = Item.objects.filter(project__kind="likert", group_key="")
    changed = []
    for item in keyless.only("id", "content", "group_key").iterator(chunk_size=2000):
        key = group_key_for(kind="likert", content=item.content, group_key="")
        if key:
            item.group_key = key
            changed.append(item)
        if len(changed) >= 2000:
            Item.objects.bulk_update(changed, ["group_key"])
            changed = []
    Item.objects.bulk_update(changed, ["group_key"])


class Migration(migrations.Migration):

    dependencies = [
        ('annotation', '0019_inhouse_annotators_per_researcher'),
    ]

    operations = [
        migrations.RunPython(likert_group_keys_fill, migrations.RunPython.noop),
    ]
