"""scripts/check_private_imports.py: the test command's check that no module of the project uses
another module's private names."""
from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from tests.support.paths import REPO_ROOT

SCRIPT = REPO_ROOT / "scripts" / "check_private_imports.py"


def _package(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


def _run(root: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), "--root", str(root), "shop"],
                          capture_output=True, text=True)


SHARED = {
    "shop/__init__.py": "",
    "shop/prices.py": """\
        def _round(value):
            return round(value, 2)

        def price(value):
            return _round(value)
        """,
    "shop/models.py": "class Order:\n    pass\n",
}


def test_finds_private_imports_across_modules_with_file_and_line(tmp_path):
    root = _package(tmp_path, {
        **SHARED,
        "shop/cart.py": """\
            from .prices import price, _round
            """,
        "shop/checkout/__init__.py": "",
        "shop/checkout/pay.py": """\
            from shop import prices
            import shop.prices as p

            def total(x):
                return prices._round(x) + p._round(x)
            """,
        # A package's private name is private to its __init__, not to the package.
        "shop/basket/__init__.py": "_limit = 3\n",
        "shop/basket/size.py": "from shop.basket import _limit\n",
    })
    result = _run(root)
    assert result.returncode == 1
    assert result.stdout.splitlines() == [
        "shop/basket/size.py:1: from shop.basket import _limit",
        "shop/cart.py:1: from shop.prices import _round",
        "shop/checkout/pay.py:5: p._round",
        "shop/checkout/pay.py:5: prices._round",
    ]
    assert "4 private-name imports across modules in 3 files" in result.stderr


def test_passes_public_imports_django_meta_and_a_package_own_private_submodule(tmp_path):
    root = _package(tmp_path, {
        **SHARED,
        "shop/cart.py": """\
            from shop import prices
            from shop.models import Order
            from . import models
            from django.db.models import _private_of_a_library

            def total(x):
                fields = Order._meta.get_fields() + models.Order._meta.get_fields()
                return prices.price(x), Order._default_manager, prices.__name__, fields
            """,
        # A package may import its own private submodule.
        "shop/basket/__init__.py": "from . import _helpers\n",
        "shop/basket/_helpers.py": "LIMIT = 3\n",
    })
    result = _run(root)
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")
