"""Explicit hooks through which a higher layer extends annotation (annotation cannot import
metrics_app: the layers in .importlinter). A higher app fills them in its `AppConfig.ready`;
annotation reads them when it needs them. Nothing here imports anything: registering is the only
coupling.

- Stage admin actions: metrics_app adds "Route by LERC uncertainty" and "Draw A/B pairs
  adaptively" (they read LERC scores and fit the leaderboard); the stage admin lists them
  after its own (annotation/admin/projects.py: `StageAdmin.actions`).
- What was computed from an item's content: metrics_app names the metric scores it caches per
  item, so the item rule (`annotation.services.items.item_edit_errors`) refuses a content
  change that would leave them describing the old text.
"""
from __future__ import annotations

from collections.abc import Callable

_stage_admin_actions: list[Callable] = []


def stage_admin_action_register(action: Callable) -> None:
    """Add an admin action (a function decorated with `@admin.action`) to the stage admin;
    registering one twice lists it once."""
    if action not in _stage_admin_actions:
        _stage_admin_actions.append(action)


def stage_admin_actions_registered() -> tuple[Callable, ...]:
    """The stage admin actions other apps registered, in registration order."""
    return tuple(_stage_admin_actions)


_content_readers: list[Callable[[int], str]] = []


def item_content_reader_register(reader: Callable[[int], str]) -> None:
    """Add a function of an item id that says what is stored as computed from that item's
    content ("" when nothing is); registering one twice lists it once."""
    if reader not in _content_readers:
        _content_readers.append(reader)


def item_content_readers_registered() -> tuple[Callable[[int], str], ...]:
    return tuple(_content_readers)
