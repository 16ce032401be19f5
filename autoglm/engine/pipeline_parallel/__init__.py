"""Pipeline parallelism's processes: the decoder's layers split into stages, one rank (or one tensor-parallel
group) each; the engine's own process is the last stage, and keeps several batches in the pipe at once."""
