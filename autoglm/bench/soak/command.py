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
from autoglm.bench.lib.errors import ServeBenchError, run_http_bench

# Just under the default 2 MiB body limit (max_request_body_bytes), with room for the JSON around the prompt.
DEFAULT_BIG_PROMPT_CHARS = (2 * 1024 * 1024 - 4096,)
# The server's memory is read once the aborted streams' last steps have run.
SETTLE_S = 2.0


def _sizes(text: str) -> tuple[int, ...]:
    try:
        return tuple(positive_int(item) for item in text.split(","))
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"expected positive character counts separated by commas, got {text!r}") \
            from None


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
    parser.set_defaults(handler=partial(run_http_bench, "soak", run_soak))


def run_soak(args: argparse.Namespace) -> int:
    """Returns 1 when a victim stream failed, so scripts notice."""
    import tempfile
    import time

    from autoglm.bench.lib.client import CompletionTarget, fetch_models
    from autoglm.bench.lib.server import BenchServer, start_server
    from autoglm.bench.results.report import print_and_write
    from autoglm.bench.soak.measure import HostileLoad, run_phase
    from autoglm.bench.soak.report import soak_document, summary_lines

    if args.server_pid is not None and args.base_url is None:
        raise ServeBenchError("--server-pid names the process of a --base-url server")
    if args.base_url is not None:
        server = BenchServer(args.base_url, args.server_pid)
    else:
        log = Path(tempfile.gettempdir()) / f"autoglm-soak-server-{args.port}.log"
        server = start_server(args.port, args.model, args.serve_args, log)
    try:
        model = fetch_models(server.base_url)[0]["id"]
        target = CompletionTarget(server.base_url, model, timeout_s=args.timeout_s)
        hostile_load = HostileLoad(args.big_prompt_chars, args.big_prompt_interval_s, args.disconnect_interval_s)
        print(f"baseline: {args.victims} streams for {args.phase_s:g} s", flush=True)
        baseline = run_phase(target, args.victims, args.output_len, args.phase_s)
        time.sleep(SETTLE_S)
        rss_before = server.resident_bytes()
        print(f"hostile: the same streams, big prompts every {args.big_prompt_interval_s:g} s and disconnects",
              flush=True)
        hostile = run_phase(target, args.victims, args.output_len, args.phase_s, hostile_load, args.seed)
        time.sleep(SETTLE_S)
        rss_after = server.resident_bytes()
    finally:
        server.stop()
    settings = {name: getattr(args, name) for name in (
        "victims", "output_len", "phase_s", "big_prompt_interval_s", "disconnect_interval_s", "seed", "serve_args")}
    settings.update(base_url=server.base_url, model=model, server_model_folder=args.model,
                    big_prompt_chars=list(args.big_prompt_chars))
    document = soak_document(settings, baseline, hostile, rss_before, rss_after)
    print_and_write(summary_lines(document), document, args.output_json)
    return 1 if "victim failed" in {**baseline.statuses, **hostile.statuses} else 0
