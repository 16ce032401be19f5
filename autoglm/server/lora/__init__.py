"""LoRA adapters served beside their base model: each is a served version that shares its base's engine and
runs its requests with the adapter (see docs/SERVING.md and docs/MODELS.md)."""
