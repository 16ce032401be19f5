"""Answers of deterministic requests, kept by model version, tenant and request, and served again."""
