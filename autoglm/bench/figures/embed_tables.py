"""The table of a ``bench embed`` results file: embeddings per second of the engine and of transformers."""
from __future__ import annotations

from autoglm.bench.embed import report
from autoglm.bench.figures.tables import caption
from autoglm.bench.results.formats import bold, markdown_table
from autoglm.bench.results.results_files import ResultsFile


def embed(results: ResultsFile) -> str:
    document = results.data
    batch_size = document["settings"]["batch_size"]
    rows = [[f"{batch_size} inputs of {entry['input_len']} tokens",
             f"{report.embeddings_per_s(document, entry, 'engine_s'):,.1f}",
             f"{report.embeddings_per_s(document, entry, 'baseline_s'):,.1f}",
             bold(f"{report.speedup(document, entry):.2f}x"), f"{entry['min_cosine']:.6f}"]
            for entry in document["lengths"]]
    return caption(results) + markdown_table(
        ["batch", "engine, embeddings/s", "transformers, embeddings/s", "engine / transformers",
         "least cosine between them"], rows)
