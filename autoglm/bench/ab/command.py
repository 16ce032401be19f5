"""``autoglm bench ab``: its options, and a comparison from revisions to table, JSON and exit status.

The exit status gates a change: 0 when every headline metric holds, 1 when one misses the
threshold, 2 when the comparison could not be made.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import autoglm
from autoglm.bench.lib.arguments import positive_float, positive_int

MISSED, FAILED = 1, 2
SEPARATOR = "--"


# Flags each run gets from ab itself, and why they may not be given after ``--``.
_GIVEN_BY_AB = {
    "--output-json": "ab gives each run its own; give it before -- for the comparison's file",
    "--base-url": "ab starts each revision's own server; give its flags with --server-args",
}


class _BenchmarkCommand(argparse.Action):
    """The words after ``--``, checked: a benchmark ab can compare, without the flags ab gives each run."""

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        from autoglm.bench.ab.metrics import HEADLINES

        words = values[1:] if values[:1] == [SEPARATOR] else values
        if not words or words[0] not in HEADLINES:
            *others, last = HEADLINES
            parser.error(f"after {SEPARATOR}, name the benchmark to compare, {', '.join(others)} or {last}, "
                         f"and its flags (got {' '.join(words) or 'nothing'})")
        for flag, why in _GIVEN_BY_AB.items():
            if any(word == flag or word.startswith(f"{flag}=") for word in words):
                parser.error(f"leave {flag} out of the benchmark's flags: {why}")
        setattr(namespace, self.dest, words)


def _ab(args: argparse.Namespace) -> int:
    from autoglm.bench.ab.checkouts import repository_root
    from autoglm.bench.ab.errors import ABError
    from autoglm.bench.ab.measure import ABSettings, measure_ab
    from autoglm.bench.ab.metrics import compare
    from autoglm.bench.ab.report import revisions_line, summary_header, summary_rows
    from autoglm.bench.results.report import format_table, write_json

    try:
        settings = ABSettings(repository=repository_root(args.repo), before=args.before, after=args.after,
                              rounds=args.rounds, benchmark=args.benchmark, min_ratio=args.min_ratio,
                              server_args=args.server_args)
        document = measure_ab(settings)
    except ABError as error:
        print(f"error: {error}", file=sys.stderr)
        return FAILED
    if args.output_json is not None:
        write_json(args.output_json, document)
    try:
        comparisons = compare(document)
    except ValueError as error:  # e.g. requests failed in a round: its figures compare nothing
        print(f"error: {error}", file=sys.stderr)
        return FAILED
    print(revisions_line(document))
    print(format_table(summary_header(document), summary_rows(comparisons, args.min_ratio)))
    missed = [comparison.metric.name for comparison in comparisons if not comparison.passes(args.min_ratio)]
    if missed:
        print(f"after is less than {args.min_ratio:.2f}x as good as before on: {', '.join(missed)}")
        return MISSED
    return 0


def add_ab_command(subparsers) -> None:
    parser = subparsers.add_parser(
        "ab", help="one benchmark on two revisions in turn (A, B, A, B); exit 1 if after is worse than before",
        usage="autoglm bench ab --before REV [--after REV] [options] -- throughput|latency|serve [its flags]")
    parser.add_argument("--before", required=True, metavar="REV", help="git revision A, e.g. main or HEAD~1")
    parser.add_argument("--after", metavar="REV",
                        help="git revision B (default: the working tree, uncommitted changes included)")
    parser.add_argument("--repo", type=Path, metavar="DIR", default=Path(autoglm.__file__).resolve().parent,
                        help="the git checkout to take revisions from (default: the one this package runs from)")
    parser.add_argument("--rounds", type=positive_int, default=2, metavar="N",
                        help="runs of each revision, alternating")
    parser.add_argument("--min-ratio", type=positive_float, default=0.95, metavar="RATIO",
                        help="after must be at least this much as good as before on every headline metric")
    parser.add_argument("--server-args", default="", metavar="'FLAGS'",
                        help="with -- serve: the flags each revision's own `autoglm serve` starts with, e.g. "
                             "'--model DIR --num-threads 2'; each side's server runs only for its own round")
    parser.add_argument("--output-json", type=Path, metavar="FILE",
                        help="write both revisions, every round's results and the machine to this file")
    parser.add_argument("benchmark", nargs=argparse.REMAINDER, action=_BenchmarkCommand,
                        help="-- then throughput, latency or serve and its flags, e.g. -- throughput --model DIR")
    parser.set_defaults(handler=_ab)
