"""Who runs each step: the scheduler, its policies, the fair share between tenants, and the KV blocks."""
