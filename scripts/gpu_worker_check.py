"""Train the default LERC through a real Celery `gpu` worker, end to end, and report its timings.

    python scripts/gpu_worker_check.py --data ../shared/data/open_qa_judgments [--out DIR]
        [--options '{"epochs": 2}'] [--timeout 1800]

What a deployment does on a GPU machine, in a fresh var folder (SQLite, the filesystem broker,
no server): migrate, import both EVOUNA files as two Likert projects, start
`celery -A worker worker -Q gpu` (the command docs/DEPLOYMENT.md gives a GPU machine), queue
the default run with `train_lerc --project evouna-nq --project evouna-tq` (no `--sync`: the
worker trains it), wait for the version to be evaluated, and print what it recorded: the
device and precision it trained on, the seconds of each stage, its test numbers and the
promotion decision. `--out` keeps the report (gpu-worker.json) and the worker's log.

It runs on CPU too (the worker then trains on CPU, as the demo's does); on a GPU it is the check
that the `gpu` queue, bf16 autocast and the promotion rule work together (docs/LERC.md, "On a
GPU").
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
PROJECTS = (("evouna-nq", "evouna_nq.json"), ("evouna-tq", "evouna_tq.json"))
SETTLED = ("evaluated", "promoted", "rejected", "failed", "cancelled")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, required=True,
                        help="the folder holding evouna_nq.json and evouna_tq.json")
    parser.add_argument("--out", type=Path, default=None,
                        help="where gpu-worker.json and worker.log go (default: the var folder)")
    parser.add_argument("--var", type=Path, default=None,
                        help="a fresh var folder (default: a new temporary one)")
    parser.add_argument("--options", default="{}", help="train_lerc --options (JSON)")
    parser.add_argument("--pool", default="prefork", choices=("prefork", "solo"),
                        help="the worker's pool (prefork, as deployed; solo runs the task in "
                             "the worker's own process)")
    parser.add_argument("--timeout", type=float, default=1800.0,
                        help="seconds to wait for the worker to finish the version")
    return parser.parse_args()


def main() -> int:
    args = parse_args()
    for _slug, name in PROJECTS:
        if not (args.data / name).is_file():
            sys.exit(f"--data: {args.data / name} is missing")
    options_problem = train_options_problem(args.options)
    if options_problem:
        sys.exit(f"--options: {options_problem}")
    var = args.var or Path(tempfile.mkdtemp(prefix="qaj-gpu-check-"))
    var.mkdir(parents=True, exist_ok=True)
    out = args.out or var
    out.mkdir(parents=True, exist_ok=True)
    os.environ.update({
        "DJANGO_SETTINGS_MODULE": "config.settings.dev",
        "QAJ_VAR_DIR": str(var),
        "DATABASE_URL": f"sqlite:///{var / 'qajudge.sqlite3'}",
        "CELERY_BROKER_URL": "filesystem://",
        "PYTHONUNBUFFERED": "1",
    })
    import django

    django.setup()
    from django.core.management import call_command

    from metrics_app.models import ModelVersion
    from metrics_app.services.lerc import model_version_summary

    stages: dict[str, float] = {}
    started = time.monotonic()
    call_command("migrate", verbosity=0)
    for slug, name in PROJECTS:
        call_command("import_data", "evouna", str(args.data / name), project=slug, create=True,
                     no_progress=True)
    stages["migrate_and_import"] = round(time.monotonic() - started, 1)

    log = (out / "worker.log").open("w")
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "worker", "worker", "-Q", "gpu",
         "--concurrency", "1", "--pool", args.pool, "--loglevel", "INFO", "--without-heartbeat", "--without-gossip",
         "--without-mingle"],
        cwd=REPO, stdout=log, stderr=subprocess.STDOUT, env=os.environ.copy())
    try:
        queued_at = time.monotonic()
        call_command("train_lerc", "--project", PROJECTS[0][0], "--project", PROJECTS[1][0],
                     "--options", args.options)
        version = ModelVersion.objects.latest("id")
        while version.status not in SETTLED:
            if worker.poll() is not None:
                sys.exit(f"the worker exited ({worker.returncode}); see {out / 'worker.log'}")
            if time.monotonic() - queued_at > args.timeout:
                sys.exit(f"{version} did not settle in {args.timeout:.0f} s")
            time.sleep(2)
            version.refresh_from_db()
        stages["queued_to_settled"] = round(time.monotonic() - queued_at, 1)
    finally:
        worker.terminate()
        try:
            worker.wait(timeout=30)
        except subprocess.TimeoutExpired:
            worker.kill()
        log.close()

    training = version.metrics.get("training") or {}
    report = {
        "version": str(version),
        "status": version.status,
        "error": version.error,
        "seconds": stages,
        "device": training.get("device"),
        "history": training.get("history"),
        **model_version_summary(version),
        "gpu": gpu_name(),
    }
    (out / "gpu-worker.json").write_text(json.dumps(report, indent=2, default=str))
    print(json.dumps(report, indent=2, default=str))
    return 0 if version.status in ("evaluated", "promoted", "rejected") else 1


def train_options_problem(text: str) -> str:
    """Why `--options` is no set of training options ("" when it is one), checked by the rule
    `train_lerc` applies (`TrainConfig.from_dict`) before anything is migrated or imported."""
    from metrics_app.lerc.config import TrainConfig

    try:
        TrainConfig.from_dict(json.loads(text))
    except json.JSONDecodeError as exc:
        return f"not JSON ({exc}); e.g. '{{\"epochs\": 2}}'"
    except (TypeError, ValueError) as exc:
        return str(exc)
    return ""


def gpu_name() -> str | None:
    try:
        import torch
    except ImportError:
        return None
    return torch.cuda.get_device_name(0) if torch.cuda.is_available() else None


if __name__ == "__main__":
    sys.exit(main())
