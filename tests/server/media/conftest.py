from __future__ import annotations

import pytest

from autoglm.bench.cli import main as bench_main


@pytest.fixture(scope="session")
def glm4v_tiny(tmp_path_factory):
    """A tiny GLM-4.1V checkpoint: tokenizer with the image markers, chat template and image processor."""
    folder = tmp_path_factory.mktemp("glm4v-tiny")
    bench_main(["make-model", "--shape", "glm4v-tiny", "--dtype", "float32", "--out", str(folder)])
    return folder
