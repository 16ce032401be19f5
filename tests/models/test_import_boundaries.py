"""Model code knows nothing of kernels: only the linear-method package reaches ``autoglm.kernels``."""
from __future__ import annotations

import ast
from pathlib import Path

import autoglm.models

MODELS_DIR = Path(autoglm.models.__file__).parent
LINEAR_METHOD_DIR = MODELS_DIR / "linear_method"


def imported_modules(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:  # `from autoglm import kernels` too
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def test_only_the_linear_method_package_imports_kernels() -> None:
    offenders = {
        str(path.relative_to(MODELS_DIR)): kernel_imports
        for path in MODELS_DIR.rglob("*.py")
        if LINEAR_METHOD_DIR not in path.parents
        and (kernel_imports := sorted(name for name in imported_modules(path) if name.startswith("autoglm.kernels")))
    }
    assert offenders == {}


def test_the_linear_method_package_is_where_the_cpu_kernel_is_called() -> None:
    """The check above looks at the right names: the package does import the kernels."""
    assert any(name.startswith("autoglm.kernels") for path in LINEAR_METHOD_DIR.glob("*.py")
               for name in imported_modules(path))
