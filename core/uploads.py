"""The largest file a researcher may upload (`QAJ_IMPORT_UPLOAD_MAX_MB`, default 20 MB): one
limit and one message for every upload door (the admin's item import, the judges page's and
the API's verdict import); larger files go through the door's management command."""
from __future__ import annotations

from django.conf import settings


def upload_max_bytes() -> int:
    return int(getattr(settings, "QAJ_IMPORT_UPLOAD_MAX_MB", 20)) * 1024 * 1024


def upload_size_error(size: int, *, command: str) -> str | None:
    """Why an upload of `size` bytes is refused (naming the limit, its setting and `command`,
    the door for larger files), or None when it fits."""
    limit = upload_max_bytes()
    if size <= limit:
        return None
    return (f"The file is {size / 1024 / 1024:.1f} MB; an upload takes at most "
            f"{limit // 1024 // 1024} MB (QAJ_IMPORT_UPLOAD_MAX_MB). Import larger files with "
            f"{command}.")
