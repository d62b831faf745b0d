"""Real files as they reach researchers: re-saved by Excel or Notepad (byte-order mark), in
another encoding, cut off, or with an entry given twice. Each is imported exactly or refused
naming where, with nothing written."""
from __future__ import annotations

import csv
import io
import json

import pytest

from annotation.models import Item, Judgment
from tests.support.imports import LIKERT_ROW, db_state, import_fails, run_import

pytestmark = pytest.mark.django_db

BOM = b"\xef\xbb\xbf"


def _write(path, data: bytes):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def _tsv_with_item_id_first(text: str) -> str:
    csv.field_size_limit(10**8)
    rows = [row for row in csv.reader(io.StringIO(text, newline=""), delimiter="\t") if row]
    first = rows[0].index("item_id")
    order = [first] + [i for i in range(len(rows[0])) if i != first]
    out = io.StringIO()
    writer = csv.writer(out, delimiter="\t", lineterminator="\n")
    for row in rows:
        writer.writerow([row[i] for i in order])
    return out.getvalue()


def test_a_mocha_id_given_twice_in_a_dataset_is_refused_not_silently_dropped(shared_data,
                                                                                  tmp_path):
    text = (shared_data / "mocha_format_sample" / "dev.json").read_text(encoding="utf-8")
    document = json.loads(text)
    dataset = next(iter(document))
    entry_id = next(iter(document[dataset]))
    changed = dict(document[dataset][entry_id], candidate="a different candidate")
    # The same id twice in one dataset object: json.loads would keep only the second entry.
    doubled = text.replace(f'"{entry_id}":', f'"{entry_id}": {json.dumps(changed)}, '
                                             f'"{entry_id}":', 1)
    path = _write(tmp_path / "dev.json", doubled.encode("utf-8"))
    message = import_fails("mocha", str(path), "--project", "m", "--create",
                           match="appears twice")
    assert repr(entry_id) in message


def test_a_jsonl_line_naming_a_field_twice_is_refused_with_its_line(tmp_path):
    first = json.dumps(LIKERT_ROW)
    doubled = first[:-1] + ', "external_id": "another-id"}'
    path = _write(tmp_path / "items.jsonl", (first.replace('"q1-c1"', '"q0"') + "\n" + doubled
                                             + "\n").encode("utf-8"))
    message = import_fails("jsonl", str(path), "--project", "j", "--create", "--kind", "likert",
                           match="'external_id' appears twice")
    assert "line 2" in message


@pytest.mark.parametrize(("fmt", "relative", "name", "items", "judgments"), [
    ("mocha", "mocha_format_sample/dev.json", "dev.json", 9, 9),
    ("lfqa-experts", "lfqa_experts/Biology_8_Common20.json", "Biology_8_Common20.json", 20, 20),
])
def test_a_byte_order_mark_is_dropped_and_the_file_imports_in_full(shared_data, tmp_path, fmt,
                                                                  relative, name, items,
                                                                  judgments):
    data = (shared_data / relative).read_bytes()
    path = _write(tmp_path / name, BOM + data)
    run_import(fmt, str(path), "--project", "bom", "--create")
    assert Item.objects.filter(project__slug="bom").count() == items
    assert Judgment.objects.filter(item__project__slug="bom").count() == judgments


def test_a_byte_order_mark_before_the_tsv_header_keeps_the_first_column(shared_data, tmp_path):
    # Excel's "Unicode text" export starts with a BOM; with item_id as the first column the BOM
    # used to make it "\ufeffitem_id" and the import said the column was missing.
    text = (shared_data / "onestopqa" / "in_lab_qa.tsv").read_text(encoding="utf-8")
    path = _write(tmp_path / "in_lab_qa.tsv", BOM + _tsv_with_item_id_first(text).encode())
    run_import("onestopqa-responses", str(path), "--project", "tsv", "--create")
    assert Item.objects.filter(project__slug="tsv").count() == 430
    assert Judgment.objects.filter(item__project__slug="tsv").count() == 430


