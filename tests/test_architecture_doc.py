"""docs/ARCHITECTURE.md names only what exists: every path it names is in the repository, every
function or class it names is defined where it says, every `.importlinter` contract is described.

The syntax checked (documented at the top of docs/ARCHITECTURE.md):

- a backticked path from the repository root ending in a file suffix (`.py`, `.md`, …) or `/`:
  `annotation/services/stages.py`, `metrics_app/lerc/` — the file or folder exists;
- `path.py:name` or `path.py::name` (backticked, or anywhere in a fenced drawing) — `name` is a
  function, class or assignment at the top of that file; `Class.method` goes one class deeper;
  a file drawn without a name (`config/urls.py` in a drawing) exists;
- a backticked dotted name under a root package: `annotation.selectors.judgments_that_count` —
  the longest prefix that is a module exists, and the rest is bound in it (defined or imported,
  as Python would resolve it);
- `[importlinter:contract:ID]` — `ID` appears backticked in the document.

The checker is plain Python over the text and `ast`; no Django.
"""
from __future__ import annotations

import ast
import configparser
import re
from functools import cache
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
DOC = REPO_ROOT / "docs" / "ARCHITECTURE.md"
ROOT_PACKAGES = ("config", "core", "worker", "metrics_app", "annotation", "testing", "bench",
                 "tests")
FILE_SUFFIXES = (".py", ".md", ".html", ".js", ".css", ".toml", ".txt", ".json", ".cfg", ".ini",
                 ".sh", ".yml", ".yaml")

BACKTICKED = re.compile(r"`([^`\n]+)`")
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
# A path with a name: `dir/file.py:name` or `dir/file.py::Class.name`.
PATH_NAME = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)*[\w.-]+\.py)::?([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)?)")
PATH = re.compile(r"^(?:[\w.-]+/)+(?:[\w.-]+)?$")
# A file drawn without a name: `config/urls.py` in a drawing.
DRAWN_PATH = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)+[\w-]+\.(?:py|js|html|css))(?![\w.])")
DOTTED = re.compile(r"^(?:" + "|".join(ROOT_PACKAGES) + r")(?:\.[A-Za-z_]\w*)+$")


