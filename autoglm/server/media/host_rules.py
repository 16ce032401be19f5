"""Which hosts image URLs may be fetched from, and which of them may sit on a private network."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class HostRules:
    """`patterns` as allowed_media_domains gives them: exact host names, or '*.example.com' for its subdomains.

    Only a host the operator named exactly may resolve to a private, loopback or link-local address: a wildcard
    says "their public servers", and a name it matches could be pointed at the server's own network.
    """

    patterns: tuple[str, ...]

    def allows(self, host: str) -> bool:
        host = host.lower().rstrip(".")
        return self.named_exactly(host) or any(
            pattern.startswith("*.") and host.endswith(pattern[1:].lower()) for pattern in self.patterns)

    def named_exactly(self, host: str) -> bool:
        return host.lower().rstrip(".") in {pattern.lower().rstrip(".") for pattern in self.patterns
                                            if not pattern.startswith("*.")}
