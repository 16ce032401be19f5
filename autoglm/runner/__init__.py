"""Takes a step plan, runs the model on it and samples: the engine-facing side of the device."""
