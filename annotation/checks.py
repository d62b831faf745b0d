"""System checks of the stored data (`manage.py check --database default`; also run by
`migrate`): every stage's status is one its logged transitions produce, so no door (a form, the
API, a bulk edit, the shell) changed it around the publish / close / extend services."""
from __future__ import annotations

from collections import defaultdict

from django.core import checks
from django.db import DatabaseError, connections


@checks.register(checks.Tags.database)
def stage_status_explained_by_transitions(app_configs=None, databases=None, **kwargs):
    """annotation.E001: a stage whose status its StageTransition log cannot explain."""
    if not databases:
        return []  # a database check: run when asked for one (Django's convention)
    from annotation.models import Stage, StageTransition
    from annotation.services.stages import transition_log_problem

    errors = []
    for alias in databases:
        connection = connections[alias]
        try:
            with connection.cursor() as cursor:
                columns = {c.name for c in connection.introspection.get_table_description(
                    cursor, StageTransition._meta.db_table)}
        except DatabaseError:
            continue  # not migrated yet: nothing stored to check
        if "actor" not in columns:
            continue  # before the migration that records the log's legacy rows
        logs: dict[int, list[tuple[str, str, str]]] = defaultdict(list)
        for stage_id, from_status, to_status, actor, user_id in (
                StageTransition.objects.using(alias).order_by("created_at", "id")
                .values_list("stage_id", "from_status", "to_status", "actor", "user_id")):
            # A row of a user is never a legacy record, whatever their name.
            logs[stage_id].append((from_status, to_status, "" if user_id else actor))
        stages = (Stage.objects.using(alias).order_by("pk")
                  .values_list("pk", "status", "name", "project__slug"))
        for pk, status, name, slug in stages:
            problem = transition_log_problem(status, logs.get(pk, []))
            if problem:
                errors.append(checks.Error(
                    f"stage {slug} / {name} (id {pk}) is {status}, a state its transitions "
                    f"could not produce: {problem}",
                    hint="Status changes only through Publish, Close and Extend (admin actions "
                         "or annotation.services.stages), which log who and why. Close the "
                         "stage with the Close action to record it; `migrate --skip-checks` "
                         "meanwhile.",
                    obj=f"annotation.Stage:{pk}", id="annotation.E001"))
    return errors
