"""Templates take the vocabulary from the `core.context_processors.vocabulary` context processor
(`{% if kind == TaskKind.LIKERT %}`) and never compare to a kind or a provider as a string literal,
so renaming a member changes every page or breaks loudly instead of silently hiding a branch."""
from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.template import Context, RequestContext, Template
from django.template.base import Lexer, TokenType
from django.test import RequestFactory
from django.utils.text import smart_split

from core.vocabulary import ModelKind, Provider, TaskKind

REPO_ROOT = Path(__file__).resolve().parents[2]
TEMPLATES = REPO_ROOT / "templates"
SPELLED_VALUES = {member.value for enum in (TaskKind, Provider, ModelKind) for member in enum}
COMPARISONS = {"==", "!=", "in"}


def _is_string_literal(bit: str) -> bool:
    return len(bit) >= 2 and bit[0] == bit[-1] and bit[0] in "\"'"


def literal_comparisons(source: str) -> list[tuple[int, str]]:
    """(line, tag) of every {% if %}/{% elif %} that compares something to a task kind, provider
    or model kind written as a string literal. (Other "kinds" exist: a judge's kind "metric" is
    not the vocabulary's and may stay a string.)"""
    found = []
    for token in Lexer(source).tokenize():
        if token.token_type != TokenType.BLOCK:
            continue
        bits = list(smart_split(token.contents))
        if not bits or bits[0] not in ("if", "elif"):
            continue
        for i, bit in enumerate(bits[1:-1], start=1):
            if bit not in COMPARISONS:
                continue
            left, right = bits[i - 1], bits[i + 1]
            found.extend((token.lineno, token.contents) for literal in (left, right)
                         if _is_string_literal(literal) and literal[1:-1] in SPELLED_VALUES)
    return found


def test_the_scanner_finds_literal_comparisons():
    source = ('{% if kind == "ab" %}x{% elif "likert" != project.kind %}y{% endif %}\n'
              "{% if stage.provider == 'import' %}z{% endif %}\n"
              '{% if project.kind == "other" %}{% endif %}{% if x == "mturk" %}{% endif %}\n'
              '{% if kind == TaskKind.AB %}ok{% endif %}{% if label == "abc" %}ok{% endif %}\n'
              '{# {% if kind == "ab" %} #}<p title="kind == \'ab\'">{{ kind }}</p>\n')
    assert [line for line, _ in literal_comparisons(source)] == [1, 1, 2, 3]


def test_no_template_compares_a_kind_or_provider_to_a_string():
    offenders = [f"{path.relative_to(REPO_ROOT)}:{line}: {{% {tag} %}}"
                 for path in sorted(TEMPLATES.rglob("*.html"))
                 for line, tag in literal_comparisons(path.read_text(encoding="utf-8"))]
    assert offenders == []


def test_templates_get_the_vocabulary_from_the_context_processor():
    assert "core.context_processors.vocabulary" in \
        settings.TEMPLATES[0]["OPTIONS"]["context_processors"]
    template = Template("{% if kind == TaskKind.AB %}ab{% elif kind == TaskKind.LIKERT %}likert"
                        "{% endif %}|{% if provider == Provider.IMPORT %}imported{% endif %}")
    request = RequestFactory().get("/")
    assert template.render(RequestContext(request, {"kind": "ab", "provider": "import"})) \
        == "ab|imported"
    assert template.render(RequestContext(request, {"kind": TaskKind.LIKERT,
                                                    "provider": "mturk"})) == "likert|"
    # Without the processor the names are missing and no branch matches: the processor matters.
    assert template.render(Context({"kind": "ab", "provider": "import"})) == "|"
