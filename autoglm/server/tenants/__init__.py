"""Tenants and their API keys: who may call the server, with which role, for which models."""
