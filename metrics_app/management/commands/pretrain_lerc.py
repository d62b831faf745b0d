"""MOCHA's multiple-choice pre-training, once, as a backbone folder for later LERC training.

    python manage.py pretrain_lerc --project onestopqa --out /models/minilm-mc
        [--max-examples 3400] [--epochs 1] [--max-length 256] [--backbone DIR]
    python manage.py train_lerc --project evouna --backbone /models/minilm-mc

`train_lerc --pretrain-project` pre-trains inside every run; this keeps the result so that
scheduled retraining (set `QAJ_LERC_BACKBONE` to the folder) starts from it without paying
for it again. Examples come from multiple-choice projects' items (answer A correct): for each
wrong answer (correct, wrong) and (wrong, correct), and (correct, correct) per question.
"""
from __future__ import annotations

import sys
from pathlib import Path

from django.conf import settings
from django.core.management.base import CommandError

from annotation.models import TaskKind
from core.output_files import InterruptibleCommand
from metrics_app.management.projects import projects_by_slug
from metrics_app.services.lerc.datasets import mc_pretraining_build


class Command(InterruptibleCommand):
    help = "Pre-train the LERC encoder on multiple-choice projects once; write a backbone folder."
    interrupted_note = ("nothing written (--out is written only once pre-training ends); run "
                        "the command again, it starts over")

    def add_arguments(self, parser):
        parser.add_argument("--project", action="append", required=True,
                            help="Multiple-choice project slug; repeat for several.")
        parser.add_argument("--out", required=True, type=Path,
                            help="Folder to write (must not hold a model already).")
        parser.add_argument("--backbone", default="",
                            help="Local Hugging Face folder to start from (default: packaged "
                                 "MiniLM).")
        parser.add_argument("--epochs", type=int, default=1)
        parser.add_argument("--max-examples", type=int,
                            help="At most this many pre-training examples (a seeded subset).")
        parser.add_argument("--max-length", type=int)
        parser.add_argument("--no-progress", action="store_true")

    def handle(self, *args, **options):
        from tqdm import tqdm

        from metrics_app.lerc.config import TrainConfig
        from metrics_app.lerc.training import pretrain_backbone

        projects = projects_by_slug(options["project"])
        for project in projects:
            if project.kind != TaskKind.MC:
                raise CommandError(f"project {project.slug!r} is {project.kind}, "
                                   "not multiple-choice")
        out: Path = options["out"]
        if (out / "config.json").exists():
            raise CommandError(f"{out} already holds a model; choose a new folder")
        if options["epochs"] < 1:
            raise CommandError("--epochs must be at least 1")
        if options["max_examples"] is not None and options["max_examples"] < 1:
            raise CommandError("--max-examples must be at least 1")
        # The deployment's training options (device, batch size, max length, a test's tiny
        # config), then this command's own; checked (TrainConfig's ranges) before any work.
        defaults = dict(getattr(settings, "QAJ_LERC_TRAIN_OPTIONS", {}) or {})
        overrides = {"pretrain_epochs": options["epochs"], "progress_every": 1}
        if options["backbone"]:
            overrides.update(backbone=options["backbone"], backbone_config=None)
        if options["max_length"] is not None:
            overrides["max_length"] = options["max_length"]
        try:
            cfg = TrainConfig.from_dict({**defaults, **overrides})
        except ValueError as exc:
            raise CommandError(f"training options (QAJ_LERC_TRAIN_OPTIONS, then --epochs, "
                               f"--max-length, --backbone): {exc}") from exc
        examples = mc_pretraining_build(projects=projects)[: options["max_examples"]]
        if not examples:
            raise CommandError("the projects have no multiple-choice items with 2+ answers")
        steps_per_epoch = -(-len(examples) // cfg.batch_size)
        bar = tqdm(total=steps_per_epoch * cfg.pretrain_epochs, file=sys.stderr, unit="step",
                   desc="pre-training", disable=options["no_progress"])

        def progress(info: dict) -> None:
            done = (info["epoch"] - 1) * steps_per_epoch + info["step"]
            bar.update(max(done - bar.n, 0))
            bar.set_postfix(loss=round(info["loss"], 3))

        self.stdout.write(f"pre-training on {len(examples)} examples from "
                          f"{', '.join(p.slug for p in projects)} ...")
        try:
            summary = pretrain_backbone(cfg, examples, out, progress=progress)
        finally:
            bar.close()
        self.interrupted_note = f"pre-training finished and {out} is written whole"
        accuracy = summary["pretrain_train_accuracy"]
        self.stdout.write(
            f"wrote {out}: {summary['pretrain_examples']} examples, {cfg.pretrain_epochs} "
            f"epoch(s), last-epoch accuracy {accuracy if accuracy is None else round(accuracy, 3)} "
            f"(3-way, chance 0.333), {summary['seconds']} s\n"
            f"train from it: manage.py train_lerc --project SLUG --backbone {out}")
