"""The table of a ``bench pp`` results file: one engine process against a pipeline of stages on the same
machine."""
from __future__ import annotations

from autoglm.bench.figures.tables import caption
from autoglm.bench.pipeline import report
from autoglm.bench.results.formats import bold, duration, markdown_table, rate
from autoglm.bench.results.results_files import ResultsFile


def pipeline(results: ResultsFile) -> str:
    document = results.data
    settings = document["settings"]
    rows = [[f"{side['num_stages']} stage{'s' if side['num_stages'] > 1 else ''}",
             f"{side['num_stages']} x {side['torch_threads']}", duration(side["elapsed_s"]),
             rate(side["output_tokens_per_s"]), rate(side["total_tokens_per_s"])]
            for side in document["sides"]]
    rows[-1][-1] += f" ({bold(f'{report.throughput_ratio(document):.2f}x')})"
    load = (f"{settings['num_prompts']} greedy requests of {settings['input_len']} prompt tokens and "
            f"{settings['output_len']} output tokens, all at once; each engine's quickest of {settings['rounds']} "
            f"alternate rounds; the same tokens on both: {'yes' if document['same_tokens'] else 'no'}")
    return (caption(results) + markdown_table(["engine", "processes x torch threads", "time", "output tok/s",
                                               "total tok/s"], rows) + f"\n\n{load}.\n")
