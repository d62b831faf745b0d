"""Ctrl-C during `train_lerc --sync` and `pretrain_lerc`: one line saying what the stop left,
exit status 1, and that state: a failed version (never one left `training` for the lease
sweep to resume on a GPU worker), no half-written backbone folder."""
from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

import metrics_app.lerc.training as lerc_training
from annotation.models import TaskKind
from core import leases
from metrics_app.models import ModelStatus, ModelVersion
from metrics_app.services.job_leases import stale_jobs_recover_all
from metrics_app.services.lerc.training import STOPPED_HERE
from testing.factories import make_item, make_project
from tests.support.lerc import likert_project_from_toy

pytestmark = [pytest.mark.django_db, pytest.mark.reliability]


def _stop_in_epoch_two(monkeypatch):
    """The training loop gets a Ctrl-C in its second epoch, as a researcher at the terminal."""
    real_train = lerc_training.train

    def train(cfg, *args, progress=None, **kwargs):
        def progress_then_ctrl_c(info):
            if progress is not None:
                progress(info)
            if info.get("epoch") == 2:
                raise KeyboardInterrupt

        return real_train(cfg, *args, progress=progress_then_ctrl_c, **kwargs)

    monkeypatch.setattr(lerc_training, "train", train)


def test_train_lerc_sync_stopped_fails_its_version_and_no_worker_resumes_it(
        lerc_settings, monkeypatch):
    """Before: the version stayed `training` (the Ctrl-C is no Exception), read as training
    until the lease sweep took it, and the sweep sent it to a GPU worker to resume."""
    project, _ = likert_project_from_toy(6)
    _stop_in_epoch_two(monkeypatch)
    with pytest.raises(CommandError, match=r"^interrupted \(Ctrl-C\): lerc v\d+ is marked "
                                           r"failed \(stopped by Ctrl-C\) and nothing was "
                                           r"promoted; run the command again") as stopped:
        call_command("train_lerc", "--project", project.slug, "--sync", "--epochs", "3")
    assert stopped.value.returncode == 1
    version = ModelVersion.objects.get()
    assert version.status == ModelStatus.FAILED and version.error == STOPPED_HERE
    assert version.finished_at is not None and version.promoted_at is None
    assert version.events.filter(event="failed", detail=STOPPED_HERE).exists()
    ModelVersion.objects.filter(pk=version.pk).update(
        heartbeat_at=timezone.now() - timedelta(hours=1))
    sent = []
    monkeypatch.setattr(leases, "task_send", lambda *a, **kw: sent.append(a))
    assert stale_jobs_recover_all()["retried"] == 0 and sent == []
    assert ModelVersion.objects.get().status == ModelStatus.FAILED


def test_train_lerc_stopped_before_creating_a_version_says_none_was_created(
        lerc_settings, monkeypatch):
    project, _ = likert_project_from_toy(6)

    def ctrl_c(**kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr("metrics_app.management.commands.train_lerc.model_version_create",
                        ctrl_c)
    with pytest.raises(CommandError, match=r"^interrupted \(Ctrl-C\): no model version was "
                                           r"created$"):
        call_command("train_lerc", "--project", project.slug, "--sync")
    assert not ModelVersion.objects.exists()


def test_pretrain_lerc_stopped_writes_nothing_even_while_saving(lerc_settings, tmp_path,
                                                                monkeypatch):
    """Stopped while the folder is saved (the encoder written, not the tokenizer): before, the
    folder kept a config.json without its tokenizer, and the next run refused it as a
    model already there."""
    mc_project = make_project(kind=TaskKind.MC)
    for _ in range(2):
        make_item(mc_project)
    out = tmp_path / "minilm-mc"

    def tokenizer_save_stopped(self, *args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr("transformers.PreTrainedTokenizerBase.save_pretrained",
                        tokenizer_save_stopped)
    with pytest.raises(CommandError, match=r"^interrupted \(Ctrl-C\): nothing written \(--out "
                                           r"is written only once pre-training ends\)"):
        call_command("pretrain_lerc", "--project", mc_project.slug, "--out", str(out),
                     "--max-examples", "6", "--no-progress")
    assert not out.exists()
    assert list(tmp_path.iterdir()) == []  # no hidden part folder left either
    monkeypatch.undo()
    call_command("pretrain_lerc", "--project", mc_project.slug, "--out", str(out),
                 "--max-examples", "6", "--no-progress")
    assert (out / "config.json").is_file() and (out / "pretrain.json").is_file()
