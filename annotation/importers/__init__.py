"""Importers: one module per file format, each a pure parser of a file into validated records.

Every module exposes `KIND` (the task kind it produces; None when the file says) and
`parse(path, *, kind, split=None) -> list[ItemRecord]`, raising `ImportFormatError` that names
the file, the record and the field. `annotation.services.imports.import_records` stores them.
Formats are documented in docs/DATA_FORMATS.md.
"""
from __future__ import annotations

from importlib import import_module
from types import ModuleType

from .base import (
    DEFAULT_IMPORT_STAGE,
    ImportFormatError,
    ItemRecord,
    JudgmentRecord,
    normalize_split,
)

FORMAT_MODULES = {
    "jsonl": "annotation.importers.jsonl",
    "mocha": "annotation.importers.mocha",
    "mocha-minimal-pairs": "annotation.importers.mocha_minimal_pairs",
    "onestopqa": "annotation.importers.onestopqa",
    "onestopqa-responses": "annotation.importers.onestopqa_responses",
    "lfqa-experts": "annotation.importers.lfqa_experts",
    "evouna": "annotation.importers.evouna",
}


def importer_for(format_name: str) -> ModuleType:
    """The parser module of a format; ValueError listing the formats when it is unknown."""
    if format_name not in FORMAT_MODULES:
        raise ValueError(
            f"unknown format {format_name!r}; known formats: {', '.join(FORMAT_MODULES)}"
        )
    return import_module(FORMAT_MODULES[format_name])


__all__ = [
    "DEFAULT_IMPORT_STAGE",
    "FORMAT_MODULES",
    "ImportFormatError",
    "ItemRecord",
    "JudgmentRecord",
    "importer_for",
    "normalize_split",
]
