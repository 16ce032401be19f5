"""``autoglm bench images`` end to end on a tiny GLM-4.1V: the results file's shape, its table in the docs,
and bad settings refused. No timing is asserted, only that every measure was taken."""
from __future__ import annotations

import json

import pytest

from autoglm.bench.cli import main
from autoglm.bench.figures.render import render_document
from tests.tiny_models import make_tiny_checkpoint

pytestmark = pytest.mark.timeout(300)

SAMPLE_KEYS = {"samples", "median", "min", "max"}
NUM_ITERS = 2


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    path = tmp_path_factory.mktemp("glm4v")
    main(["make-model", "--shape", "glm4v-tiny", "--dtype", "float32", "--out", str(path)])
    return path


def test_every_measure_lands_in_the_results_file_and_the_docs_table(folder, tmp_path, capsys):
    results = tmp_path / "images.json"
    assert main(["images", "--model", str(folder), "--dtype", "float32", "--max-pixels", "50000",
                 "--batch-size", "2", "--num-iters", str(NUM_ITERS), "--output-json", str(results)]) == 0
    document = json.loads(results.read_text())
    assert document["settings"]["max_pixels"] == 50000 and document["settings"]["screenshot_size"] == [1080, 2400]
    assert document["machine"]["cpu_count"] and document["dtypes"] == {"autoglm": "float32",
                                                                      "transformers": "float32"}
    assert document["shapes"]["vision"]["depth"] == 2 and document["shapes"]["decoder"]["num_hidden_layers"] == 2
    frames, rows, columns = document["image"]["grid_thw"]
    assert frames == 1 and document["image"]["patches"] == rows * columns
    timed = [document["ttft_s"]["autoglm"], document["ttft_s"]["transformers"],
             document["prefix_cache"]["hit_ttft_s"], *document["encoder_images_per_s"].values()]
    timed = [samples for samples in timed if isinstance(samples, dict)]
    assert len(timed) == 5
    for samples in timed:
        assert set(samples) == SAMPLE_KEYS and len(samples["samples"]) == NUM_ITERS
    image_tokens = rows * columns // 4
    assert document["prefix_cache"]["cached_tokens"] >= image_tokens  # the hit covers the whole screenshot
    assert document["encoder_profile"]["attention_calls"] == 2  # one per block for the one image
    rendered = render_document(f"<!-- figures:images {results.name} -->\n<!-- /figures -->\n", tmp_path)
    assert "| TTFT speed-up of the engine | **" in rendered and "autoglm in float32" in rendered
    assert "encoder, 2 images in one call" in capsys.readouterr().out


def test_a_text_model_is_refused(tmp_path):
    model = make_tiny_checkpoint("qwen2", tmp_path)
    with pytest.raises(ValueError, match="text-only model; images needs a vision-language checkpoint"):
        main(["images", "--model", str(model), "--dtype", "float32", "--baseline", "none"])


def test_a_batch_of_one_is_refused(capsys):
    with pytest.raises(SystemExit):
        main(["images", "--batch-size", "1"])
    assert "expected a batch of at least 2 images, got '1'" in capsys.readouterr().err
