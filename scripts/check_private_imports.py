"""Fails when a module of the project uses another module's private names.

A name with a leading underscore is a module's own business; what other modules need is named as
public API (see docs/ARCHITECTURE.md). Two forms are found, in the packages below (tests may reach
into private names on purpose and are not checked):

- `from x import _y` (absolute or relative, `x` a project module), and
- `m._y` where `m` is a project module imported into the file (`import a.b as m`,
  `from a import b`).

Dunder names are not private, and `._meta` is Django's documented model API. Importing a private
name of the same module (a package's `__init__` from itself) is not across modules.

Usage: python scripts/check_private_imports.py [--root DIR] [PACKAGE ...]
Prints each finding as `file:line: what` and exits 1 when there is any. Standard library only, so
it runs before anything is installed.
"""
from __future__ import annotations

import argparse
import ast
import sys
from dataclasses import dataclass
from pathlib import Path

PACKAGES = ("core", "annotation", "metrics_app", "worker", "config", "testing")

# Attributes with a leading underscore that are public API of a library, not a project module.
ALLOWED_ATTRIBUTES = frozenset({"_meta"})


@dataclass(frozen=True)
class Finding:
    path: str
    line: int
    what: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.what}"


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


class _Project:
    """Which dotted names are modules of the checked packages, under `root`."""

    def __init__(self, root: Path, packages: tuple[str, ...]):
        self.root = root
        self.packages = packages

    def owns(self, module: str) -> bool:
        return module.split(".")[0] in self.packages

    def is_module(self, module: str) -> bool:
        if not self.owns(module):
            return False
        path = self.root.joinpath(*module.split("."))
        return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()

    def files(self):
        for package in self.packages:
            base = self.root / package
            if not base.is_dir():
                continue
            for path in sorted(base.rglob("*.py")):
                if "migrations" not in path.relative_to(self.root).parts:
                    yield path

    def module_of(self, path: Path) -> tuple[str, bool]:
        """The dotted name of the file's module, and whether it is a package `__init__`."""
        parts = list(path.relative_to(self.root).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts.pop()
        return ".".join(parts), is_package


def _absolute(node: ast.ImportFrom, module: str, is_package: bool) -> str | None:
    """The absolute module an ImportFrom reads from (None: relative beyond the top)."""
    if node.level == 0:
        return node.module
    package = module.split(".") if is_package else module.split(".")[:-1]
    if node.level - 1 > len(package):
        return None
    base = package[:len(package) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def check_file(path: Path, project: _Project) -> list[Finding]:
    shown = str(path.relative_to(project.root))
    module, is_package = project.module_of(path)
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=shown)
    findings: list[Finding] = []
    imported_modules: dict[str, str] = {}  # local name -> project module it is bound to
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            source = _absolute(node, module, is_package)
            if source is None or not project.owns(source):
                continue
            for alias in node.names:
                if _is_private(alias.name) and source != module:
                    findings.append(Finding(shown, node.lineno,
                                            f"from {source} import {alias.name}"))
                elif project.is_module(f"{source}.{alias.name}"):
                    imported_modules[alias.asname or alias.name] = f"{source}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if project.owns(alias.name):
                    # `import a.b` binds `a`; `import a.b as m` binds `m` to `a.b`.
                    local = alias.asname or alias.name.split(".")[0]
                    imported_modules[local] = alias.name if alias.asname else local
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and _is_private(node.attr)
                and node.attr not in ALLOWED_ATTRIBUTES
                and isinstance(node.value, ast.Name) and node.value.id in imported_modules
                and imported_modules[node.value.id] != module):
            findings.append(Finding(shown, node.lineno, f"{node.value.id}.{node.attr}"))
    return sorted(findings, key=lambda f: (f.line, f.what))


def check(root: Path, packages: tuple[str, ...] = PACKAGES) -> list[Finding]:
    project = _Project(root, packages)
    return [finding for path in project.files() for finding in check_file(path, project)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent)
    parser.add_argument("packages", nargs="*", default=list(PACKAGES))
    args = parser.parse_args(argv)
    findings = check(args.root.resolve(), tuple(args.packages))
    for finding in findings:
        print(finding)
    if findings:
        files = len({finding.path for finding in findings})
        print(f"{len(findings)} private-name imports across modules in {files} files: name what "
              "other modules need as public API, or keep it inside its module.", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
