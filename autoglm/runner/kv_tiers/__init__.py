"""Moving whole KV blocks between this rank's pool and the lower tiers: host memory, then disk files."""
