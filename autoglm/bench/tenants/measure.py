"""``bench tenants``' phases: some tenants' requests to one server, and what each tenant got; the throughput
rounds alternate between the server without tenants and the one with them."""
from __future__ import annotations

import argparse
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autoglm.bench.lib.client import CompletionTarget
from autoglm.bench.lib.datasets import ServeRequest, random_requests
from autoglm.bench.lib.errors import ServeBenchError
from autoglm.bench.lib.rate_runner import rate_label, run_at_rate, tenant_sends
from autoglm.bench.lib.serve_metrics import aggregate
from autoglm.bench.lib.tenant_load import TenantLoad
from autoglm.bench.lib.tenant_metrics import tenant_results
from autoglm.bench.tenants.tenants_file import FLOODER

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
    """The served model's name, and its tokenizer from the folder it names (the server runs here)."""
    from transformers import AutoTokenizer

    from autoglm.bench.lib.client import fetch_models

    card = fetch_models(base_url, api_key)[0]
    root = card.get("root")
    if not isinstance(root, str) or not Path(root).is_dir():
        raise ServeBenchError(f"the server names no model folder on this machine ({root!r}) to draw prompts with")
    return PhaseSettings(base_url, card["id"], AutoTokenizer.from_pretrained(root), args.input_len, args.output_len,
                         args.seed, args.timeout_s)


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
