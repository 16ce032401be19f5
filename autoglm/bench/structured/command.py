"""``autoglm bench structured``: its options, and a run from a model to a summary and one results file.

One engine runs rounds of B unconstrained greedy requests decoding side by side with K neighbours,
the neighbours unconstrained and constrained (a JSON schema and a regex, in turn) in alternate
rounds, so that the machine's drift falls on both kinds alike. It reports the unconstrained requests'
decode tokens/s beside each kind, the step time the constraints added, what filling and applying
the grammar mask cost a step timed alone, and what compiling each constraint costs.
"""
from __future__ import annotations

import argparse

from autoglm.bench.lib.arguments import add_results_and_engine_settings, positive_int
from autoglm.cli.settings import announce_model, config_from_args
from autoglm.errors import InvalidRequestError


def add_structured_command(subparsers) -> None:
    """Registers ``autoglm bench structured``; listed in ``autoglm.bench.cli.BENCH_COMMANDS``."""
    parser = subparsers.add_parser(
        "structured", help="what constrained requests cost the unconstrained ones in the same batch",
        description=__doc__.split("\n\n")[1].replace("\n", " "),
    )
    load = parser.add_argument_group("load")
    load.add_argument("--num-unconstrained", type=positive_int, default=12,
                      help="B: the unconstrained requests measured (default: %(default)s)")
    load.add_argument("--num-neighbours", type=positive_int, default=4,
                      help="K: neighbours, constrained or not by round (default: %(default)s)")
    load.add_argument("--input-len", type=positive_int, default=64, help="prompt tokens of every request "
                      "(default: %(default)s)")
    load.add_argument("--output-len", type=positive_int, default=32, help="tokens every request decodes "
                      "(default: %(default)s)")
    load.add_argument("--rounds", type=positive_int, default=3,
                      help="rounds of each kind, alternating after one unmeasured of each (default: %(default)s)")
    add_results_and_engine_settings(parser, "also write the settings and every figure to this file")
    parser.set_defaults(handler=_structured)


def _structured(args: argparse.Namespace) -> int:
    from autoglm.bench.lib.engine_run import bench_llm, prompt_token_ids
    from autoglm.bench.results.report import machine_info, print_and_write
    from autoglm.bench.structured.constraints import json_constraint, neighbour_constraints, regex_constraint
    from autoglm.bench.structured.mask_cost import measure_compile_cost, measure_mask_cost
    from autoglm.bench.structured.measure import RoundShape, run_round
    from autoglm.bench.structured.report import summary_lines

    config = config_from_args(args)
    batch = args.num_unconstrained + args.num_neighbours
    if batch > config.max_num_seqs:
        raise InvalidRequestError(f"--num-unconstrained + --num-neighbours is {batch} but --max-num-seqs is "
                                  f"{config.max_num_seqs}: every request of a round must decode in one batch")
    announce_model(config)
    engine = bench_llm(config).engine
    shape = RoundShape(args.num_unconstrained, args.num_neighbours, args.input_len, args.output_len)
    constraints = neighbour_constraints(args.num_neighbours, args.output_len)
    token_ids = prompt_token_ids(engine)
    print(f"{args.rounds} rounds of each kind: {shape.num_unconstrained} unconstrained requests beside "
          f"{shape.num_neighbours} neighbours, unconstrained and constrained in turn", flush=True)
    for kind in (None, constraints):  # warm-up, the constraints compiled here
        run_round(engine, shape, token_ids, f"warm-up-{kind is not None}", kind)
    rounds = []
    for index in range(args.rounds):
        for kind in (None, constraints):
            rounds.append(run_round(engine, shape, token_ids, f"round-{index}-{kind is not None}", kind))
    constrained = [entry for entry in rounds if entry.constrained]
    mask = measure_mask_cost(engine, constraints, constrained[-1].neighbour_outputs, shape.num_unconstrained)
    compiled = {"JSON schema": measure_compile_cost(engine, json_constraint(args.output_len)),
                "regex": measure_compile_cost(engine, regex_constraint(args.output_len))}
    settings = {name: getattr(args, name) for name in (
        "num_unconstrained", "num_neighbours", "input_len", "output_len", "rounds")}
    settings["engine"] = config.model_dump()
    document = {"settings": settings, "machine": machine_info(),
                "rounds": [entry.to_dict(shape) for entry in rounds], "mask_cost": mask.to_dict(),
                "compile": {kind: vars(cost) for kind, cost in compiled.items()}}
    print_and_write(summary_lines(document), document, args.output_json)
    return 0
