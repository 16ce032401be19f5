"""``autoglm bench pp``: the throughput of a pipeline-parallel engine against one process, on one machine."""
