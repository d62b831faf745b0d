"""Screenshots of the browser tests, kept as CI artifacts (QAJ_SCREENSHOT_DIR moves them:
scripts/test.sh gives the PostgreSQL pass, which runs beside the SQLite one, a folder of its
own)."""
from __future__ import annotations

import os
from pathlib import Path

from tests.support.paths import REPO_ROOT

SCREENSHOT_DIR = Path(os.environ.get("QAJ_SCREENSHOT_DIR")
                      or REPO_ROOT / "test-artifacts" / "screenshots")


def screenshot(page, name: str, *, top: bool = False) -> Path:
    SCREENSHOT_DIR.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOT_DIR / f"{name}.png"
    if top:
        page.evaluate("window.scrollTo(0, 0)")
    page.screenshot(path=str(path), full_page=False)
    return path
