# Two entry points: `make demo` and `make test`. Both set up .venv on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint perf clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python examples/demo.py

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy --strict objsdk

test: lint
	$(BIN)/python -m pytest

perf: $(STAMP)
	cd perf && ../$(BIN)/python bench_read.py --runs 9
	cd perf && ../$(BIN)/python bench_tar.py --runs 9
	cd perf && ../$(BIN)/python bench_faults.py --runs 7
	cd perf && ../$(BIN)/python bench_readahead.py --runs 5
	cd perf && ../$(BIN)/python bench_upload.py --runs 5
	cd perf && ../$(BIN)/python bench_download.py --runs 7

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .mypy_cache .ruff_cache .hypothesis
