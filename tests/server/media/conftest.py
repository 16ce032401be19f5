from __future__ import annotations

import pytest

from autoglm.bench.cli import main as bench_main


@pytest.fixture(scope="session")
def glm4v_tiny(tmp_path_factory):
    """A tiny GLM-4.1V checkpoint: tokenizer with the image markers, chat template and image processor."""
    folder = tmp_path_factory.mktemp("glm4v-tiny")
    # A context long enough for the phone agent's max_tokens of 3000 beside a screenshot.
    bench_main(["make-model", "--shape", "glm4v-tiny", "--dtype", "float32", "--out", str(folder),
                "--override", "text_config.max_position_embeddings=4096"])
    return folder


@pytest.fixture(scope="session")
def qwen2_5_vl_tiny(tmp_path_factory):
    """A tiny Qwen2.5-VL checkpoint: tokenizer with the vision markers, chat template and image processor."""
    folder = tmp_path_factory.mktemp("qwen2.5-vl-tiny")
    bench_main(["make-model", "--shape", "qwen2.5-vl-tiny", "--dtype", "float32", "--out", str(folder)])
    return folder