def test_excels_unicode_text_utf16_tsv_imports_in_full(shared_data, tmp_path):
    # Excel's "Unicode Text" (and Notepad's "Unicode") is UTF-16 LE with its byte-order mark and
    # CRLF line ends; it was refused as "not UTF-8", although the docs promise it imports.
    text = (shared_data / "onestopqa" / "in_lab_qa.tsv").read_text(encoding="utf-8")
    crlf = text.replace("\r\n", "\n").replace("\n", "\r\n")
    path = _write(tmp_path / "in_lab_qa.tsv", crlf.encode("utf-16"))  # BOM + UTF-16 LE
    run_import("onestopqa-responses", str(path), "--project", "tsv", "--create")
    assert Item.objects.filter(project__slug="tsv").count() == 430
    assert Judgment.objects.filter(item__project__slug="tsv").count() == 430


@pytest.mark.parametrize("encoding", ["utf-16-le", "utf-16-be"])
def test_a_utf16_jsonl_with_its_byte_order_mark_imports(tmp_path, encoding):
    body = "\ufeff" + json.dumps(LIKERT_ROW, ensure_ascii=False) + "\r\n"
    path = _write(tmp_path / "items.jsonl", body.encode(encoding))
    run_import("jsonl", str(path), "--project", "j", "--create", "--kind", "likert")
    assert Item.objects.get(project__slug="j").external_id == "q1-c1"


def test_utf16_without_its_mark_or_cut_off_is_refused_and_nothing_stored(tmp_path):
    body = json.dumps(LIKERT_ROW) + "\n"
    before = db_state()
    no_mark = _write(tmp_path / "a.jsonl", body.encode("utf-16-le"))
    # Without the mark nothing says it is UTF-16 (its ASCII is valid UTF-8 with NULs): refused.
    import_fails("jsonl", str(no_mark), "--project", "j", "--create", "--kind", "likert",
                 match="malformed JSON")
    cut = _write(tmp_path / "b.jsonl", body.encode("utf-16")[:-1])
    import_fails("jsonl", str(cut), "--project", "j", "--create", "--kind", "likert",
                 match="not UTF-16 text")
    assert db_state() == before


def test_a_bom_jsonl_imports_its_first_line(tmp_path):
    path = _write(tmp_path / "items.jsonl", BOM + (json.dumps(LIKERT_ROW) + "\n").encode())
    run_import("jsonl", str(path), "--project", "j", "--create", "--kind", "likert")
    assert Item.objects.get(project__slug="j").external_id == "q1-c1"


def test_latin1_bytes_deep_in_a_jsonl_file_are_refused_naming_their_line(tmp_path):
    rows = []
    for number in range(3000):
        row = json.loads(json.dumps(LIKERT_ROW))
        row["external_id"] = f"q{number}"
        if number == 2500:
            row["content"]["question"] = "Where did the caf\u00e9 cat sit?"
        rows.append(json.dumps(row, ensure_ascii=False))
    path = _write(tmp_path / "items.jsonl", ("\n".join(rows) + "\n").encode("latin-1"))
    message = import_fails("jsonl", str(path), "--project", "j", "--create", "--kind",
                           "likert", match="not UTF-8 text")
    assert "line 2501" in message and "0xE9" in message


def test_windows_1252_bytes_in_the_tsv_are_refused_naming_their_line(shared_data, tmp_path):
    lines = (shared_data / "onestopqa" / "in_lab_qa.tsv").read_text(encoding="utf-8").split("\n")
    lines[300] = lines[300].replace(" the ", " th\u00e9 ", 1)
    path = _write(tmp_path / "in_lab_qa.tsv", "\n".join(lines).encode("cp1252", "replace"))
    message = import_fails("onestopqa-responses", str(path), "--project", "t", "--create",
                           match="not UTF-8 text")
    assert "line 301" in message


def test_a_truncated_tsv_row_is_named_as_such(shared_data, tmp_path):
    lines = (shared_data / "onestopqa" / "in_lab_qa.tsv").read_text(encoding="utf-8").split("\n")
    lines[5] = "\t".join(lines[5].split("\t")[:5])
    path = _write(tmp_path / "in_lab_qa.tsv", "\n".join(lines).encode())
    before = db_state()
    message = import_fails("onestopqa-responses", str(path), "--project", "t", "--create",
                           match="fewer fields than the header")
    assert "row 6" in message and db_state() == before


