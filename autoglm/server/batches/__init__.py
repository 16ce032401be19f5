"""OpenAI's Files and Batch APIs: uploads kept on disk, batches whose lines run as their tenant's own requests."""
