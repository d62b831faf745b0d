"""Where trained model folders live: a local (or network-mounted) folder, or S3 via boto3.

QAJ_ARTIFACT_ROOT is either a path or `s3://bucket/prefix`. Training always writes to a local
working folder first; with S3 the finished model folder is uploaded and workers download it
once into a local cache before scoring.
"""
from __future__ import annotations

import hashlib
from pathlib import Path
from urllib.parse import urlparse

from django.conf import settings


class ModelFilesUnusable(Exception):
    """A version's model folder cannot serve here: missing on this machine, or its files
    damaged (truncated weights, a config that is not JSON). The message names the folder and
    what to do; every door that serves or compares a stored version catches this one error."""


def artifact_root() -> str:
    return str(settings.QAJ_ARTIFACT_ROOT)


def is_s3(uri: str) -> bool:
    return uri.startswith("s3://")


def work_dir(key: str) -> Path:
    """Local folder where a model version trains (and keeps its resumable checkpoint). Under a
    local artifact root it is the artifact folder itself, so a worker on another machine that
    mounts the same folder can resume a killed job."""
    root = artifact_root()
    if is_s3(root):
        base = Path(settings.VAR_DIR) / "lerc-work"
    else:
        base = Path(root) / "lerc"
    path = base / key
    path.mkdir(parents=True, exist_ok=True)
    return path


def _s3_client():
    import boto3

    return boto3.client("s3", endpoint_url=getattr(settings, "AWS_S3_ENDPOINT_URL", None) or None)


def artifact_store(local_folder: Path, key: str) -> str:
    """Make the finished model folder durable; returns its URI for ModelVersion.artifact_uri."""
    root = artifact_root()
    if not is_s3(root):
        return str(local_folder.resolve())
    parsed = urlparse(root.rstrip("/") + "/")
    prefix = f"{parsed.path.lstrip('/')}lerc/{key}/model/"
    client = _s3_client()
    for path in sorted(local_folder.rglob("*")):
        if path.is_file():
            client.upload_file(str(path), parsed.netloc, prefix + path.relative_to(local_folder)
                               .as_posix())
    return f"s3://{parsed.netloc}/{prefix}"


def artifact_local_path(uri: str) -> Path:
    """A local folder holding the model at `uri` (downloaded once from S3 into a cache)."""
    if not uri:
        raise ModelFilesUnusable("the model version has no artifact")
    if not is_s3(uri):
        path = Path(uri)
        if not path.is_dir():
            raise ModelFilesUnusable(f"model folder {uri} is missing on this machine")
        return path
    cache = Path(settings.VAR_DIR) / "artifact-cache" / hashlib.sha256(uri.encode()).hexdigest()[:16]
    if (cache / ".complete").is_file():
        return cache
    parsed = urlparse(uri)
    prefix = parsed.path.lstrip("/")
    client = _s3_client()
    paginator = client.get_paginator("list_objects_v2")
    found = False
    for page in paginator.paginate(Bucket=parsed.netloc, Prefix=prefix):
        for obj in page.get("Contents", []):
            target = cache / obj["Key"][len(prefix):]
            target.parent.mkdir(parents=True, exist_ok=True)
            client.download_file(parsed.netloc, obj["Key"], str(target))
            found = True
    if not found:
        raise ModelFilesUnusable(f"no model files under {uri}")
    (cache / ".complete").write_text(uri)
    return cache
