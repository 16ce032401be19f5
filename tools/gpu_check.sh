#!/usr/bin/env bash
# The GPU fast path's checks, for a session on a lent CUDA machine: run from the repository root as
#   OUT=/some/folder PARTS=1,2 bash tools/gpu_check.sh
# It runs the project from source with the machine's own PyTorch and Triton (it installs nothing). A
# device call runs at most 600 s and a session has 15 minutes of device time, start-up included, so
# the work is split into parts, in priority order, each step writing to $OUT as it goes:
#   1. the CUDA kernel and engine tests, graphs on and off (about 3 minutes);
#   2. qwen2.5-0.5b shape, bfloat16: batch-1 latency and offline throughput against transformers with
#      graphs on, then the engine alone with graphs off (--enforce-eager) (about 6 minutes);
#   3. qwen2.5-0.5b shape with async scheduling off, a profiled fixed run, and a fresh roofline;
#   4. llama-3.2-1b shape: batch-1 latency and mixed throughput, graphs on;
#   5. the engine, model and server suites on CUDA, graphs on and off (a session of its own: well
#      over 600 s).
# Parts 1 and 2 fit one call (PARTS=1,2); what device time is left then suits PARTS=3,4.
# Each step's output is in $OUT/<step>.log, its start, end and exit status in $OUT/progress.txt; the
# benchmarks also write JSON. Each step has its own time limit; BUDGET (seconds, default 560) bounds
# the whole run: a step's limit is cut to what is left of it, and a step with under 20 s left is
# skipped, so the call returns with its results before the device's limit. Latency bounds come from the
# H200 roofline in docs/results unless ROOFLINE names another file.
# Packages the GPU machine may lack: xgrammar (the structured-output and tool-call tests then skip,
# saying so; none is in parts 1-4), openai and jsonschema (the server suites of part 5 import them).
set -u
OUT=${OUT:?set OUT to the folder the results go to}
PYTHON=${PYTHON:-python3}
PARTS=${PARTS:-1,2,3,4,5}
BUDGET=${BUDGET:-560}
MODELS=${MODELS:-/tmp/autoglm-gpu-check}
ROOFLINE=${ROOFLINE:-docs/results/roofline-h200.json}
MIN_STEP=20
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
mkdir -p "$OUT" "$MODELS"

part() { [[ ",$PARTS," == *",$1,"* ]]; }

step() {  # step NAME SECONDS COMMAND...: run it under its limit (cut to the budget left), output in $OUT/NAME.log
    local name=$1 limit=$2; shift 2
    local left=$((BUDGET - SECONDS))
    if ((left < MIN_STEP)); then
        echo "$(date -u +%T) skip $name: ${left}s of the ${BUDGET}s budget left" >> "$OUT/progress.txt"
        return
    fi
    ((limit > left)) && limit=$left
    local started=$SECONDS status
    echo "$(date -u +%T) start $name (limit ${limit}s): $*" >> "$OUT/progress.txt"
    timeout -k 10 "$limit" "$@" > "$OUT/$name.log" 2>&1
    status=$?
    echo "$(date -u +%T) end $name: exit $status after $((SECONDS - started))s" >> "$OUT/progress.txt"
}

# Commands, not shell functions: timeout runs a program.
AUTOGLM=("$PYTHON" -m autoglm)
PYTEST=("$PYTHON" -m pytest -q -p no:cacheprovider -rfs)

"$PYTHON" -c "import torch, triton; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'triton',
triton.__version__, torch.cuda.get_device_name())" > "$OUT/versions.txt" 2>&1
nvidia-smi >> "$OUT/versions.txt" 2>&1

QWEN=$MODELS/qwen05b
LLAMA=$MODELS/llama1b
qwen() { [[ -f $QWEN/config.json ]] || step make-qwen 45 "${AUTOGLM[@]}" bench make-model --shape qwen2.5-0.5b --out "$QWEN"; }

