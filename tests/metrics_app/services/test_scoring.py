"""Scoring pipeline: cached MetricScores, jobs with progress, queues, the score command."""
from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from annotation.models import TaskKind
from metrics_app.models import MetricScore, ScoringJob, ScoringStatus
from metrics_app.services import scoring
from testing.factories import make_item, make_project

pytestmark = pytest.mark.django_db


def _likert(project, candidate, references, **fields):
    content = {"passage": "", "question": "q?", "references": references, "candidate": candidate}
    return make_item(project, content=content, **fields)


def test_project_scores_are_cached_per_item_metric_version_and_side():
    project = make_project(kind=TaskKind.LIKERT)
    a = _likert(project, "on a mat", ["on the mat"])
    b = _likert(project, "Röntgen", ["Wilhelm Conrad Röntgen", "Röntgen"])
    _likert(project, "practice", ["x"], is_practice=True)
    _likert(project, "excluded", ["x"], excluded=True)
    ticks = []
    summary = scoring.project_score_metrics(project=project, metric_names=["em", "f1", "length"],
                                            batch_size=1, progress=ticks.append)
    assert summary["em"] == {"version": "squad-v1", "scored": 2, "cached": 0, "unscorable": 0,
                             "error": ""}
    assert sum(ticks) == 6 and len(ticks) == 6   # batch of one: a tick per item and metric
    values = {(s.item_id, s.metric): s.value for s in MetricScore.objects.all()}
    assert values == {(a.pk, "em"): 1.0, (a.pk, "f1"): 1.0, (a.pk, "length"): 3.0,
                      (b.pk, "em"): 1.0, (b.pk, "f1"): 1.0, (b.pk, "length"): 1.0}
    again = scoring.project_score_metrics(project=project, metric_names=["em"])
    assert again["em"]["scored"] == 0 and again["em"]["cached"] == 2
    assert MetricScore.objects.count() == 6


def test_ab_items_score_each_answer_as_a_side():
    project = make_project(kind=TaskKind.AB)
    item = make_item(project)
    scoring.project_score_metrics(project=project, metric_names=["length", "f1"])
    rows = {(s.metric, s.side): s.value for s in MetricScore.objects.filter(item=item)}
    assert rows[("length", "A")] == 2.0 and rows[("length", "B")] == 4.0
    # no references on these A/B items: reference-based metrics cannot score them
    assert rows[("f1", "A")] is None and rows[("f1", "B")] is None


def test_jobs_split_by_queue_and_run_with_progress(monkeypatch, django_capture_on_commit_callbacks):
    project = make_project(kind=TaskKind.LIKERT)
    for i in range(3):
        _likert(project, f"answer {i}", [f"answer {i}"])
    sent = []

    def fake_apply_async(args, queue):
        sent.append((args, queue))
        scoring.scoring_job_run(job_id=args[0])   # what the worker would do
        return type("R", (), {"id": f"task-{args[0]}"})()

    from worker.tasks import metrics as metric_tasks

    monkeypatch.setattr(metric_tasks.score_project, "apply_async", fake_apply_async)
    monkeypatch.setattr(scoring, "_is_registered", lambda name: True)
    monkeypatch.setattr(scoring, "project_score_metrics",
                        _fake_scores_for_lerc(scoring.project_score_metrics))
    with django_capture_on_commit_callbacks(execute=True):
        jobs = scoring.scoring_jobs_create(project=project, metric_names=["em", "length", "lerc"])
    assert sorted(job.queue for job in jobs) == ["default", "gpu"]
    assert sorted(q for _, q in sent) == ["default", "gpu"]
    default = ScoringJob.objects.get(queue="default")
    assert default.status == ScoringStatus.DONE
    assert (default.done, default.total, default.percent) == (6, 6, 100)
    assert default.detail["em"]["scored"] == 3 and default.task_id.startswith("task-")
    # the job refreshed the cached report
    from metrics_app.models import Report
    assert Report.objects.filter(project=project, kind="metric_eval").exists()


