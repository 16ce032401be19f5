"""The tenants of a multi-tenant run: who sends, with which key, how much and how fast.

``--tenants A:3,B:1`` names the tenants and the weights their server's tenants file gives them
(the share of served tokens each should get while all wait); ``--tenant-rates``,
``--tenant-prompts`` and ``--tenant-keys`` set each tenant's own rate, number of requests and key.
"""
from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from autoglm.bench.lib.arguments import positive_float, positive_int
from autoglm.bench.lib.errors import ServeBenchError

Value = TypeVar("Value")
NAME_SEPARATOR, KEY_SEPARATOR = ":", "="


@dataclass(frozen=True)
class TenantLoad:
    name: str
    weight: float  # as the server's tenants file has it; the share it should get is weight / sum of weights
    api_key: str | None
    request_rate: float | None  # None: the run's --request-rate
    num_prompts: int
    start_s: float = 0.0  # seconds after the run starts that its first request goes out


def _named(text: str, separator: str, parse: Callable[[str], Value], expected: str,
           default: Value | None = None) -> dict[str, Value]:
    """``NAME<separator>VALUE,...``; with a default, a bare ``NAME`` takes it."""
    named: dict[str, Value] = {}
    for item in text.split(","):
        name, has_value, value = item.strip().partition(separator)
        if not name or (not has_value and default is None):
            raise argparse.ArgumentTypeError(f"expected a comma list of {expected}; got {item!r}")
        if name in named:
            raise argparse.ArgumentTypeError(f"tenant {name!r} appears twice in {text!r}")
        try:
            named[name] = parse(value) if has_value else default
        except argparse.ArgumentTypeError as error:
            raise argparse.ArgumentTypeError(f"tenant {name!r}: {error}") from None
    return named


def tenant_weights(text: str) -> dict[str, float]:
    """``--tenants A:3,B:1``; a bare name has weight 1."""
    return _named(text, NAME_SEPARATOR, positive_float, "TENANT or TENANT:WEIGHT", default=1.0)


def tenant_rates(text: str) -> dict[str, float]:
    """``--tenant-rates A:inf,B:0.5``: requests per second, as ``--request-rate`` takes them."""
    return _named(text, NAME_SEPARATOR, positive_float, "TENANT:RATE (requests per second, or inf)")


def tenant_prompts(text: str) -> dict[str, int]:
    """``--tenant-prompts A:64,B:4``: requests each tenant sends."""
    return _named(text, NAME_SEPARATOR, positive_int, "TENANT:COUNT")


def tenant_keys(text: str) -> dict[str, str]:
    """``--tenant-keys A=KEY,B=KEY``, or a file holding one ``TENANT=KEY`` a line (keeps keys out of ``ps``)."""
    if KEY_SEPARATOR not in text:
        path = Path(text)
        try:
            text = ",".join(line.strip() for line in path.read_text().splitlines() if line.strip())
        except OSError as error:
            raise argparse.ArgumentTypeError(f"expected TENANT=KEY,... or a file of TENANT=KEY lines; "
                                             f"cannot read {path}: {error.strerror}") from None
    return _named(text, KEY_SEPARATOR, str, "TENANT=KEY")


def tenant_loads(weights: Mapping[str, float], rates: Mapping[str, float], prompts: Mapping[str, int],
                 keys: Mapping[str, str], default_prompts: int, default_key: str | None) -> list[TenantLoad]:
    """One load per tenant of ``weights``, in its order; any other name in the other options is an error."""
    for option, named in (("--tenant-rates", rates), ("--tenant-prompts", prompts), ("--tenant-keys", keys)):
        unknown = [name for name in named if name not in weights]
        if unknown:
            raise ServeBenchError(f"{option} names {', '.join(unknown)}, not in --tenants ({', '.join(weights)})")
    return [TenantLoad(name, weight, keys.get(name, default_key), rates.get(name), prompts.get(name, default_prompts))
            for name, weight in weights.items()]
