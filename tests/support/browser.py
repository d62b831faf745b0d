"""Screenshots of the browser tests, kept as CI artifacts."""
from __future__ import annotations

from pathlib import Path

from tests.support.paths import REPO_ROOT

SCREENSHOT_DIR = REPO_ROOT / "test-artifacts" / "screenshots"


def screenshot(page, name: str, *, top: bool = False) -> Path:
    SCREENSHOT_DIR.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOT_DIR / f"{name}.png"
    if top:
        page.evaluate("window.scrollTo(0, 0)")
    page.screenshot(path=str(path), full_page=False)
    return path
