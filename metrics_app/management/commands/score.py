"""Score a JSONL file with registered metrics, no project needed.

    python manage.py score --metric f1,bleu1,meteor --input in.jsonl --output out.jsonl

Each input line: {"id", "passage" (optional), "question", "references": [..], "candidate"}.
Each output line: {"id", <metric>: value, ...} in input order (null where a metric could not
score the line). Ids must be unique. A metric that cannot run here (LERC without a promoted
model, METEOR without Java) fails the command unless --allow-missing. A progress bar goes to
stderr.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from django.core.management.base import CommandError

from annotation.importers.base import ImportFormatError, json_lines_not_array, read_text
from core.json_limits import json_dumps_strict, json_loads_limited, refuse_duplicate_keys
from core.output_files import InterruptibleCommand, OutputPathError, output_file
from metrics_app.domain.score_input import ScoreInputError, check_score_row, first_repeated_id
from metrics_app.management.scoring_options import scoring_options_check
from metrics_app.registry import MetricInput, metric_names
from metrics_app.services.scoring import DEFAULT_BATCH_SIZE, score_inputs


def parse_input_line(line: str, number: int) -> MetricInput:
    """One JSONL line → MetricInput; CommandError names the line and field on bad input. The
    line is read by the JSON rule of every door (`core.json_limits.json_loads_limited`: no
    NaN, no lone surrogate, no runaway nesting, a key given twice refused)."""
    try:
        row = json_loads_limited(line, object_pairs_hook=refuse_duplicate_keys)
    except json.JSONDecodeError as exc:
        raise CommandError(f"line {number}: not valid JSON ({exc.msg})") from exc
    except ValueError as exc:
        raise CommandError(f"line {number}: not valid JSON ({exc})") from exc
    try:
        check_score_row(row)  # the same check as POST /api/metrics/score/
    except ScoreInputError as exc:
        raise CommandError(f"line {number}: {exc}") from None
    return MetricInput(id=str(row["id"]), question=row["question"],
                       references=row["references"],
                       candidate=row["candidate"], passage=row.get("passage") or "")


def read_inputs(path: Path) -> tuple[list, list[MetricInput]]:
    """Every line parsed, or a CommandError naming the first bad one. Ids must be unique (the
    output is matched back to the input by id)."""
    ids, inputs, numbers = [], [], []
    try:
        text = read_text(path)  # the importers' reader: a BOM dropped, a bad byte's line named
        json_lines_not_array(text, path=path, what="inputs")  # one array, as json.dump writes
    except ImportFormatError as exc:
        raise CommandError(str(exc)) from None
    # Lines end at real line breaks only: U+2028 and U+0085 are text inside a JSON string.
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        metric_input = parse_input_line(line, number)
        inputs.append(metric_input)
        ids.append(json.loads(line)["id"])
        numbers.append(number)
    repeated = first_repeated_id(i.id for i in inputs)  # the API's rule too
    if repeated is not None:
        at, first = repeated
        raise CommandError(f"line {numbers[at]}: id {inputs[at].id!r} is already used "
                           f"on line {numbers[first]}")
    if not inputs:
        raise CommandError(f"{path}: no input lines")
    return ids, inputs


class Command(InterruptibleCommand):
    help = "Score a JSONL file of candidates with one or more registered metrics."
    interrupted_note = "nothing written (the scores are written once all are computed)"

    def add_arguments(self, parser):
        parser.add_argument("--metric", required=True,
                            help="Metric name(s), comma-separated, e.g. f1,bleu1,meteor.")
        parser.add_argument("--input", required=True, type=Path)
        parser.add_argument("--output", required=True, type=Path)
        parser.add_argument("--model", default=None,
                            help="Model version, passed to metrics that take one (e.g. lerc).")
        parser.add_argument("--batch-size", type=int, default=DEFAULT_BATCH_SIZE)
        parser.add_argument("--no-progress", action="store_true")
        parser.add_argument("--allow-missing", action="store_true",
                            help="Write null for a metric that cannot run here (e.g. LERC "
                                 "without a promoted model) instead of failing.")

    def handle(self, *args, **options):
        from tqdm import tqdm

        names = [n.strip() for n in options["metric"].split(",") if n.strip()]
        known = metric_names()
        unknown = [n for n in names if n not in known]
        if not names or unknown:
            raise CommandError(
                f"unknown metric(s): {', '.join(unknown) or '(none given)'}; "
                f"known metrics: {', '.join(known)}"
            )
        scoring_options_check(metric_names=names, model=options["model"],
                              batch_size=options["batch_size"])
        if not options["input"].is_file():
            raise CommandError(f"input file {options['input']} does not exist")
        ids, inputs = read_inputs(options["input"])
        try:  # a bad --output is said before the scoring, not after it
            output = output_file(options["output"], inputs=(options["input"],),
                                 make_folder=True)  # made once the scores are in
        except OutputPathError as error:
            raise CommandError(f"--output {error}") from None
        bar = tqdm(total=len(inputs) * len(names), file=sys.stderr, unit="score",
                   disable=options["no_progress"], desc="scoring")
        try:
            runs = score_inputs(metric_names=names, inputs=inputs, model=options["model"],
                                batch_size=options["batch_size"], progress=bar.update)
        finally:
            bar.close()
        missing = [f"{run.name}: {run.error}" for run in runs.values() if run.error]
        if missing and not options["allow_missing"]:
            raise CommandError("nothing written; not computed: " + "; ".join(missing)
                               + " (--allow-missing writes null for them)")
        for message in missing:
            self.stderr.write(f"warning: not computed: {message}")
        with output as out:
            for index, row_id in enumerate(ids):
                row = {"id": row_id}
                for name in names:
                    row[name] = runs[name].values[index]
                out.write(json_dumps_strict(row, ensure_ascii=False) + "\n")
        self.stderr.write(f"wrote {len(ids)} lines to {options['output']}")
