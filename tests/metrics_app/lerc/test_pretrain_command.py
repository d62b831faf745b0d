"""`pretrain_lerc`: MOCHA's multiple-choice pre-training once, as a backbone folder that
`train_lerc --backbone` then starts from; refusals name what is wrong."""
from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command

from annotation.models import TaskKind
from metrics_app.models import ModelStatus, ModelVersion
from testing.factories import make_item, make_project
from tests.support.lerc import likert_project_from_toy

pytestmark = pytest.mark.django_db


def test_pretrained_folder_is_written_and_a_version_trains_from_it(lerc_settings, tmp_path,
                                                                   capsys):
    mc_project = make_project(kind=TaskKind.MC)
    for _ in range(3):
        make_item(mc_project)
    out = tmp_path / "minilm-mc"
    call_command("pretrain_lerc", "--project", mc_project.slug, "--out", str(out),
                 "--max-examples", "10", "--no-progress")
    printed = capsys.readouterr().out
    assert "pre-training on 10 examples" in printed  # 3 items × 7, capped at 10
    assert f"--backbone {out}" in printed
    assert (out / "config.json").is_file() and (out / "pretrain.json").is_file()

    project, _ = likert_project_from_toy(6)
    options = {k: v for k, v in lerc_settings.QAJ_LERC_TRAIN_OPTIONS.items()
               if k != "backbone_config"}
    lerc_settings.QAJ_LERC_TRAIN_OPTIONS = options
    call_command("train_lerc", "--project", project.slug, "--backbone", str(out), "--sync",
                 "--epochs", "1")
    version = ModelVersion.objects.latest("number")
    assert version.backbone == str(out)
    assert version.status in (ModelStatus.PROMOTED, ModelStatus.REJECTED), version.error


def test_refusals_name_the_problem(lerc_settings, tmp_path):
    likert = make_project(kind=TaskKind.LIKERT)
    empty_mc = make_project(kind=TaskKind.MC)
    out = str(tmp_path / "out")
    with pytest.raises(CommandError, match="no project with slug 'nope'"):
        call_command("pretrain_lerc", "--project", "nope", "--out", out)
    with pytest.raises(CommandError, match="not multiple-choice"):
        call_command("pretrain_lerc", "--project", likert.slug, "--out", out)
    with pytest.raises(CommandError, match="no multiple-choice items"):
        call_command("pretrain_lerc", "--project", empty_mc.slug, "--out", out)
    with pytest.raises(CommandError, match="--epochs must be at least 1"):
        call_command("pretrain_lerc", "--project", empty_mc.slug, "--out", out, "--epochs", "0")
    # Refused before any work, naming the option, as train_lerc does (before: --max-length 0
    # was ignored, 8 blamed QAJ_LERC_TRAIN_OPTIONS, --max-examples -5 dropped the last five).
    options = r"^training options \(QAJ_LERC_TRAIN_OPTIONS, then --epochs, --max-length, " \
              r"--backbone\): "
    for flags, message in ((["--max-length", "0"], options + "max_length: "),
                           (["--max-length", "8"], options + "max_length: "),
                           (["--epochs", "5000"], options + "pretrain_epochs: "),
                           (["--max-examples", "-5"], "--max-examples must be at least 1")):
        with pytest.raises(CommandError, match=message):
            call_command("pretrain_lerc", "--project", empty_mc.slug, "--out", out, *flags)
    assert not (tmp_path / "out").exists()
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "config.json").write_text("{}")
    with pytest.raises(CommandError, match="already holds a model"):
        call_command("pretrain_lerc", "--project", empty_mc.slug, "--out",
                     str(tmp_path / "full"))


def test_pretraining_reads_no_excluded_or_practice_item():
    """Multiple-choice pre-training (`pretrain_lerc`, `train_lerc --pretrain-project`) reads
    the items every LERC door reads: an item removed from the study (`Item.excluded`: an
    improper question) is left out as a practice item is. Before: the excluded one was
    trained on (21 examples, not 14)."""
    from metrics_app.services.lerc.datasets import mc_pretraining_build

    mc_project = make_project(kind=TaskKind.MC)
    for _ in range(2):
        make_item(mc_project)
    make_item(mc_project, excluded=True)
    make_item(mc_project, is_practice=True)
    assert len(mc_pretraining_build(projects=[mc_project])) == 14  # 2 items × 7
