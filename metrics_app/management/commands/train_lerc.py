"""Train a LERC model version on a project's judgments.

    python manage.py train_lerc --project mocha [--project other] [--holdout narrativeqa]
        [--backbone /models/bert-base-uncased] [--epochs 3] [--lr 2e-5] [--tune-lr]
        [--max-examples 2000] [--pretrain-project onestopqa --pretrain-epochs 1]
        [--distill-judge gpt-judge@v1] [--sync]

Without --sync the version is queued for a GPU worker (queue `gpu`) and its number printed;
with --sync it trains in this process and prints the metrics and the promotion decision.
"""
from __future__ import annotations

import json

from django.core.management.base import CommandError

from annotation.models import Project, TaskKind
from core.json_limits import json_dumps_strict
from core.output_files import InterruptibleCommand
from metrics_app.management.projects import projects_by_slug
from metrics_app.models import ModelKind, ModelStatus, ModelVersion
from metrics_app.services.lerc import (
    LercError,
    model_version_create,
    model_version_enqueue,
    model_version_summary,
    model_version_train_here,
)


class Command(InterruptibleCommand):
    help = "Queue (or with --sync run) LERC training on projects' judgments."
    interrupted_note = "no model version was created"

    def add_arguments(self, parser):
        parser.add_argument("--project", action="append", required=True,
                            help="Project slug; repeat to train on several projects.")
        parser.add_argument("--holdout", default="",
                            help="Dataset held out as the test set (out-of-dataset setting).")
        parser.add_argument("--backbone", default="",
                            help="Local Hugging Face model folder (default: packaged MiniLM).")
        parser.add_argument("--epochs", type=int)
        parser.add_argument("--lr", type=float, help="Learning rate (paper: 1e-5, 2e-5, 3e-5).")
        parser.add_argument("--tune-lr", action="store_true",
                            help="Try 1e-5, 2e-5 and 3e-5; keep the best on validation.")
        parser.add_argument("--batch-size", type=int)
        parser.add_argument("--max-length", type=int)
        parser.add_argument("--max-examples", type=int,
                            help="Cap the training examples (a seeded random subset).")
        parser.add_argument("--max-val-examples", type=int,
                            help="Cap the validation examples (epoch choice, calibration, "
                                 "promotion); default from QAJ_LERC_TRAIN_OPTIONS.")
        parser.add_argument("--max-test-examples", type=int,
                            help="Cap the test examples that are reported.")
        parser.add_argument("--split", choices=["auto", "item", "group"], default="auto",
                            help="Splits from the items' split field, or by passage groups.")
        parser.add_argument("--znormalize", action="store_true",
                            help="Z-normalize each annotator's scores before averaging.")
        parser.add_argument("--options", default="{}",
                            help="JSON of further TrainConfig fields.")
        parser.add_argument("--pretrain-project", action="append", default=[],
                            help="Multiple-choice project for 3-way pre-training (repeatable).")
        parser.add_argument("--pretrain-epochs", type=int)
        parser.add_argument("--distill-judge", default="",
                            help="A judge you trust (NAME, NAME@VERSION or metric:NAME): its "
                                 "verdicts on the items no human judged join the calibrated "
                                 "judge's fit, weighed below human judgments (docs/LERC.md).")
        parser.add_argument("--sync", action="store_true", help="Train here and now.")

    def handle(self, *args, **options):
        projects = projects_by_slug(options["project"])
        kinds = {p.kind for p in projects}
        if len(kinds) != 1 or kinds - {TaskKind.LIKERT, TaskKind.AB}:
            raise CommandError("train on Likert projects (LERC) or on A/B projects (pairwise), "
                               "not a mix and not multiple-choice projects")
        kind = ModelKind.PAIRWISE if kinds == {TaskKind.AB} else ModelKind.REGRESSION
        train_options = self._train_options(options)
        pretrain = list(Project.objects.filter(slug__in=options["pretrain_project"]))
        if len(pretrain) != len(set(options["pretrain_project"])):
            raise CommandError("unknown --pretrain-project slug")
        if options["tune_lr"]:
            train_options["tune_learning_rate"] = True
        try:
            version = model_version_create(
                projects=projects, kind=kind, backbone=options["backbone"],
                train_options=train_options, holdout_dataset=options["holdout"],
                split_mode=options["split"], znormalize=options["znormalize"],
                pretrain_projects=pretrain, distill_judge=options["distill_judge"],
                reason="train_lerc command",
            )
        except LercError as exc:
            raise CommandError(str(exc)) from exc
        label = f"{version.name} v{version.number}"
        if not options["sync"]:
            self.interrupted_note = (f"{label} is created and queued for a GPU worker (cancel "
                                     "it on the models page if it should not train)")
            task_id = model_version_enqueue(model_version=version)
            version.refresh_from_db(fields=["task_id"])
            if not version.task_id:
                self.stdout.write(f"queued {label}; the broker is unreachable: the scheduled "
                                  "refresh sends it once it is back")
                return
            self.stdout.write(f"queued {label} (task {task_id}) on the gpu queue")
            return
        self.stdout.write(f"training {label} here ...")
        try:
            version = model_version_train_here(model_version=version)
        except KeyboardInterrupt:
            self.interrupted_note = _stopped_note(version, label)
            raise
        except Exception as exc:
            raise CommandError(f"{label} failed: {exc}") from exc
        self.stdout.write(f"{label}: {version.status}")
        self.stdout.write(json_dumps_strict(model_version_summary(version), indent=2, default=str))

    @staticmethod
    def _train_options(options: dict) -> dict:
        """--options (JSON) overridden by the individual flags."""
        try:
            train_options = json.loads(options["options"])
        except json.JSONDecodeError as exc:
            raise CommandError(f"--options is not JSON: {exc}") from exc
        if not isinstance(train_options, dict):
            raise CommandError("--options: a JSON object of TrainConfig fields, e.g. "
                               f"'{{\"epochs\": 2}}', not {type(train_options).__name__} "
                               f"{options['options']}")
        for flag, field in (("epochs", "epochs"), ("lr", "learning_rate"),
                            ("batch_size", "batch_size"), ("max_length", "max_length"),
                            ("max_examples", "max_train_examples"),
                            ("max_val_examples", "max_val_examples"),
                            ("max_test_examples", "max_test_examples"),
                            ("pretrain_epochs", "pretrain_epochs")):
            if options[flag] is not None:
                train_options[field] = options[flag]
        return train_options


def _stopped_note(version, label: str) -> str:
    """What a Ctrl-C of `--sync` left: the version failed (`model_version_train_here` fails
    one it had not finished), or finished before the stop."""
    version.refresh_from_db(fields=["status"])
    if version.status == ModelStatus.FAILED:
        return (f"{label} is marked failed (stopped by Ctrl-C) and nothing was promoted; run "
                "the command again to train a new version")
    if version.status in ModelVersion.lease_states.in_flight:
        return f"{label} is left {version.status}"
    return f"{label} had finished before the stop: it is {version.status}"