def _tsv_rows(shared_data) -> list[list[str]]:
    text = (shared_data / "onestopqa" / "in_lab_qa.tsv").read_text(encoding="utf-8")
    csv.field_size_limit(10**8)
    return [row for row in csv.reader(io.StringIO(text, newline=""), delimiter="\t") if row]


def _tsv_bytes(rows: list[list[str]]) -> bytes:
    out = io.StringIO()
    csv.writer(out, delimiter="\t", lineterminator="\n").writerows(rows)
    return out.getvalue().encode("utf-8")


def test_another_participants_trial_of_an_item_adds_a_judgment(shared_data, tmp_path):
    rows = _tsv_rows(shared_data)
    header = rows[0]
    again = list(rows[1])
    again[header.index("submission_ind")] = "99"
    again[header.index("answer_response")] = "2"
    path = _write(tmp_path / "in_lab_qa.tsv", _tsv_bytes([*rows, again]))
    run_import("onestopqa-responses", str(path), "--project", "t", "--create")
    item = Item.objects.get(project__slug="t", external_id=rows[1][header.index("item_id")])
    assert Item.objects.filter(project__slug="t").count() == 430
    assert Judgment.objects.filter(item__project__slug="t").count() == 431
    assert sorted(item.judgments.values_list("worker__external_id", "choice")) == sorted(
        [(f"inlab-{rows[1][header.index('submission_ind')]}",
          "ABCD"[int(rows[1][header.index("answer_response")])]), ("inlab-99", "C")])


def test_rows_of_one_item_that_disagree_on_it_are_refused(shared_data, tmp_path):
    rows = _tsv_rows(shared_data)
    header = rows[0]
    again = list(rows[1])
    again[header.index("submission_ind")] = "99"
    again[header.index("question")] = "A question the first row does not ask?"
    path = _write(tmp_path / "in_lab_qa.tsv", _tsv_bytes([*rows, again]))
    message = import_fails("onestopqa-responses", str(path), "--project", "t", "--create",
                           match="repeats the item of row 2 with different content")
    assert f"row {len(rows) + 1}" in message


def test_one_participant_answering_an_item_twice_is_refused(shared_data, tmp_path):
    rows = _tsv_rows(shared_data)
    path = _write(tmp_path / "in_lab_qa.tsv", _tsv_bytes([*rows, rows[1]]))
    import_fails("onestopqa-responses", str(path), "--project", "t", "--create",
                 match="judges this item twice")


def test_mocha_entry_fields_beyond_the_layout_are_kept_not_dropped(shared_data, tmp_path):
    document = json.loads((shared_data / "mocha_format_sample" / "dev.json").read_text())
    dataset = next(iter(document))
    entry_id = next(iter(document[dataset]))
    document[dataset][entry_id]["candidate_id"] = "c-17"
    document[dataset][entry_id]["notes"] = {"checked_by": "ann"}
    path = _write(tmp_path / "dev.json", json.dumps(document).encode())
    run_import("mocha", str(path), "--project", "m", "--create")
    item = Item.objects.get(external_id=f"{dataset}/{entry_id}")
    assert item.metadata["candidate_id"] == "c-17"
    assert item.metadata["notes"] == {"checked_by": "ann"}
    assert Item.objects.count() == sum(len(entries) for entries in document.values())


def test_a_mocha_entry_field_clashing_with_the_item_metadata_is_refused(shared_data, tmp_path):
    document = json.loads((shared_data / "mocha_format_sample" / "dev.json").read_text())
    dataset = next(iter(document))
    entry_id = next(iter(document[dataset]))
    document[dataset][entry_id]["mocha_id"] = "another"
    path = _write(tmp_path / "dev.json", json.dumps(document).encode())
    import_fails("mocha", str(path), "--project", "m", "--create",
                 match=f"record {dataset}/{entry_id}: field 'mocha_id'")


