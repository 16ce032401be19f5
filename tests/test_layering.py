"""Layers point down: engine -> runner -> models -> attention -> kernels."""
from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.mark.parametrize("module, forbidden", [
    ("autoglm.runner.model_runner", "autoglm.engine"),
    ("autoglm.models", "autoglm.runner"),
    ("autoglm.attention", "autoglm.models"),
])
def test_a_layer_does_not_import_the_ones_above_it(module, forbidden):
    check = (f"import sys, {module}; "
             f"print(sorted(name for name in sys.modules if name.startswith('{forbidden}')))")
    imported = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, check=True).stdout
    assert imported.strip() == "[]", f"{module} imports {imported.strip()}"
