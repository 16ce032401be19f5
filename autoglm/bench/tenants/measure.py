"""One phase of ``bench tenants``: some tenants' requests to one server, and what each tenant got."""
from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from autoglm.bench.lib.client import CompletionTarget
from autoglm.bench.lib.datasets import ServeRequest, random_requests
from autoglm.bench.lib.rate_runner import rate_label, run_at_rate, tenant_sends
from autoglm.bench.lib.serve_metrics import aggregate
from autoglm.bench.lib.tenant_load import TenantLoad
from autoglm.bench.lib.tenant_metrics import tenant_results

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase


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
