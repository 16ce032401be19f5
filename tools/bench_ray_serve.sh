#!/usr/bin/env bash
# The Ray Serve figures of docs/PERFORMANCE.md, from the embedded model on this machine:
#   1. the time to first token at low load from one `autoglm serve`, then through Ray's proxy to
#      2 replicas (one thread each): what the proxy and the ingress hop add;
#   2. the prefix-cache hit rate over both replicas on the shared-prefix dataset (8 documents),
#      with cache-aware routing on and then off.
# Each run writes a results file under docs/results/; then `python -m autoglm.bench.figures docs/PERFORMANCE.md`.
# Run it from the repository root on an idle machine: `bash tools/bench_ray_serve.sh`.
set -euo pipefail

PY=${PY:-.venv/bin/python}
RESULTS=${RESULTS:-docs/results}
PORT=${PORT:-8310}
METRICS_PORT=${METRICS_PORT:-9410}
TOKENIZER=autoglm/assets/glm4-tiny-shakespeare
# 8 documents of 160 tokens: together about what one engine's 2 MiB cache holds (bfloat16 KV), half of them easily.
SHARED_PREFIX=(--dataset shared-prefix --shared-prefix-count 8 --shared-prefix-len 160 --shared-prefix-question-len 16
               --random-output-len 8 --num-prompts 96 --request-rate 4)
LOW_LOAD=(--dataset random --random-input-len 64 --random-output-len 16 --num-prompts 60 --request-rate 2)
SERVER=(--num-threads 1 --kv-cache-memory 2MiB --port "$PORT")
RAY=(--ray --ray-min-replicas 2 --ray-max-replicas 2 --ray-metrics-port "$METRICS_PORT")
METRICS=(--metrics-url "http://127.0.0.1:$METRICS_PORT/metrics" --metrics-url "http://127.0.0.1:$((METRICS_PORT + 1))/metrics")

server_pid=""
start() {  # start `autoglm serve ARGS...` and wait until it answers
    "$PY" -m autoglm serve "${SERVER[@]}" "$@" > "/tmp/bench-ray-serve-$PORT.log" 2>&1 &
    server_pid=$!
    until curl -sf "http://127.0.0.1:$PORT/health" > /dev/null; do
        kill -0 "$server_pid" || { cat "/tmp/bench-ray-serve-$PORT.log"; exit 1; }
        sleep 1
    done
}
stop() {
    kill -TERM "$server_pid"
    wait "$server_pid" || true
}
bench() {  # bench NAME ARGS...: one run into $RESULTS/NAME.json
    local name=$1
    shift
    "$PY" -m autoglm bench serve --base-url "http://127.0.0.1:$PORT" --tokenizer "$TOKENIZER" "$@" \
        --output-json "$RESULTS/$name.json"
}
trap '[ -n "$server_pid" ] && kill "$server_pid" 2> /dev/null || true' EXIT

start
bench serve-ray-low-load-one-server-cpu "${LOW_LOAD[@]}"
bench serve-ray-shared-prefix-one-server-cpu "${SHARED_PREFIX[@]}" --metrics-url "http://127.0.0.1:$PORT/metrics"
stop

start "${RAY[@]}"
bench serve-ray-low-load-2-replicas-cpu "${LOW_LOAD[@]}"
bench serve-ray-shared-prefix-routing-on-cpu "${SHARED_PREFIX[@]}" "${METRICS[@]}"
stop

start "${RAY[@]}" --no-ray-prefix-routing
bench serve-ray-shared-prefix-routing-off-cpu "${SHARED_PREFIX[@]}" "${METRICS[@]}"
stop