def _fake_scores_for_lerc(real):
    # LERC is another area's metric; here only the routing matters.
    def wrapper(*, project, metric_names, **kwargs):
        if metric_names == ["lerc"]:
            return {"lerc": {"version": "fake", "scored": 0, "cached": 0, "unscorable": 0,
                             "error": ""}}
        return real(project=project, metric_names=metric_names, **kwargs)
    return wrapper


def test_failed_job_records_the_error(monkeypatch):
    project = make_project(kind=TaskKind.LIKERT)
    job = ScoringJob.objects.create(project=project, metrics=["em"])

    def boom(**kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(scoring, "project_score_metrics", boom)
    with pytest.raises(RuntimeError):
        scoring.scoring_job_run(job_id=job.pk)
    job.refresh_from_db()
    assert job.status == ScoringStatus.FAILED and "disk full" in job.error


def test_unknown_metric_is_refused():
    project = make_project(kind=TaskKind.LIKERT)
    with pytest.raises(ValueError, match="nope"):
        scoring.scoring_jobs_create(project=project, metric_names=["em", "nope"])


# --- the score command ----------------------------------------------------------------------


def test_score_command_end_to_end(tmp_path):
    rows = [
        {"id": "a", "question": "Where?", "references": ["on the mat."], "candidate": "on a mat"},
        {"id": 2, "passage": "Röntgen found X-rays.", "question": "Who?",
         "references": ["Wilhelm Conrad Röntgen", "Röntgen"], "candidate": "Wilhelm Röntgen"},
        {"id": "empty", "question": "q", "references": ["x"], "candidate": ""},
    ]
    source = tmp_path / "in.jsonl"
    source.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n\n",
                      encoding="utf-8")
    target = tmp_path / "out" / "scores.jsonl"
    err = StringIO()
    call_command("score", "--metric", "em,f1,bleu1,rougeL,length", "--input", str(source),
                 "--output", str(target), "--model", "v1", stderr=err)
    out = [json.loads(line) for line in target.read_text(encoding="utf-8").splitlines()]
    assert [r["id"] for r in out] == ["a", 2, "empty"]
    assert set(out[0]) == {"id", "em", "f1", "bleu1", "rougeL", "length"}
    assert out[0]["em"] == 1.0 and out[0]["rougeL"] == pytest.approx(2 / 3)
    assert out[1]["f1"] == pytest.approx(0.8) and out[1]["length"] == 2.0
    assert out[2] == {"id": "empty", "em": 0.0, "f1": 0.0, "bleu1": 0.0, "rougeL": 0.0,
                      "length": 0.0}
    assert "wrote 3 lines" in err.getvalue()


@pytest.mark.parametrize("line,message", [
    ('{"id": 1, "question": "q", "candidate": "c"}', "line 2: missing field 'references'"),
    ('{"id": 1, "question": "q", "references": "x", "candidate": 5}',
     "line 2: field 'candidate' must be a string"),
    ('{"id": 1, "question": "q", "references": [1], "candidate": "c"}',
     "line 2: field 'references' must be a list of strings"),
    ("{not json", "line 2: not valid JSON"),
    ('{"id": 1, "question": "q", "references": "x", "candidate": "c"}',
     "line 2: field 'references' must be a list of strings, not one string"),
    ('{"id": 1, "question": "q", "references": [""], "candidate": "c"}',
     "line 2: field 'references' needs at least one reference and no empty ones"),
    ('{"id": 1, "question": "q", "references": [], "candidate": "c"}',
     "line 2: field 'references' needs at least one reference"),
    ('{"id": 0, "question": "q", "references": ["r"], "candidate": "c2"}',
     "line 2: id '0' is already used on line 1"),
])
def test_score_command_names_the_bad_line_and_field(tmp_path, line, message):
    source = tmp_path / "in.jsonl"
    good = '{"id": 0, "question": "q", "references": ["r"], "candidate": "c"}'
    source.write_text(good + "\n" + line + "\n", encoding="utf-8")
    with pytest.raises(CommandError, match=message.replace("(", r"\(")):
        call_command("score", "--metric", "f1", "--input", str(source),
                     "--output", str(tmp_path / "o.jsonl"), "--no-progress")