if part 1; then  # the kernel against the torch backend, the engine against transformers, graphs on and off
    step cuda-tests 180 "${PYTEST[@]}" tests/attention/test_triton_cuda.py tests/engine/test_cuda_engine.py \
        tests/engine/test_async_scheduling_cuda.py tests/engine/test_memory_profile.py \
        tests/engine/test_padded_decode.py tests/engine/test_async_scheduling.py
fi

if part 2; then
    qwen
    step latency-qwen-graphs 100 "${AUTOGLM[@]}" bench latency -q --model "$QWEN" --device cuda --input-lens 128,512 \
        --output-len 128 --num-iters 3 --roofline "$ROOFLINE" --output-json "$OUT/latency-qwen2.5-0.5b-graphs.json"
    step latency-qwen-eager 45 "${AUTOGLM[@]}" bench latency -q --model "$QWEN" --device cuda --enforce-eager \
        --baseline none --input-lens 128,512 --output-len 128 --num-iters 3 --roofline "$ROOFLINE" \
        --output-json "$OUT/latency-qwen2.5-0.5b-eager.json"
    step throughput-qwen-graphs 120 "${AUTOGLM[@]}" bench throughput -q --model "$QWEN" --device cuda \
        --max-context-len 2048 --workload all --output-json "$OUT/throughput-qwen2.5-0.5b-graphs.json"
    step throughput-qwen-eager 60 "${AUTOGLM[@]}" bench throughput -q --model "$QWEN" --device cuda --max-context-len 2048 \
        --enforce-eager --baseline none --workload all --output-json "$OUT/throughput-qwen2.5-0.5b-eager.json"
fi

if part 3; then
    qwen
    step latency-qwen-sync 40 "${AUTOGLM[@]}" bench latency -q --model "$QWEN" --device cuda --async-scheduling false \
        --baseline none --input-lens 128 --output-len 128 --num-iters 3 --roofline "$ROOFLINE" \
        --output-json "$OUT/latency-qwen2.5-0.5b-sync.json"
    step throughput-qwen-sync 45 "${AUTOGLM[@]}" bench throughput -q --model "$QWEN" --device cuda --max-context-len 2048 \
        --async-scheduling false --baseline none --workload mixed \
        --output-json "$OUT/throughput-qwen2.5-0.5b-sync.json"
    step throughput-qwen-profile 45 "${AUTOGLM[@]}" bench throughput -q --model "$QWEN" --device cuda \
        --max-context-len 2048 --baseline none --workload fixed --profile \
        --output-json "$OUT/throughput-fixed-profile-qwen2.5-0.5b.json"
    step roofline 60 "${AUTOGLM[@]}" bench roofline --device cuda --model "$QWEN" --output-json "$OUT/roofline-h200.json"
fi

if part 4; then
    step make-llama 60 "${AUTOGLM[@]}" bench make-model --shape llama-3.2-1b --out "$LLAMA"
    step latency-llama-graphs 60 "${AUTOGLM[@]}" bench latency -q --model "$LLAMA" --device cuda --input-lens 128 \
        --output-len 128 --num-iters 3 --output-json "$OUT/latency-llama-3.2-1b-graphs.json"
    step throughput-llama-graphs 90 "${AUTOGLM[@]}" bench throughput -q --model "$LLAMA" --device cuda \
        --max-context-len 2048 --workload mixed --output-json "$OUT/throughput-llama-3.2-1b-graphs.json"
fi

if part 5; then  # every engine, model and server test with the engine on the GPU (device auto)
    step suite-graphs 600 "${PYTEST[@]}" tests/engine tests/models tests/server
    step suite-eager 600 "${PYTEST[@]}" --enforce-eager tests/engine tests/models tests/server \
        --deselect tests/engine/test_cuda_engine.py
fi
echo "$(date -u +%T) done ($SECONDS s)" >> "$OUT/progress.txt"
