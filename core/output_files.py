"""Files a command writes, and what a command does when Ctrl-C stops it.

`output_file` is the one way a command writes its output file: the rows go to a hidden file
beside the target and replace it only once the last row is written, so an error or a Ctrl-C
half-way leaves the target as it was (an existing file untouched, a new one never created),
never half-written. A bad path is refused before any work, naming it and what to do
(`OutputPathError`): a missing folder, a folder given as the file, the command's own input file.

`InterruptibleCommand` turns a Ctrl-C into a `CommandError` saying what was left as it was
(exit status 1, no traceback).
"""
from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from django.core.management.base import BaseCommand, CommandError


class OutputPathError(ValueError):
    """An output path that cannot be written, with the reason and what to do."""


def output_path_problem(path: str | os.PathLike, *, inputs: tuple = (),
                        make_folder: bool = False) -> str | None:
    """Why `path` cannot be written as a command's output file, or None (`make_folder`: a
    missing folder is made when the file is written, as `score` always did)."""
    target = Path(path)
    if target.is_dir():
        return f"{path}: a folder; give a file name inside it, e.g. {target / 'out.jsonl'}"
    folder = target.parent
    while make_folder and not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if folder.exists() and not folder.is_dir():
        return f"{path}: {folder} is not a folder but a file; choose another path"
    if not folder.is_dir():
        return f"{path}: the folder {folder} does not exist; create it first or choose another path"
    for source in inputs:
        if source is not None and target.exists() and Path(source).exists() \
                and os.path.samefile(target, source):
            return (f"{path}: the input file; writing there would replace it: choose another "
                    "path")
    if not os.access(folder, os.W_OK):
        return f"{path}: no permission to write in the folder {folder}"
    return None


def output_file(path: str | os.PathLike, *, newline: str | None = None, inputs: tuple = (),
                make_folder: bool = False) -> contextlib.AbstractContextManager[IO[str]]:
    """A text handle whose content replaces `path` only when the `with` block ends without
    error; a path that cannot be written is an `OutputPathError` here, before any work."""
    problem = output_path_problem(path, inputs=inputs, make_folder=make_folder)
    if problem is not None:
        raise OutputPathError(problem)
    return _replacing(Path(path), newline, make_folder)


@contextlib.contextmanager
def _replacing(target: Path, newline: str | None, make_folder: bool) -> Iterator[IO[str]]:
    if make_folder:
        target.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd, temp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".part",
                                         dir=target.parent)
    except OSError as error:
        raise OutputPathError(f"{target}: cannot write in {target.parent}: "
                              f"{error.strerror or error}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline=newline) as handle:
            yield handle
        if target.exists():  # keep the permissions of the file it replaces
            os.chmod(temp_name, target.stat().st_mode & 0o7777)
        else:
            os.chmod(temp_name, 0o666 & ~_umask())
        os.replace(temp_name, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp_name)
        raise


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


# The Ctrl-C notes of the commands that compute, store and print a project report (`report`,
# `metric_report`): the report is stored in one transaction once it is computed.
REPORT_NOT_STORED_NOTE = ("no report stored: a report is stored only once fully computed, so the "
                          "cached one is as it was")
REPORT_STORED_NOTE = "the report is computed and stored; only its printing stopped"


class InterruptibleCommand(BaseCommand):
    """A command whose Ctrl-C is a one-line `CommandError` saying what was left as it was."""

    interrupted_note = "nothing was changed"

    def execute(self, *args, **options):
        try:
            return super().execute(*args, **options)
        except KeyboardInterrupt:
            raise CommandError(f"interrupted (Ctrl-C): {self.interrupted_note}") from None