@pytest.mark.reliability
@pytest.mark.parametrize("raw,message", [
    (b'{"id": 0, "id": 1, "question": "q", "references": ["r"], "candidate": "c"}',
     "line 1: .*id"),
    (b'{"id": 0, "question": "q", "references": ["r"], "candidate": "\\ud800"}',
     "line 1: .*surrogate"),
    (b'{"id": 0, "question": "q", "references": ["r"], "candidate": "caf\xe9"}',
     "line 1, byte 66 of the line is 0xE9"),
    (('{"a": ' * 3000 + "1" + "}" * 3000).encode(), "line 1: .*deep"),
    # json.dump(rows, f, indent=2): one JSON array, said so (was "line 1: ... '['").
    (b'[\n {"id": 0, "question": "q", "references": ["r"], "candidate": "c"}\n]',
     "holds one JSON array of 1 value\\(s\\), not one JSON object per line"),
])
def test_score_command_reads_its_file_by_the_json_rule_of_every_door(tmp_path, raw, message):
    """A key given twice, a lone surrogate, a Latin-1 byte and runaway nesting are refused
    naming the line (before: the last id kept, the surrogate scored, the byte's offset counted
    from the start of the file, a RecursionError traceback)."""
    source = tmp_path / "in.jsonl"
    source.write_bytes(raw + b"\n")
    with pytest.raises(CommandError, match=message):
        call_command("score", "--metric", "f1", "--input", str(source),
                     "--output", str(tmp_path / "o.jsonl"), "--no-progress")


def test_score_command_reads_a_bom_and_unicode_line_separators_inside_strings(tmp_path):
    source, target = tmp_path / "in.jsonl", tmp_path / "o.jsonl"
    source.write_bytes("\ufeff".encode() + '{"id": "a", "question": "q", "references": ["on the'
                       ' mat"], "candidate": "on the\u2028mat"}\n'.encode())
    call_command("score", "--metric", "f1", "--input", str(source), "--output", str(target),
                 "--no-progress")
    assert json.loads(target.read_text(encoding="utf-8")) == {"id": "a", "f1": 1.0}


def test_score_command_fails_when_a_metric_cannot_run_unless_told_to_write_nulls(tmp_path):
    """LERC with no promoted model: nothing written and a non-zero exit, not a file of nulls."""
    source, target = tmp_path / "in.jsonl", tmp_path / "o.jsonl"
    source.write_text('{"id": 0, "question": "q", "references": ["r"], "candidate": "r"}\n',
                      encoding="utf-8")
    with pytest.raises(CommandError, match="nothing written; not computed: lerc: "):
        call_command("score", "--metric", "f1,lerc", "--input", str(source),
                     "--output", str(target), "--no-progress")
    assert not target.exists()
    err = StringIO()
    call_command("score", "--metric", "f1,lerc", "--input", str(source), "--output",
                 str(target), "--no-progress", "--allow-missing", stderr=err)
    assert json.loads(target.read_text()) == {"id": 0, "f1": 1.0, "lerc": None}
    assert "warning: not computed: lerc" in err.getvalue()


