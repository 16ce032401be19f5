"""``autoglm bench soak``: its options, and a run from settings to a summary and a JSON file.

It starts ``autoglm serve`` itself (or measures ``--base-url``), runs ``--victims`` steady
streams for a baseline phase, then again with big prompts every few seconds and clients that
leave mid-stream, and compares the streams' p99 inter-token gaps and the server's memory.
"""
from __future__ import annotations

import argparse
from functools import partial
from pathlib import Path

from autoglm.bench.lib.arguments import positive_float, positive_int
from autoglm.bench.lib.errors import run_http_bench

# Just under the default 2 MiB body limit (max_request_body_bytes), with room for the JSON around the prompt.
DEFAULT_BIG_PROMPT_CHARS = (2 * 1024 * 1024 - 4096,)


def _sizes(text: str) -> tuple[int, ...]:
    try:
        return tuple(positive_int(item) for item in text.split(","))
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"expected positive character counts separated by commas, got {text!r}") \
            from None


def _soak(args: argparse.Namespace) -> int:
    """Returns 1 when a victim stream failed, so scripts notice."""
    from autoglm.bench.soak.measure import run_soak_bench
    from autoglm.bench.soak.report import report_soak, victims_failed

    return 1 if victims_failed(report_soak(args, run_soak_bench(args))) else 0


def add_soak_command(subparsers) -> None:
    """Registers ``autoglm bench soak``; listed in ``autoglm.bench.cli.BENCH_COMMANDS``."""
    parser = subparsers.add_parser(
        "soak", help="steady streams' inter-token gaps and the server's memory under big prompts and disconnects",
        description=__doc__.split("\n\n")[1].replace("\n", " "),
    )
    server = parser.add_argument_group("server")
    server.add_argument("--base-url", help="measure this running server instead of starting one")
    server.add_argument("--server-pid", type=int, help="with --base-url: the server's process, to read its memory")
    server.add_argument("--model", help="checkpoint folder for the server it starts (default: the embedded model)")
    server.add_argument("--serve-args", default="", help="more `autoglm serve` flags for the server it starts, "
                        "e.g. '--max-context-len 128'")
    server.add_argument("--port", type=positive_int, default=8011, help="port of the server it starts")
    server.add_argument("--timeout-s", type=positive_float, default=120.0, help="give up on one request after this")

    load = parser.add_argument_group("load")
    load.add_argument("--victims", type=positive_int, default=4, help="steady streams measured throughout")
    load.add_argument("--output-len", type=positive_int, default=64, help="tokens each victim request asks for")
    load.add_argument("--phase-s", type=positive_float, default=60.0, help="seconds of each phase")
    load.add_argument("--big-prompt-chars", type=_sizes, default=DEFAULT_BIG_PROMPT_CHARS,
                      help="characters of each big prompt, a comma list sent in turn (default: just under the "
                      "default 2 MiB body limit)")
    load.add_argument("--big-prompt-interval-s", type=positive_float, default=3.0, help="seconds between big prompts")
    load.add_argument("--disconnect-interval-s", type=positive_float, default=1.0,
                      help="mean seconds between clients that leave a stream after its first events")
    load.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output-json", type=Path, help="write settings, both phases and the memory figures here")
    parser.set_defaults(handler=partial(run_http_bench, "soak", _soak))
