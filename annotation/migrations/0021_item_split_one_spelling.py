"""Items stored with another spelling of a split ("validation", "Dev", " train") get its one
spelling (`annotation.domain.item_content.normalize_split`), as every door now stores it, so
the redundancy per split and the reports find them (the pages' picking compares the stored
split with the redundancy's keys in SQL)."""

from django.db import migrations

from annotation.domain.item_content import normalize_split


def item_splits_normalize(apps, schema_editor):
    Item = apps.get_model("annotation", "Item")
    for split in list(Item.objects.values_list("split", flat=True).distinct()):
        if normalize_split(split) != split:
            Item.objects.filter(split=split).update(split=normalize_split(split))


class Migration(migrations.Migration):

    dependencies = [
        ('annotation', '0020_likert_group_key_from_passage'),
    ]

    operations = [
        migrations.RunPython(item_splits_normalize, migrations.RunPython.noop),
    ]
