"""Names and labels stored with spaces around them before every door trimmed them
(`annotation.domain.item_content.ITEM_TRIMMED_FIELDS`, an imported judgment's worker and stage)
get their trimmed value, so re-importing the file that stored them finds them instead of
refusing it or storing the same item, worker or stage a second time.

A row whose trimmed value is taken (another row of the project holds that external id or
stage name, another import worker that id) is left as it is and named on one line, for an
operator to merge by hand; until then the imports use a row stored with spaces when it is the
only one that trims to the file's name (`annotation.selectors.rows_stored_untrimmed`)."""

from collections import defaultdict

from django.db import migrations

from annotation.domain.item_content import ITEM_TRIMMED_FIELDS, UNTRIMMED_PATTERN


def _left(model: str, scope: str, field: str, value: str, taken: str) -> None:
    print(f"trim_stored_names: left {model} of {scope}: {field} {value!r} (trimmed {taken!r} "
          "is taken by another row): merge them by hand")


def _untrimmed(queryset, field):
    return queryset.filter(**{f"{field}__regex": UNTRIMMED_PATTERN})


def _trim_unique(queryset, field, scope_fields, describe, model):
    """Trim `field` of the rows of `queryset` whose trimmed value no other row of their scope
    (the same `scope_fields`) holds or trims to; name the others (`_left`)."""
    rows = [(pk, tuple(scope), value) for pk, *scope, value in
            _untrimmed(queryset, field).values_list("id", *scope_fields, field)
            if value.strip() != value]
    claims = defaultdict(list)
    for pk, scope, value in rows:
        claims[scope, value.strip()].append(pk)
    for pk, scope, value in rows:
        trimmed = value.strip()
        taken = queryset.filter(**dict(zip(scope_fields, scope, strict=True)),
                                **{field: trimmed}).exists()
        if len(claims[scope, trimmed]) == 1 and not taken:
            queryset.filter(pk=pk).update(**{field: trimmed})
        else:
            _left(model, describe(scope), field, value, trimmed)


def trim_stored_names(apps, schema_editor):
    Item = apps.get_model("annotation", "Item")
    Worker = apps.get_model("annotation", "Worker")
    Stage = apps.get_model("annotation", "Stage")
    Project = apps.get_model("annotation", "Project")

    def in_project(scope):
        return f"project {Project.objects.get(pk=scope[0]).slug!r}"

    # Labels without a unique constraint: every row trimmed.
    for field in ITEM_TRIMMED_FIELDS:
        if field == "external_id":
            continue
        for value in set(_untrimmed(Item.objects, field).values_list(field, flat=True)):
            if value.strip() != value:
                Item.objects.filter(**{field: value}).update(**{field: value.strip()})
    # External ids: unique per project.
    _trim_unique(Item.objects.all(), "external_id", ["project_id"], in_project, "item")
    # Import workers: unique per provider (and researcher, for an in-house annotator).
    _trim_unique(Worker.objects.filter(provider="import"), "external_id",
                 ["provider", "researcher_id"], lambda scope: f"provider {scope[0]!r}", "worker")
    # Stage names: no constraint, but the imports find a stage by its name in the project, so
    # two stages of one name would split what the file holds between them.
    _trim_unique(Stage.objects.all(), "name", ["project_id"], in_project, "stage")


class Migration(migrations.Migration):

    dependencies = [
        ('annotation', '0022_spot_check'),
    ]

    operations = [
        migrations.RunPython(trim_stored_names, migrations.RunPython.noop),
    ]
