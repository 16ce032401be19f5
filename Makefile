# Entry points: `make serve`, `make test` and `make demo`. Each installs into .venv first:
# serving needs only the package itself; the test suite also installs the `test` extra.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip

.PHONY: install install-test serve test demo clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip

# torch is pinned to the CPU build that lies on this machine's disk when none is installed;
# a looser range would pull a multi-GB CUDA build.
$(VENV)/.installed-serve: $(PY) pyproject.toml
	$(PY) -c "import torch" 2>/dev/null || $(PIP) install --quiet torch==2.13.0
	$(PIP) install --quiet -e .
	touch $@

$(VENV)/.installed-test: $(VENV)/.installed-serve
	$(PIP) install --quiet -e ".[test]"
	touch $@

install: $(VENV)/.installed-serve

install-test: $(VENV)/.installed-test

serve: install
	$(VENV)/bin/autoglm serve $(ARGS)

test: install-test
	$(PY) -m pytest -q

demo: install
	$(VENV)/bin/autoglm generate "ROMEO:" --max-tokens 64

clean:
	rm -rf $(VENV) build *.egg-info
