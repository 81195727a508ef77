# Two entry points: `make demo` and `make test`. Both set up .venv on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# A second venv with the lowest versions pyproject allows, so the floors stay true.
MIN_VENV := .venv-min
MIN_STAMP := $(MIN_VENV)/.installed

.PHONY: demo test test-min lint perf bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

$(MIN_STAMP): pyproject.toml constraints-min.txt
	$(PYTHON) -m venv $(MIN_VENV)
	$(MIN_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(MIN_VENV)/bin/python -m pip install --quiet -e '.[dev]' -c constraints-min.txt
	touch $(MIN_STAMP)

demo: $(STAMP)
	$(BIN)/python examples/demo.py

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy --strict objsdk
	$(BIN)/lint-imports

# Everything on MinIO, then the server-neutral integration tests again on moto's server
# (a second S3 implementation: see docs/compatibility.md).
test: lint
	$(BIN)/python -m pytest
	$(BIN)/python -m pytest -q --s3-server=moto
	$(MAKE) test-min

# The suite again on the minimum versions of requests, urllib3 and crc32c. Left out: the
# end-to-end runs of the tools built on the client (the console script in subprocesses,
# fsspec's own suite, pandas/Dask, the perf suite's quick mode, docs and examples): they
# reach HTTP only through the same client, which the rest of the suite covers, and would
# double CI's time.
MIN_SKIP := --ignore=tests/test_cli.py --ignore=tests/test_filesystem_abstract.py \
	--ignore=tests/test_filesystem_dataframes.py --ignore=tests/test_bench_quick.py \
	--ignore=tests/test_docs_snippets.py --ignore=tests/test_examples.py
test-min: $(MIN_STAMP)
	$(MIN_VENV)/bin/python -c "import requests, urllib3; print('minimum versions: requests', requests.__version__, 'urllib3', urllib3.__version__)"
	$(MIN_VENV)/bin/python -m pytest -q $(MIN_SKIP)

# The perf suite (network profiles, peers, plots): see docs/perf-suite.md.
bench: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[perf]'
	$(BIN)/python perf/run.py --quick

perf: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[perf]'
	cd perf && ../$(BIN)/python bench_read.py --runs 9
	cd perf && ../$(BIN)/python bench_tar.py --runs 9
	cd perf && ../$(BIN)/python bench_faults.py --runs 7
	cd perf && ../$(BIN)/python bench_readahead.py --runs 5
	cd perf && ../$(BIN)/python bench_upload.py --runs 5
	cd perf && ../$(BIN)/python bench_upload_parts.py --runs 7
	cd perf && ../$(BIN)/python bench_download.py --runs 7
	cd perf && ../$(BIN)/python bench_datasets.py
	cd perf && ../$(BIN)/python bench_shm.py

clean:
	rm -rf $(VENV) $(MIN_VENV) build *.egg-info .pytest_cache .mypy_cache .ruff_cache .hypothesis
