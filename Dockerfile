# The CPU image: `autoglm serve` on port 8000 with the embedded default model, which ships inside the
# package, so the image serves with no volume. Build from the repository root:
#   docker build -t open-autoglm:cpu .
# Any setting passes as a flag after the image name or as an AUTOGLM_<SETTING> variable; a checkpoint of
# your own mounts as a volume: -v /models/x:/models/x:ro -e AUTOGLM_MODEL=/models/x
# Give `docker stop` (default 10 s) more than the drain: docker run --stop-timeout 40 ...
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
# PyPI's default torch wheel carries CUDA libraries (gigabytes); the CPU index holds the CPU-only build.
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python -m venv /opt/autoglm
ENV PATH=/opt/autoglm/bin:$PATH
WORKDIR /src
COPY pyproject.toml README.md ./
COPY autoglm ./autoglm
# Only what serving needs: the package and its redis extra (rate limits and response cache shared by
# replicas). torch's CPU build is found on the CPU index (its +cpu versions rank above PyPI's), the rest on
# PyPI; every version bound is pyproject.toml's, which hadolint cannot read through a local path.
# hadolint ignore=DL3013
RUN pip install --index-url "${TORCH_INDEX_URL}" --extra-index-url https://pypi.org/simple ".[redis]"

FROM ${PYTHON_IMAGE}
# The engine compiles its CPU kernels for the machine it runs on, once, in the background (cached under
# ~/.cache/autoglm/kernels); without a compiler it serves on PyTorch's kernels alone. Debian's g++ is
# the stable release's, so it is not pinned.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends g++ \
    && rm -rf /var/lib/apt/lists/*
RUN useradd --create-home --uid 10001 --user-group autoglm
COPY --from=build /opt/autoglm /opt/autoglm
# AUTOGLM_DRAIN_TIMEOUT_S is the server's own default, written out: the stop timeouts of compose and
# Kubernetes are sized from it (tests/deploy check they stay above it).
ENV PATH=/opt/autoglm/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    AUTOGLM_HOST=0.0.0.0 \
    AUTOGLM_PORT=8000 \
    AUTOGLM_DRAIN_TIMEOUT_S=30
USER 10001
WORKDIR /home/autoglm
EXPOSE 8000
# The first SIGTERM drains: new requests get 503 while open ones have drain_timeout_s to finish.
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=10s --timeout=5s --start-period=120s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:' + os.environ['AUTOGLM_PORT'] + '/health', timeout=4)"]
ENTRYPOINT ["autoglm", "serve"]
