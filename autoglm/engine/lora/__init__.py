"""The engine's LoRA adapters: those loaded in memory (``loaded``) and those in the model's slots (``slot_table``)."""