def test_an_evouna_judgment_without_its_answer_is_refused_not_dropped(shared_data, tmp_path):
    document = json.loads((shared_data / "open_qa_judgments" / "evouna_tq.json").read_text())
    document = document[:50]
    judged = next(i for i, q in enumerate(document)
                  if not q["improper"] and isinstance(q["judge_gpt4"], bool))
    del document[judged]["answer_gpt4"]
    path = _write(tmp_path / "evouna_tq.json", json.dumps(document).encode())
    import_fails("evouna", str(path), "--project", "e", "--create",
                 match=f"record {judged}: field 'judge_gpt4': judges an answer")


@pytest.mark.parametrize(("typed", "stored"), [("validation", "dev"), ("Val", "dev"),
                                               ("TEST", "test"), ("heldout", "heldout")])
def test_a_typed_split_is_spelled_as_the_file_name_rule_spells_it(shared_data, tmp_path, typed,
                                                                  stored):
    # validation.json imports as split "dev"; `--split validation` used to store "validation",
    # which per-split redundancy ({"dev": 3}) and the reports never matched.
    run_import("mocha", str(shared_data / "mocha_format_sample" / "dev.json"),
               "--project", "m", "--create", "--split", typed)
    row = dict(LIKERT_ROW, split="")
    path = _write(tmp_path / "items.jsonl", (json.dumps(row) + "\n").encode())
    run_import("jsonl", str(path), "--project", "j", "--create", "--kind", "likert",
               "--split", typed)
    assert set(Item.objects.values_list("split", flat=True)) == {stored}


def test_a_tsv_column_named_twice_is_refused_not_read_from_its_last_cell(shared_data,
                                                                         tmp_path):
    # A spreadsheet edit that pasted a second `answer_response` column (a recoded copy):
    # csv.DictReader kept the last cell, so every judgment took the copy's answer silently.
    rows = _tsv_rows(shared_data)[:6]
    column = rows[0].index("answer_response")
    rows = [rows[0] + ["answer_response"]] + [row + [str((int(row[column]) + 1) % 4)]
                                              for row in rows[1:]]
    path = _write(tmp_path / "in_lab_qa.tsv", _tsv_bytes(rows))
    before = db_state()
    import_fails("onestopqa-responses", str(path), "--project", "t", "--create",
                 match="the header names 'answer_response' twice")
    assert db_state() == before


def test_a_tsv_header_in_another_case_names_the_columns_it_resembles(shared_data, tmp_path):
    rows = _tsv_rows(shared_data)[:3]
    rows[0] = [{"item_id": "ITEM_ID", "RT": "rt"}.get(name, name) for name in rows[0]]
    path = _write(tmp_path / "in_lab_qa.tsv", _tsv_bytes(rows))
    before = db_state()
    import_fails("onestopqa-responses", str(path), "--project", "t", "--create",
                 match="the header has no column\\(s\\) item_id, RT \\(it has 'ITEM_ID' for "
                       "'item_id', 'rt' for 'RT': column names are matched exactly")
    assert db_state() == before


def test_a_tsv_quote_never_closed_is_refused_naming_its_line(shared_data, tmp_path):
    rows = _tsv_rows(shared_data)[:8]
    column = rows[0].index("question")
    text = _tsv_bytes(rows).decode("utf-8").split("\n")
    cells = text[3].split("\t")
    cells[column] = '"' + cells[column]  # a stray opening quote, never closed
    text[3] = "\t".join(cells)
    path = _write(tmp_path / "in_lab_qa.tsv", "\n".join(text).encode("utf-8"))
    before = db_state()
    import_fails("onestopqa-responses", str(path), "--project", "t", "--create",
                 match="malformed TSV: the row starting on line 4 (opens a quoted cell that "
                       "is never closed|has text after the quote that closes a quoted cell)")
    assert db_state() == before


