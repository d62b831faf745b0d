"""Item.design_unit: the STARC design unit (a OneStopQA paragraph, a RACE article), filled for
existing items by the one derivation rule (annotation.domain.design.design_unit_for)."""

from django.db import migrations, models

from annotation.domain.design import design_unit_for


def fill_design_units(apps, schema_editor):
    Item = apps.get_model("annotation", "Item")
    changed = []
    for item in Item.objects.only("pk", "external_id", "metadata").iterator(chunk_size=2000):
        unit = design_unit_for(external_id=item.external_id, metadata=item.metadata)
        if unit:
            item.design_unit = unit
            changed.append(item)
        if len(changed) >= 2000:
            Item.objects.bulk_update(changed, ["design_unit"])
            changed = []
    if changed:
        Item.objects.bulk_update(changed, ["design_unit"])


class Migration(migrations.Migration):

    dependencies = [
        ("annotation", "0012_stage_lifecycle"),
    ]

    operations = [
        migrations.AddField(
            model_name="item",
            name="design_unit",
            field=models.CharField(blank=True, db_index=True, help_text="The text a participant reads (a OneStopQA paragraph at any level, a RACE article): in a STARC Latin square a participant never gets two items of one unit. Derived from the external id or metadata when not given (annotation.domain.design.design_unit_for); empty: the item is its own unit.", max_length=100),
        ),
        migrations.RunPython(fill_design_units, migrations.RunPython.noop),
    ]
