#!/usr/bin/env bash
# The GPU fast path's checks, for a session on a lent CUDA machine: run from the repository root as
#   OUT=/some/folder bash tools/gpu_check.sh
# It runs the project from source with the machine's own PyTorch and Triton (it installs nothing) and
# goes in priority order, so a run cut short still leaves the most important results in $OUT:
#   1. the CUDA kernel and engine tests, graphs on and off;
#   2. qwen2.5-0.5b shape, bfloat16: batch-1 latency and offline throughput against transformers with
#      graphs on, then the engine alone with graphs off (--enforce-eager), then with graphs on but
#      async scheduling off (--async-scheduling false), and a profiled fixed run;
#   3. the engine, model and server suites on CUDA, graphs on and off;
#   4. llama-3.2-1b shape: batch-1 latency and mixed throughput, graphs on.
# Each step's output is in $OUT/<step>.log, its exit status in $OUT/progress.txt; the benchmarks also
# write JSON. STEP_TIMEOUT (seconds, default 480) bounds each step.
set -u
OUT=${OUT:?set OUT to the folder the results go to}
PYTHON=${PYTHON:-python3}
STEP_TIMEOUT=${STEP_TIMEOUT:-480}
MODELS=${MODELS:-/tmp/autoglm-gpu-check}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
mkdir -p "$OUT" "$MODELS"

step() {  # step NAME COMMAND...: run it under the time limit, its output in $OUT/NAME.log
    local name=$1; shift
    echo "$(date -u +%T) start $name: $*" >> "$OUT/progress.txt"
    timeout "$STEP_TIMEOUT" "$@" > "$OUT/$name.log" 2>&1
    echo "$(date -u +%T) end $name: exit $?" >> "$OUT/progress.txt"
}

autoglm() { "$PYTHON" -m autoglm "$@"; }
pytest_run() { "$PYTHON" -m pytest -q -p no:cacheprovider -rf "$@"; }

"$PYTHON" -c "import torch, triton; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'triton',
triton.__version__, torch.cuda.get_device_name())" > "$OUT/versions.txt" 2>&1
nvidia-smi >> "$OUT/versions.txt" 2>&1

# 1. The kernel against the torch backend, the engine against transformers, graphs on and off.
step cuda-tests pytest_run tests/attention/test_triton_cuda.py tests/engine/test_cuda_engine.py \
    tests/engine/test_memory_profile.py tests/engine/test_padded_decode.py tests/attention/test_triton_backend.py \
    tests/engine/test_async_scheduling_cuda.py tests/engine/test_async_scheduling.py

# 2. qwen2.5-0.5b shape.
QWEN=$MODELS/qwen05b
step make-qwen autoglm bench make-model --shape qwen2.5-0.5b --out "$QWEN"
step roofline autoglm bench roofline --device cuda --model "$QWEN" --output-json "$OUT/roofline-h200.json"
step latency-qwen-graphs autoglm bench latency -q --model "$QWEN" --device cuda --input-lens 128,512 \
    --output-len 128 --num-iters 3 --roofline "$OUT/roofline-h200.json" \
    --output-json "$OUT/latency-qwen2.5-0.5b-graphs.json"
step latency-qwen-eager autoglm bench latency -q --model "$QWEN" --device cuda --enforce-eager --baseline none \
    --input-lens 128,512 --output-len 128 --num-iters 3 --output-json "$OUT/latency-qwen2.5-0.5b-eager.json"
step throughput-qwen-graphs autoglm bench throughput -q --model "$QWEN" --device cuda --max-context-len 2048 \
    --workload all --output-json "$OUT/throughput-qwen2.5-0.5b-graphs.json"
step throughput-qwen-eager autoglm bench throughput -q --model "$QWEN" --device cuda --max-context-len 2048 \
    --enforce-eager --baseline none --workload all --output-json "$OUT/throughput-qwen2.5-0.5b-eager.json"
step latency-qwen-sync autoglm bench latency -q --model "$QWEN" --device cuda --async-scheduling false \
    --baseline none --input-lens 128 --output-len 128 --num-iters 3 --output-json "$OUT/latency-qwen2.5-0.5b-sync.json"
step throughput-qwen-sync autoglm bench throughput -q --model "$QWEN" --device cuda --max-context-len 2048 \
    --async-scheduling false --baseline none --workload mixed \
    --output-json "$OUT/throughput-qwen2.5-0.5b-sync.json"
step throughput-qwen-profile autoglm bench throughput -q --model "$QWEN" --device cuda --max-context-len 2048 \
    --baseline none --workload fixed --profile --output-json "$OUT/throughput-fixed-profile-qwen2.5-0.5b.json"

# 3. Every engine, model and server test with the engine on the GPU (device auto), graphs on and off.
step suite-graphs pytest_run tests/engine tests/models tests/server
step suite-eager pytest_run --enforce-eager tests/engine tests/models tests/server \
    --deselect tests/engine/test_cuda_engine.py

# 4. llama-3.2-1b shape.
LLAMA=$MODELS/llama1b
step make-llama autoglm bench make-model --shape llama-3.2-1b --out "$LLAMA"
step latency-llama-graphs autoglm bench latency -q --model "$LLAMA" --device cuda --input-lens 128 \
    --output-len 128 --num-iters 3 --output-json "$OUT/latency-llama-3.2-1b-graphs.json"
step throughput-llama-graphs autoglm bench throughput -q --model "$LLAMA" --device cuda --max-context-len 2048 \
    --workload mixed --output-json "$OUT/throughput-llama-3.2-1b-graphs.json"
echo "$(date -u +%T) done" >> "$OUT/progress.txt"
