"""CSV cells a spreadsheet will not run as formulas: the one helper every CSV the product
writes for people goes through (judgment exports, link downloads, the stage release preview,
the systems leaderboard).

Excel, LibreOffice and Google Sheets read a cell that begins with `=`, `+`, `-` or `@` (and,
after a leading tab or carriage return, the same) as a formula, so a justification such as
`=HYPERLINK("http://evil", "click")` or an annotator named `@SUM(1+1)` would run when a
researcher opens the export. Such text cells get a leading apostrophe (OWASP's advice), which
spreadsheets show as text and which a reader of the file can strip. Numbers are written as
numbers (a negative score stays `-1.5`); only strings are escaped. JSON Lines exports are
verbatim and need none of this.

The bulk COPY buffer in `annotation.services.imports` is CSV for PostgreSQL, not for people,
and must stay verbatim: it does not use this module.
"""
from __future__ import annotations

import csv
from collections.abc import Iterable
from typing import Any

FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")


def csv_safe(value: Any) -> Any:
    """`value` as a spreadsheet shows it without running it: a string that a spreadsheet
    would read as a formula gets a leading apostrophe; anything else is returned unchanged."""
    if isinstance(value, str) and value.startswith(FORMULA_PREFIXES):
        return "'" + value
    return value


class SafeWriter:
    """`csv.writer` whose every cell goes through `csv_safe`."""

    def __init__(self, out, **kwargs):
        self._writer = csv.writer(out, **kwargs)

    def writerow(self, row: Iterable[Any]):
        return self._writer.writerow([csv_safe(value) for value in row])

    def writerows(self, rows: Iterable[Iterable[Any]]) -> None:
        for row in rows:
            self.writerow(row)


class SafeDictWriter(csv.DictWriter):
    """`csv.DictWriter` whose every cell (and header) goes through `csv_safe`."""

    def writeheader(self):
        return self.writer.writerow([csv_safe(name) for name in self.fieldnames])

    def writerow(self, rowdict):
        return super().writerow({key: csv_safe(value) for key, value in rowdict.items()})

    def writerows(self, rowdicts):
        for rowdict in rowdicts:
            self.writerow(rowdict)