def test_an_expert_file_downloaded_twice_into_the_folder_is_named_by_both_files(shared_data,
                                                                                 tmp_path):
    # A browser saves a second download as "... (1).json": every pair of it got a second
    # judgment by the same expert, refused as "judges this item twice" naming neither file.
    folder = tmp_path / "lfqa"
    originals = sorted((shared_data / "lfqa_experts").glob("Biology_*.json"))[:2]
    for source in originals:
        _write(folder / source.name, source.read_bytes())
    _write(folder / f"{originals[0].stem} (1).json", originals[0].read_bytes())
    before = db_state()
    message = import_fails("lfqa-experts", str(folder), "--project", "l", "--create",
                           match="judged this pair already in")
    assert f"{originals[0].stem} (1).json" in message and f"/{originals[0].name}:" in message
    assert "is one file a copy of the other?" in message and db_state() == before


@pytest.mark.parametrize("indent", [None, 2])
def test_a_json_array_of_items_given_as_jsonl_is_refused_saying_what_it_is(tmp_path, indent):
    # json.dump(items, f, indent=2): its first line "[" was "malformed JSON at column 2".
    path = _write(tmp_path / "items.json",
                  json.dumps([LIKERT_ROW, {**LIKERT_ROW, "external_id": "q2"}],
                             indent=indent).encode("utf-8"))
    before = db_state()
    import_fails("jsonl", str(path), "--project", "j", "--create", "--kind", "likert",
                 match="holds one JSON array of 2 value\\(s\\), not one JSON object per line: "
                       "write the items as JSON Lines")
    assert db_state() == before


def _evouna_subset(shared_data, name: str, count: int = 30) -> list:
    return json.loads((shared_data / "open_qa_judgments" / name).read_text(
        encoding="utf-8"))[:count]


def test_a_file_imported_again_under_another_name_is_refused_not_doubled(shared_data,
                                                                         tmp_path):
    # EVOUNA's dataset (and so every external id) comes from the file's name: a second
    # download "evouna_nq (1).json" gave the same answers new ids and doubled the project.
    questions = _evouna_subset(shared_data, "evouna_nq.json")
    body = json.dumps(questions).encode("utf-8")
    first = _write(tmp_path / "evouna_nq.json", body)
    run_import("evouna", str(first), "--project", "ev", "--create")
    before = db_state()
    copy = _write(tmp_path / "copy" / "evouna_nq (1).json", body)
    message = import_fails("evouna", str(copy), "--project", "ev",
                           match="is the file a copy, under another name, of one imported before")
    assert "'evouna_nq (1)/0/fid' is 'evouna_nq/0/fid'" in message and db_state() == before
    # Another file, or the copy into another project, imports as before.
    other = _write(tmp_path / "evouna_tq.json",
                   json.dumps(_evouna_subset(shared_data, "evouna_tq.json")).encode("utf-8"))
    assert "nothing new" not in run_import("evouna", str(other), "--project", "ev")
    run_import("evouna", str(copy), "--project", "ev-second", "--create")
    assert Item.objects.filter(project__slug="ev-second").count() == \
        Item.objects.filter(project__slug="ev", dataset="evouna_nq").count()


def test_an_expert_file_renamed_is_refused_as_a_copy_not_doubled(shared_data, tmp_path):
    # The long-form experts' domain comes from the file's name prefix: Biology_12 copied as
    # Bio_12 gave its 20 pairs a second set of ids.
    source = sorted((shared_data / "lfqa_experts").glob("Biology_*.json"))[0]
    run_import("lfqa-experts", str(source), "--project", "lf", "--create")
    before = db_state()
    renamed = _write(tmp_path / f"Bio_{source.name.split('_', 1)[1]}", source.read_bytes())
    import_fails("lfqa-experts", str(renamed), "--project", "lf",
                 match="every one of the 20 item\\(s\\) this file would add repeats an item")
    assert db_state() == before


def test_a_comma_separated_copy_of_the_tsv_says_how_its_cells_are_separated(shared_data,
                                                                            tmp_path):
    rows = _tsv_rows(shared_data)[:3]
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows)
    path = _write(tmp_path / "in_lab_qa.tsv", out.getvalue().encode("utf-8"))
    import_fails("onestopqa-responses", str(path), "--project", "t", "--create",
                 match="its cells are separated by ',', not '\\\\t'")
