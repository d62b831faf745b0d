"""Artifacts that both test passes can share. scripts/test.sh runs the SQLite and PostgreSQL
passes at the same time in one clone; an expensive artifact that never touches the database
(a trained model) is built by whichever pass asks first, under a file lock, and the other pass
waits for it and reuses it instead of paying for it again. The key covers the code and data the
artifact is built from, so a change rebuilds it; older builds of the same name are removed."""
from __future__ import annotations

import fcntl
import hashlib
import shutil
from collections.abc import Callable, Iterable
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ROOT = REPO / "var" / "test-shared"


def content_key(paths: Iterable[Path], *, extra: str = "") -> str:
    """A hash of `extra` and the bytes of every file (every .py file of a folder)."""
    digest = hashlib.sha256(extra.encode())
    for path in paths:
        files = sorted(path.rglob("*.py")) if path.is_dir() else [path]
        for file in files:
            digest.update(str(file).encode())
            digest.update(file.read_bytes())
    return digest.hexdigest()[:16]


def built_once(name: str, key: str, build: Callable[[Path], None]) -> Path:
    """The folder `name-key`, calling `build(folder)` unless a complete build is there."""
    ROOT.mkdir(parents=True, exist_ok=True)
    folder = ROOT / f"{name}-{key}"
    with open(ROOT / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not (folder / ".complete").is_file():
            for old in ROOT.glob(f"{name}-*"):
                shutil.rmtree(old, ignore_errors=True)
            build(folder)
            (folder / ".complete").write_text(key)
    return folder
