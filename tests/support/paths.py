"""Where the checkout and the shared real data are, and whether this is CI."""
from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


IN_CI = os.environ.get("CI", "").lower() == "true"


def shared_data_path() -> Path:
    return Path(os.environ.get("QAJ_SHARED_DATA", REPO_ROOT.parent / "shared" / "data"))
