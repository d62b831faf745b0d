"""No product module spells the vocabulary's lists or stored names literally: the MC roles, the
task kinds, the recruiting providers and the learned metric/model names are written once, in
core/vocabulary.py, and everything else imports them (a second spelling is how one place got
changed and another missed)."""
from __future__ import annotations

import ast
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
PRODUCT_PACKAGES = ("config", "core", "worker", "metrics_app", "annotation")
VOCABULARY = REPO_ROOT / "core" / "vocabulary.py"

# Collections whose members, as a set, are one of the vocabulary's lists.
SPELLED_COLLECTIONS = {
    frozenset({"A", "B", "C", "D"}): "the MC roles (core.vocabulary.MC_ROLES)",
    frozenset({"likert", "ab", "mc"}): "the task kinds (core.vocabulary.TaskKind)",
    frozenset({"mturk", "prolific", "inhouse"}):
        "the recruiting providers (core.vocabulary.RECRUITING_PROVIDERS)",
}
# Stored names that only the vocabulary writes ("lerc" alone is also a folder and a judge name).
SPELLED_NAMES = {"lerc-ab": "a model name", "lerc_ab": "a metric name",
                 "lerc_prob": "a metric name"}


def spellings(source: str) -> list[tuple[int, str]]:
    """(line, what) for every literal list/tuple/set of the vocabulary and every stored name."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.List | ast.Tuple | ast.Set) and node.elts and all(
                isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts):
            what = SPELLED_COLLECTIONS.get(frozenset(e.value for e in node.elts))
            if what:
                found.append((node.lineno, what))
        elif isinstance(node, ast.Constant) and node.value in SPELLED_NAMES:
            found.append((node.lineno, f"{SPELLED_NAMES[node.value]} {node.value!r}"))
    return sorted(found)


def product_modules():
    for package in PRODUCT_PACKAGES:
        for path in sorted((REPO_ROOT / package).rglob("*.py")):
            if "migrations" not in path.parts and path != VOCABULARY:
                yield path


def test_the_scanner_finds_each_kind_of_spelling():
    source = ('ROLES = ("A", "B", "C", "D")\nif kind in ["mc", "likert", "ab"]: pass\n'
              'x = {"mturk", "prolific", "inhouse"}\nname = "lerc-ab"\nm = ("lerc_prob",)\n'
              'ok = ("A", "B")\ndoc = "the lerc_ab metric"\n')
    assert [line for line, _ in spellings(source)] == [1, 2, 3, 4, 5]


def test_the_vocabulary_is_spelled_only_in_core_vocabulary():
    offenders = [f"{path.relative_to(REPO_ROOT)}:{line}: {what}"
                 for path in product_modules()
                 for line, what in spellings(path.read_text(encoding="utf-8"))]
    assert offenders == []


def test_core_vocabulary_holds_the_names():
    assert {what for _, what in spellings(VOCABULARY.read_text(encoding="utf-8"))} == {
        f"{what} {name!r}" for name, what in SPELLED_NAMES.items()}
