"""No product module spells the vocabulary's lists or stored names literally: the MC roles, the
task kinds, the recruiting providers and the learned metric/model names are written once, in
core/vocabulary.py, and everything else imports them (a second spelling is how one place got
changed and another missed). Nor does any module compare a value to a task kind, a provider or a
model kind written as a string (`kind == "ab"`, `provider in ("mturk", "prolific")`,
`choice in ("A", "B")`): it compares to the enum member."""
from __future__ import annotations

import ast
from pathlib import Path

from core.vocabulary import AB_CHOICES, ModelKind, Provider, TaskKind

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
# Values no comparison may spell: each enum member's value, named by its member.
COMPARED_VALUES = {member.value: f"{type(member).__name__}.{member.name}"
                   for enum in (TaskKind, Provider, ModelKind) for member in enum}


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
        elif isinstance(node, ast.Compare):
            found.extend((node.lineno, what) for what in compared_spellings(node))
    return sorted(found)


def compared_spellings(node: ast.Compare) -> list[str]:
    """What a comparison spells: an operand (or a member of a literal collection operand) that
    is a task kind, provider or model kind as a string, or the A/B choices as a collection."""
    found = []
    for operand in (node.left, *node.comparators):
        if isinstance(operand, ast.List | ast.Tuple | ast.Set):
            constants = [e.value for e in operand.elts if isinstance(e, ast.Constant)]
            if set(constants) == set(AB_CHOICES):
                found.append("a comparison with the A/B choices (core.vocabulary.AB_CHOICES)")
        else:
            constants = [operand.value] if isinstance(operand, ast.Constant) else []
        found.extend(f"a comparison with {value!r} (use {COMPARED_VALUES[value]})"
                     for value in constants if isinstance(value, str) and value in COMPARED_VALUES)
    return found


def product_modules():
    for package in PRODUCT_PACKAGES:
        for path in sorted((REPO_ROOT / package).rglob("*.py")):
            if "migrations" not in path.parts and path != VOCABULARY:
                yield path


def test_the_scanner_finds_each_kind_of_spelling():
    source = ('ROLES = ("A", "B", "C", "D")\nif kind in ["mc", "likert", "ab"]: pass\n'
              'x = {"mturk", "prolific", "inhouse"}\nname = "lerc-ab"\nm = ("lerc_prob",)\n'
              'ok = ("A", "B")\ndoc = "the lerc_ab metric"\n')
    assert sorted({line for line, _ in spellings(source)}) == [1, 2, 3, 4, 5]


def test_the_scanner_finds_comparisons_with_a_spelled_value():
    source = ('if kind == "ab": pass\nif "likert" != project.kind: pass\n'
              'ok = stage.provider in ("mturk", "prolific")\nif x.kind == "regression": pass\n'
              'if row.choice not in ("A", "B"): pass\nif a < b == "import": pass\n'
              'fine = kind == TaskKind.AB or label == "abc" or name == "lerc"\n'
              'also_fine = row.choice in ("A", "B", "C") or rule in {"yes_no": 1}\n')
    assert sorted({line for line, _ in spellings(source)}) == [1, 2, 3, 4, 5, 6]


def test_the_vocabulary_is_spelled_only_in_core_vocabulary():
    offenders = [f"{path.relative_to(REPO_ROOT)}:{line}: {what}"
                 for path in product_modules()
                 for line, what in spellings(path.read_text(encoding="utf-8"))]
    assert offenders == []


def test_core_vocabulary_holds_the_names():
    assert {what for _, what in spellings(VOCABULARY.read_text(encoding="utf-8"))} == {
        f"{what} {name!r}" for name, what in SPELLED_NAMES.items()}
