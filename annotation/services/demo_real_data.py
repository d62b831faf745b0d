"""Real published judgments for the demo, so a researcher deciding whether to adopt QA Judge
sees agreement, the paper reproductions and metric correlations on the first start instead of
empty tables. Read in place from the shared data folder (never copied into the project):

- the long-form QA experts' A/B preferences with justifications (`lfqa_experts/`);
- OneStopQA's STARC items with the in-lab participants' answers (`onestopqa/`);
- a sample of EVOUNA-NQ: every system's answer to the first `EVOUNA_QUESTIONS` questions, with
  the human correct / incorrect judgment (`open_qa_judgments/evouna_nq.json`);
- the MOCHA-format sample printed in the MOCHA paper (`mocha_format_sample/dev.json`).

Each goes through the importers and `import_records` like any researcher's import (atomic,
idempotent: a second start creates nothing). A folder that is missing is skipped and named.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from annotation.importers import importer_for
from annotation.models import Project, TaskKind
from annotation.services.imports import import_records

EVOUNA_QUESTIONS = 400  # about 2,000 judged answers: seconds to import, enough for a report


@dataclass(frozen=True)
class RealDemo:
    slug: str
    title: str
    kind: str
    parts: tuple[tuple[str, str], ...]  # (importer format, path inside the data folder)
    description: str


REAL_DEMOS = (
    RealDemo("demo-lfqa-experts", "Real data: long-form QA expert preferences", TaskKind.AB,
             (("lfqa-experts", "lfqa_experts"),),
             "Expert A/B preferences with justifications on r/explainlikeimfive answers "
             "(Xu et al. 2023); several experts judged the same pairs."),
    RealDemo("demo-onestopqa", "Real data: OneStopQA with in-lab answers", TaskKind.MC,
             (("onestopqa", "onestopqa/onestop_qa.json"),
              ("onestopqa-responses", "onestopqa/in_lab_qa.tsv")),
             "STARC multiple-choice items at three levels with 12 participants' answers "
             "(Berzak et al. 2020)."),
    RealDemo("demo-evouna-nq", "Real data: EVOUNA-NQ sample (open-domain QA judgments)",
             TaskKind.LIKERT, (("evouna", "open_qa_judgments/evouna_nq.json"),),
             f"Five systems' answers to {EVOUNA_QUESTIONS} Natural Questions with human "
             "correct / incorrect judgments (Wang et al. 2023); score the metrics to compare "
             "them with the humans."),
    RealDemo("demo-mocha-sample", "Real data: MOCHA examples", TaskKind.LIKERT,
             (("mocha", "mocha_format_sample/dev.json"),),
             "The MOCHA paper's example judgments (Chen et al. 2020)."),
)


def _evouna_sample(records: list) -> list:
    """Every answer to the first EVOUNA_QUESTIONS questions (all five systems of each)."""
    questions: list[str] = []
    kept = []
    for record in records:
        question = record.content.get("question", "")
        if question not in questions:
            if len(questions) >= EVOUNA_QUESTIONS:
                continue
            questions.append(question)
        kept.append(record)
    return kept


def demo_real_data_load(*, data_dir: Path, owner=None) -> tuple[list[Project], list[str]]:
    """(projects loaded, parts skipped with the reason). Projects are created once, owned by
    `owner` (the demo admin), and imported into idempotently."""
    loaded, skipped = [], []
    for demo in REAL_DEMOS:
        missing = [path for _format, path in demo.parts if not (data_dir / path).exists()]
        if missing:
            skipped.append(f"{demo.slug}: {data_dir / missing[0]} not found")
            continue
        project, _created = Project.objects.get_or_create(
            slug=demo.slug, defaults={"title": demo.title, "kind": demo.kind, "owner": owner,
                                      "instructions": demo.description})
        for format_name, path in demo.parts:
            records = importer_for(format_name).parse(data_dir / path, kind=demo.kind)
            if format_name == "evouna":
                records = _evouna_sample(records)
            # The in-lab answers attach to the dataset's items, whose texts differ in
            # punctuation: keep the items as imported (as the researcher's command does).
            import_records(project=project, records=records, progress=False,
                           keep_existing_items=format_name == "onestopqa-responses",
                           description=f"demo: {path}")
        loaded.append(project)
    return loaded, skipped
