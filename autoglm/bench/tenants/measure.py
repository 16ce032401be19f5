"""``bench tenants``' phases: some tenants' requests to one server, and what each tenant got; the throughput
rounds alternate between the server without tenants and the one with them."""
from __future__ import annotations

import argparse
import random
import shlex
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autoglm.bench.lib.client import CompletionTarget
from autoglm.bench.lib.datasets import ServeRequest, random_requests
from autoglm.bench.lib.rate_runner import rate_label, run_at_rate, tenant_sends
from autoglm.bench.lib.serve_metrics import aggregate
from autoglm.bench.lib.server import start_server
from autoglm.bench.lib.tenant_load import TenantLoad
from autoglm.bench.lib.tenant_metrics import tenant_results
from autoglm.bench.tenants.tenants_file import FLOODER, VICTIM, write_bench_tenants
from autoglm.model_paths import resolve_model_path

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

# Unmeasured requests on each server first, so neither pays for warming up.
WARMUP_PROMPTS = 8


@dataclass(frozen=True)
class PhaseSettings:
    """What every phase shares: the server, the model, the prompts' shape."""

    base_url: str
    model: str
    tokenizer: PreTrainedTokenizerBase
    input_len: int
    output_len: int
    seed: int
    timeout_s: float | None


def run_phase(settings: PhaseSettings, name: str, loads: Sequence[TenantLoad]) -> dict[str, Any]:
    """Each tenant's requests at its rate (all at once without one); the phase's aggregates, each tenant's,
    and the seconds every tenant was backlogged. Prompts are drawn anew for each phase and tenant, so no
    phase finds another's prompts in the prefix cache."""
    targets = [CompletionTarget(settings.base_url, settings.model, timeout_s=settings.timeout_s,
                                api_key=load.api_key, tenant=load.name) for load in loads]

    def requests_of(load: TenantLoad) -> list[ServeRequest]:
        rng = random.Random(f"{settings.seed}:{name}:{load.name}")
        return random_requests(settings.tokenizer, load.num_prompts, settings.input_len, settings.output_len, 0.0,
                               rng)

    sends, rates = tenant_sends(loads, targets, requests_of, float("inf"), 1.0, settings.seed)
    run = run_at_rate(sends, float("inf"), None)
    tenants, backlogged_s = tenant_results(loads, rates, run.results, run.duration_s)
    return {
        "metrics": aggregate(run.results, run.duration_s).to_dict(),
        "tenants": [tenant.to_dict(rate_label(tenant.request_rate)) for tenant in tenants],
        "backlogged_s": backlogged_s,
        "errors": sorted({result.error for result in run.results if result.error}),
    }


def phase_settings(base_url: str, api_key: str | None, args: argparse.Namespace) -> PhaseSettings:
    """The served model's name, and its tokenizer from the folder the server was started on (the server names
    its model, never the folder)."""
    from transformers import AutoTokenizer

    from autoglm.bench.lib.client import fetch_models

    card = fetch_models(base_url, api_key)[0]
    tokenizer = AutoTokenizer.from_pretrained(resolve_model_path(args.model))
    return PhaseSettings(base_url, card["id"], tokenizer, args.input_len, args.output_len, args.seed, args.timeout_s)


def throughput_rounds(open_settings: PhaseSettings, keyed_settings: PhaseSettings, api_key: str,
                      args: argparse.Namespace) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """A warm-up on each server, then ``--rounds`` saturated runs on each, alternating: the same
    prompts on either server, round by round."""

    def sender(prompts: int, key: str | None) -> list[TenantLoad]:
        return [TenantLoad(FLOODER, 1.0, key, None, prompts)]

    print(f"throughput without tenants and with keys and limits, alternating: {args.rounds} rounds of "
          f"{args.overhead_prompts} requests at once on each", flush=True)
    run_phase(open_settings, "warm-up", sender(WARMUP_PROMPTS, None))
    run_phase(keyed_settings, "warm-up", sender(WARMUP_PROMPTS, api_key))
    open_rounds, keyed_rounds = [], []
    for round_index in range(args.rounds):
        open_rounds.append(run_phase(open_settings, f"throughput-{round_index}", sender(args.overhead_prompts, None)))
        keyed_rounds.append(run_phase(keyed_settings, f"throughput-{round_index}",
                                      sender(args.overhead_prompts, api_key)))
    return open_rounds, keyed_rounds


@dataclass(frozen=True)
class TenantsRun:
    """Every phase's figures (as :func:`run_phase` returns them), the served model's name and the tenants' weights."""

    model: str
    weights: dict[str, float]
    open_rounds: list[dict[str, Any]]
    keyed_rounds: list[dict[str, Any]]
    fairness: dict[str, Any]
    alone: dict[str, Any]
    flooded: dict[str, Any]


def run_tenants_bench(args: argparse.Namespace) -> TenantsRun:
    """Both servers started, the throughput rounds alternating between them, then the fairness and flood
    phases on the one with tenants; both servers are stopped when it returns."""
    folder = Path(tempfile.mkdtemp(prefix="autoglm-bench-tenants-"))
    serve_args = f"{args.serve_args} --max-num-seqs {args.max_num_seqs}"
    tenants = write_bench_tenants(folder / "tenants.yaml", dict(zip((FLOODER, VICTIM), args.weights)))
    keyed_args = (f"{serve_args} --tenants-file {shlex.quote(str(tenants.path))} "
                  f"--usage-db {shlex.quote(str(folder / 'usage.sqlite'))}")
    # Both servers up at once, the throughput rounds alternating between them, so that the
    # machine's drift over the run falls on both alike; the one not measured sits idle.
    open_server = start_server(args.port, args.model, serve_args, folder / "server-open.log")
    try:
        server = start_server(args.port + 1, args.model, keyed_args, folder / "server-tenants.log")
    except BaseException:
        open_server.stop()
        raise
    try:
        settings = phase_settings(server.base_url, tenants.keys[FLOODER], args)
        open_rounds, keyed_rounds = throughput_rounds(
            phase_settings(open_server.base_url, None, args), settings, tenants.keys[FLOODER], args)
        open_server.stop()

        def load(name: str, prompts: int, rate: float | None = None, start_s: float = 0.0) -> TenantLoad:
            return TenantLoad(name, tenants.weights[name], tenants.keys[name], rate, prompts, start_s)

        print(f"fairness: {FLOODER} and {VICTIM} send {args.backlog_prompts} requests each at once", flush=True)
        fairness = run_phase(settings, "fairness", [load(FLOODER, args.backlog_prompts),
                                                   load(VICTIM, args.backlog_prompts)])
        victim = load(VICTIM, args.victim_prompts, args.victim_rate, args.victim_delay_s)
        print(f"flood: {VICTIM}'s {args.victim_prompts} requests alone, then beside {args.flood_prompts} of "
              f"{FLOODER}'s", flush=True)
        alone = run_phase(settings, "alone", [victim])
        flooded = run_phase(settings, "flooded", [load(FLOODER, args.flood_prompts), victim])
    finally:
        open_server.stop()
        server.stop()
    return TenantsRun(settings.model, tenants.weights, open_rounds, keyed_rounds, fairness, alone, flooded)
