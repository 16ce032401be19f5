# Entry points: `make serve`, `make test` and `make demo`. Each installs into .venv first:
# serving needs only the package itself; the test suite also installs the `test` and `clients` extras.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
space := $(subst ,, )

.PHONY: install install-test redis-server serve test demo clean

# Each install step says what it installs before pip, quiet, works for up to a minute.
$(PY):
	@echo "creating $(VENV) and updating its pip"
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip

# torch is pinned to the CPU build that lies on this machine's disk when none is installed;
# a looser range would pull a multi-GB CUDA build.
$(VENV)/.installed-torch: $(PY)
	@$(PY) -c "import torch" 2>/dev/null || \
		{ echo "installing torch 2.13.0 into $(VENV) (first time: a few minutes)"; $(PIP) install --quiet torch==2.13.0; }
	touch $@

$(VENV)/.installed-serve: $(VENV)/.installed-torch pyproject.toml
	@echo "installing open-autoglm and its serving dependencies into $(VENV) (first time: about a minute)"
	$(PIP) install --quiet -e .
	touch $@

# The CPU kernels' build (under a minute on 2 cores, once per torch version) starts as soon as torch and ninja are in,
# so it runs while the rest installs; the tests' own start of it waits on the same lock.
$(VENV)/.installed-test: $(VENV)/.installed-torch pyproject.toml
	@echo "installing ninja, then open-autoglm with its test and client extras into $(VENV) (first time: a few" \
		"minutes; the CPU kernels build meanwhile, logged in $(VENV)/kernel-build.log)"
	$(PIP) install --quiet ninja
	$(PY) -c "from autoglm.kernels.cpu_extension import wait_for_cpu_kernels; wait_for_cpu_kernels(900)" \
		>$(VENV)/kernel-build.log 2>&1 &
	$(PIP) install --quiet -e ".[test,clients]"
	touch $(VENV)/.installed-serve $@

install: $(VENV)/.installed-serve

install-test: $(VENV)/.installed-test

serve: install
	$(VENV)/bin/autoglm serve $(ARGS)

# On a CPU with bfloat16 matrix units, the tests whose path depends on the CPU (marked cpu_isa: kernels,
# kernel and dtype choice, bfloat16 compute) run a second time on the path of a CPU without them (the
# engine's CPU-feature override, and oneDNN's), so one machine shows that both kinds pass. A test that
# pins a CPU without those units itself runs that path in the first pass already and is not marked.
BF16_FLAGS := avx512_bf16 amx_bf16

# The tenants' shared rate limits are tested against a real redis-server, started by each test.
redis-server:
	@command -v redis-server >/dev/null || { \
		if [ "$$(id -u)" = 0 ]; then apt-get install -y -qq redis-server >/dev/null \
			|| { apt-get update -qq && apt-get install -y -qq redis-server >/dev/null; }; \
		else echo "redis-server is missing: install it with 'sudo apt-get install redis-server' (Debian/Ubuntu)"; exit 1; fi; }

# Both passes always run; make fails at the end if either failed.
test: install-test redis-server
	@status=0; $(PY) -m pytest -q || status=1; \
	if grep -qwE '$(subst $(space),|,$(BF16_FLAGS))' /proc/cpuinfo 2>/dev/null; then \
		echo "again as on a CPU without bfloat16 units: AUTOGLM_CPU_DISABLE_FLAGS=$(BF16_FLAGS) ONEDNN_MAX_CPU_ISA=AVX512_CORE"; \
		AUTOGLM_CPU_DISABLE_FLAGS="$(BF16_FLAGS)" ONEDNN_MAX_CPU_ISA=AVX512_CORE $(PY) -m pytest -q -m cpu_isa || status=1; \
	fi; \
	if [ $$status != 0 ]; then echo "make test: a pass failed (see above)"; fi; exit $$status

demo: install
	$(VENV)/bin/autoglm generate "ROMEO:" --max-tokens 64

clean:
	rm -rf $(VENV) build *.egg-info
