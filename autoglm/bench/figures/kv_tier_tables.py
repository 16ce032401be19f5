"""The table of a ``bench kv-tiers`` results file: a long prefix's time to first token by where its KV came from."""
from __future__ import annotations

from autoglm.bench.figures.tables import caption
from autoglm.bench.kv_tiers import report
from autoglm.bench.results.formats import markdown_table
from autoglm.bench.results.results_files import ResultsFile


def kv_tiers(results: ResultsFile) -> str:
    settings = results.data["settings"]
    shape = (f"{settings['model']} with hidden size {settings['hidden_size']}, {settings['num_hidden_layers']} layers, "
             f"{settings['dtype']}; a {settings['prefix_len']:,}-token prefix and {settings['question_len']} more "
             f"tokens, blocks of {settings['block_size']}, median of {settings['trials']} turns each")
    return caption(results) + f"{shape}.\n\n" + markdown_table(report.HEADER, report.table_rows(results.data))