@pytest.mark.reliability
@pytest.mark.parametrize("command", ["score", "score_project"])
@pytest.mark.parametrize("batch_size", ["0", "-1"])
def test_both_score_commands_refuse_a_batch_size_below_one_alike(tmp_path, command, batch_size):
    """Before: `score --batch-size 0` ended in "range() arg 3 must not be zero" (-1 wrote
    nothing and said it wrote every line); `score_project` already refused it this way."""
    project = make_project(kind=TaskKind.LIKERT)
    _likert(project, "on a mat", ["on the mat"])
    source, target = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    source.write_text('{"id": 0, "question": "q", "references": ["r"], "candidate": "r"}\n',
                      encoding="utf-8")
    where = (["--input", str(source), "--output", str(target)] if command == "score"
             else [project.slug])
    with pytest.raises(CommandError, match="^--batch-size must be at least 1$"):
        call_command(command, *where, "--metric", "f1", "--batch-size", batch_size,
                     "--no-progress")
    assert not target.exists() and not MetricScore.objects.exists()
    with pytest.raises(ValueError, match="batch size must be a whole number of at least 1"):
        scoring.score_inputs(metric_names=["f1"], inputs=[], batch_size=0)


def test_score_command_refuses_unknown_metrics(tmp_path):
    with pytest.raises(CommandError, match="unknown metric.*bogus.*known metrics"):
        call_command("score", "--metric", "f1,bogus", "--input", str(tmp_path / "x"),
                     "--output", str(tmp_path / "o"))


def test_celery_task_runs_the_job_by_id():
    from worker.tasks.metrics import score_project

    project = make_project(kind=TaskKind.LIKERT)
    _likert(project, "on a mat", ["on the mat"])
    job = ScoringJob.objects.create(project=project, metrics=["f1", "length"])
    assert score_project.name == "metrics.score_project"
    score_project.apply(args=[job.pk]).get()   # in-process, as a worker would run it
    job.refresh_from_db()
    assert job.status == ScoringStatus.DONE and job.done == job.total == 2
    assert MetricScore.objects.filter(item__project=project).count() == 2


class _SlowStarter:
    """A metric whose start-up can run in the background (as METEOR's JVM does)."""

    name = "slow_starter"
    version = "1"
    events: list = []

    def prepare(self):
        self.events.append("prepare")

    def score_batch(self, inputs):
        self.events.append("score")
        return [1.0] * len(inputs)

    def close(self):
        self.events.append("close")


@pytest.mark.parametrize("how", ["inputs", "project"])
def test_a_run_starts_slow_metrics_before_the_first_metric_and_closes_them(monkeypatch, how):
    from metrics_app import registry
    from metrics_app.registry import MetricInput

    registry._load_builtin_metrics()
    monkeypatch.setitem(registry._REGISTRY, "slow_starter",
                        registry._Entry(factory=_SlowStarter, description="test"))
    events = _SlowStarter.events = []
    f1_scored = scoring.get_metric("f1").score_batch
    monkeypatch.setattr(scoring.get_metric("f1"), "score_batch",
                        lambda batch: events.append("f1") or f1_scored(batch))
    if how == "inputs":
        runs = scoring.score_inputs(
            metric_names=["f1", "slow_starter"],
            inputs=[MetricInput(id="1", question="q", references=["a b"], candidate="a b")])
        assert runs["slow_starter"].values == [1.0] and runs["f1"].values == [1.0]
    else:
        project = make_project(kind=TaskKind.LIKERT)
        _likert(project, "a b", ["a b"])
        summary = scoring.project_score_metrics(project=project,
                                                metric_names=["f1", "slow_starter"])
        assert summary["slow_starter"]["scored"] == 1
    assert events[:2] == ["prepare", "f1"] and "score" in events and events[-1] == "close"


def test_reading_the_inputs_takes_the_same_few_queries_for_any_number_of_items(
        django_assert_max_num_queries):
    """`score_project` on EVOUNA-TQ spent half its 22 s loading a deferred project_id once
    per item (the related manager checks each row's project): 10,000 queries for 10,000
    items. The inputs of 60 items are now read in a fixed handful of queries."""
    project = make_project(TaskKind.LIKERT)
    for n in range(60):
        _likert(project, f"answer {n}", ["ref"])
    with django_assert_max_num_queries(3):
        rows = scoring.project_metric_inputs(project=project)
    assert len(rows) == 60
