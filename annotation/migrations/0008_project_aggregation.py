from django.db import migrations, models


def fill_defaults(apps, schema_editor):
    """Existing projects get their kind's default, so the setting shows what is in use."""
    Project = apps.get_model("annotation", "Project")
    Project.objects.filter(kind="likert", aggregation="").update(aggregation="mean")
    Project.objects.filter(aggregation="").exclude(kind="likert").update(aggregation="majority")


class Migration(migrations.Migration):

    dependencies = [
        ("annotation", "0007_adjudication"),
    ]

    operations = [
        migrations.AddField(
            model_name="project",
            name="aggregation",
            field=models.CharField(
                blank=True,
                choices=[("majority", "majority"), ("dawid_skene", "dawid_skene"),
                         ("mace", "mace"), ("glad", "glad"), ("mean", "mean"),
                         ("median", "median")],
                default="",
                help_text="How an item's judgments become its label (aggregated exports, LERC "
                          "training targets): Likert projects mean (default) or median; A/B and "
                          "multiple-choice projects majority (default), dawid_skene, mace or "
                          "glad. docs/AGGREGATION.md compares them.",
                max_length=12,
            ),
        ),
        migrations.RunPython(fill_defaults, migrations.RunPython.noop),
    ]
