"""The table of a ``bench lora`` results file: output tokens/s of the same batch for the base model alone and
spread over each number of adapters, per rank, and each one's ratio to the base."""
from __future__ import annotations

from autoglm.bench.figures.tables import caption
from autoglm.bench.lora import report
from autoglm.bench.results.formats import bold, markdown_table, rate, ratio
from autoglm.bench.results.results_files import ResultsFile


def lora(results: ResultsFile) -> str:
    document = results.data
    settings = document["settings"]
    rows = []
    for entry in document["results"]:
        is_base = entry is report.base_entry(document, entry["rank"])
        rows.append([f"rank {entry['rank']}", report.kind_name(entry), rate(report.tokens_per_s(entry)),
                     "" if is_base else bold(ratio(report.ratio_to_base(document, entry)))])
    note = (f"\n\n{settings['batch_size']} greedy requests of {settings['input_len']} prompt and "
            f"{settings['output_len']} output tokens, each kind quoted by its quickest of {settings['rounds']} rounds; "
            "\"layer by layer\": the base model's decode steps kept from the native one-call step, as a step with "
            "adapter rows is.")
    return caption(results) + markdown_table(["rank", "rows spread over", "output tokens/s", "vs the base"], rows,
                                             text_columns=2) + note