@cache
def _bindings(path: Path) -> tuple[dict[str, ast.AST], set[str]]:
    """Top-level definitions (name -> node) and every top-level bound name, imports included."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    defined: dict[str, ast.AST] = {}
    bound: set[str] = set()

    def visit(statements) -> None:
        for node in statements:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                defined[node.name] = node
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    for name in ast.walk(target):
                        if isinstance(name, ast.Name):
                            defined[name.id] = node
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                bound.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
            elif isinstance(node, (ast.If, ast.Try)):  # TYPE_CHECKING blocks, optional imports
                visit(node.body)
                visit(getattr(node, "orelse", []))
                for handler in getattr(node, "handlers", []):
                    visit(handler.body)

    visit(tree.body)
    return defined, bound | set(defined)


def _defines(path: Path, name: str) -> bool:
    """Whether `name` (or `Class.member`) is defined at the top of the file at `path`."""
    head, _, member = name.partition(".")
    node = _bindings(path)[0].get(head)
    if node is None:
        return False
    if not member:
        return True
    return isinstance(node, ast.ClassDef) and any(
        getattr(child, "name", None) == member
        or any(isinstance(t, ast.Name) and t.id == member
               for t in getattr(child, "targets", [getattr(child, "target", None)]) if t)
        for child in node.body)


def _module_file(dotted: str) -> Path | None:
    base = REPO_ROOT.joinpath(*dotted.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def check_dotted(reference: str) -> str | None:
    """None when `reference` resolves (module, then names bound in it), else why not."""
    parts = reference.split(".")
    for cut in range(len(parts), 0, -1):
        module = _module_file(".".join(parts[:cut]))
        if module is None:
            continue
        rest = parts[cut:]
        if not rest:
            return None
        if rest[0] not in _bindings(module)[1]:
            return f"{reference}: {rest[0]!r} is not bound in {module.relative_to(REPO_ROOT)}"
        if len(rest) > 1 and rest[0] in _bindings(module)[0] and not _defines(
                module, ".".join(rest[:2])):
            return f"{reference}: {module.relative_to(REPO_ROOT)} has no {'.'.join(rest[:2])}"
        return None
    return f"{reference}: no such module"


def check_path_name(path: str, name: str) -> str | None:
    file = REPO_ROOT / path
    if not file.is_file():
        return f"{path}:{name}: no such file"
    if not _defines(file, name):
        return f"{path}:{name}: {path} defines no {name}"
    return None


def check_path(path: str) -> str | None:
    if "://" in path or path.startswith("/") or "<" in path or "*" in path:
        return None
    if not (path.endswith("/") or path.endswith(FILE_SUFFIXES)):
        return None
    if not (REPO_ROOT / path).exists():
        return f"{path}: no such file or folder"
    return None


def problems_in(text: str) -> list[str]:
    """Every reference of `text` (see the module docstring) that does not resolve."""
    problems: list[str] = []
    drawings = " ".join(block for block in FENCE.findall(text))
    for path, name in PATH_NAME.findall(drawings):
        problems.append(check_path_name(path, name))
    for path in DRAWN_PATH.findall(drawings):
        problems.append(check_path(path))
    prose = FENCE.sub("", text)
    for span in BACKTICKED.findall(prose):
        span = span.strip()
        named = PATH_NAME.fullmatch(span)
        if named:
            problems.append(check_path_name(*named.groups()))
        elif PATH.match(span):
            problems.append(check_path(span))
        elif DOTTED.match(span) and not span.endswith(FILE_SUFFIXES):
            problems.append(check_dotted(span))
    return sorted({problem for problem in problems if problem})


def contracts() -> list[str]:
    parser = configparser.ConfigParser()
    parser.read(REPO_ROOT / ".importlinter")
    return [section.split(":", 2)[2] for section in parser.sections()
            if section.startswith("importlinter:contract:")]


def test_every_name_in_the_architecture_doc_exists():
    assert problems_in(DOC.read_text(encoding="utf-8")) == []


def test_the_architecture_doc_names_files_to_check():
    """The check is not vacuous: the document points to many files and functions."""
    text = DOC.read_text(encoding="utf-8")
    assert len(PATH_NAME.findall(text)) >= 40
    assert len([s for s in BACKTICKED.findall(text) if PATH.match(s)]) >= 40


def test_every_import_linter_contract_is_described():
    text = DOC.read_text(encoding="utf-8")
    assert contracts()  # the file was read
    assert [c for c in contracts() if f"`{c}`" not in text] == []


@pytest.mark.parametrize("stale, why", [
    ("`annotation/services/no_such_module.py`", "no such file"),
    ("`annotation/no_such_folder/`", "no such file or folder"),
    ("`annotation/selectors.py:no_such_function`", "defines no no_such_function"),
    ("`annotation/selectors.py::no_such_function`", "defines no no_such_function"),
    ("`annotation/models/judgment.py:Judgment.no_such_method`", "defines no Judgment.no_such"),
    ("`annotation.selectors.no_such_function`", "is not bound in annotation/selectors.py"),
    ("`annotation.no_such_module.thing`", "is not bound in annotation/__init__.py"),
    ("`annotation.domain.design.LatinSquare.no_such_method`", "has no LatinSquare.no_such"),
    ("```\n  view ──► annotation/views/task_pages.py:no_such_view\n```", "defines no no_such_view"),
    ("```\n  urls ──► annotation/no_such_urls.py → the view\n```", "no such file"),
])
def test_a_stale_name_is_reported(stale, why):
    problems = problems_in(f"Some text\n{stale}\nand more.\n")
    assert len(problems) == 1 and why in problems[0]


def test_names_that_exist_pass():
    text = ("`annotation/selectors.py` `annotation/services/` `annotation/access_selectors.py:"
            "projects_visible_to` `annotation/models/judgment.py::AppendOnlyModel.save` "
            "`annotation.access_selectors.projects_visible_to` `annotation.models.Judgment` "
            "`config.settings.dev` `/metrics/SLUG/dashboard/` `s3://bucket/key` "
            "`lerc.json`\n```\n  POST ──► annotation/views/task_pages.py:task_submit\n```\n")
    assert problems_in(text) == []
