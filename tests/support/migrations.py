"""Helpers for tests that run a data migration with Django's migration executor."""
from __future__ import annotations

from django.db import connection
from django.db.migrations.executor import MigrationExecutor


def migration_and_parent(app: str, name_end: str) -> tuple[tuple[str, str], tuple[str, str]]:
    """The node of `app`'s migration whose name ends with `name_end` and its parent in `app`."""
    graph = MigrationExecutor(connection).loader.graph
    node = next(key for key in graph.nodes if key[0] == app and key[1].endswith(name_end))
    parent = next(p.key for p in graph.node_map[node].parents if p.key[0] == app)
    return node, parent
