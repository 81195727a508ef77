# Two entry points: `make demo` (its own small .venv-demo) and `make test` (.venv, with
# the development tools). Each sets its venv up on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The demo's own venv: the library and its runtime dependencies, nothing else
# (a regular install: a wheel, as users get it).
DEMO_VENV := .venv-demo
DEMO_STAMP := $(DEMO_VENV)/.installed
# A second venv with the lowest versions pyproject allows, so the floors stay true.
MIN_VENV := .venv-min
MIN_STAMP := $(MIN_VENV)/.installed

.PHONY: demo test test-minio test-others test-moto test-min test-torch lint perf bench bench-datasets clean

$(STAMP): pyproject.toml constraints-dev.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]' -c constraints-dev.txt
	touch $(STAMP)

$(MIN_STAMP): pyproject.toml constraints-min.txt constraints-dev.txt
	$(PYTHON) -m venv $(MIN_VENV)
	$(MIN_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(MIN_VENV)/bin/python -m pip install --quiet -e '.[dev]' -c constraints-min.txt \
		-c constraints-dev.txt
	touch $(MIN_STAMP)

$(DEMO_STAMP): pyproject.toml $(shell find objsdk -name '*.py')
	$(PYTHON) -m venv $(DEMO_VENV)
	$(DEMO_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(DEMO_VENV)/bin/python -m pip install --quiet .
	touch $(DEMO_STAMP)

demo: $(DEMO_STAMP)
	$(DEMO_VENV)/bin/python examples/demo.py

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy --strict objsdk
	$(BIN)/lint-imports

# Everything on MinIO; the server-neutral integration tests again on moto's server (a
# second S3 implementation: see docs/compatibility.md); the minimum versions; torch.
# Two passes at a time: the suite on MinIO (its output as it runs) beside the other three
# in turn (each one's output when it ends). Much of each pass waits on a server, a
# timeout or a subprocess, so on 2 cores the four take 16 minutes this way and 27 one
# after another (docs/development.md). Each pass starts its own servers on free ports.
test: lint
	$(MAKE) --no-print-directory -j2 test-minio test-others

test-others:
	+@$(MAKE) --no-print-directory --output-sync=target test-moto test-min test-torch

test-minio: $(STAMP)
	$(BIN)/python -m pytest

test-moto: $(STAMP)
	$(BIN)/python -m pytest -q --s3-server=moto

# The suite again on the minimum versions of the runtime dependencies. Left out: the
# end-to-end runs of the tools built on the client (the console script in subprocesses,
# fsspec's and s3fs's own suites, pandas/Dask, the perf suite's quick mode and perf scripts,
# docs and examples, the first-contact checks in a regular install): they reach HTTP
# only through the same client, which the rest of the suite covers, and would double
# CI's time; the transfers of 1 GiB and the killed uploads, whose size and subprocesses
# change the plans, not the requests the dependencies send; and the 75 s of refreshed
# credentials, whose requests the other credential tests send too.
MIN_SKIP := --ignore=tests/test_cli.py --ignore=tests/test_filesystem_abstract.py \
	--ignore=tests/test_filesystem_dataframes.py --ignore=tests/test_bench_quick.py \
	--ignore=tests/test_filesystem_s3fs_suite.py --ignore=tests/test_perf_scripts.py \
	--ignore=tests/test_docs_snippets.py --ignore=tests/test_examples.py \
	--ignore=tests/test_download_large.py --ignore=tests/test_transfers_large.py \
	--ignore=tests/test_first_contact.py --ignore=tests/test_first_contact_cli.py \
	--ignore=tests/test_upload_killed.py --ignore=tests/test_upload_killed_large.py \
	--ignore=tests/test_credential_refresh_minio.py
test-min: $(MIN_STAMP)
	$(MIN_VENV)/bin/python -c "import requests, urllib3; print('minimum versions: requests', requests.__version__, 'urllib3', urllib3.__version__)"
	$(MIN_VENV)/bin/python -m pytest -q $(MIN_SKIP)

# tests/torch/ under real torch, in a venv of its own outside the clone (~/.cache/objsdk,
# reused while the torch extra's requirements are unchanged): see tests/torch/torch_venv.py.
test-torch: $(STAMP)
	$(BIN)/python tests/torch/torch_venv.py -q tests/torch

# The perf suite (network profiles, peers, plots): see docs/perf-suite.md.
bench: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[perf]'
	$(BIN)/python perf/run.py --quick

# perf/bench_datasets.py with its DataLoader section (torch, webdataset, s3torchconnector):
# in .venv-datasets, layered on the torch venv (see perf/datasets_venv.py).
bench-datasets: $(STAMP)
	$(BIN)/python perf/datasets_venv.py

perf: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[perf]'
	cd perf && ../$(BIN)/python bench_read.py --runs 9
	cd perf && ../$(BIN)/python bench_lines.py --runs 5
	cd perf && ../$(BIN)/python bench_fsspec.py --runs 7
	cd perf && ../$(BIN)/python bench_tar.py --runs 9
	cd perf && ../$(BIN)/python bench_faults.py --runs 7
	cd perf && ../$(BIN)/python bench_readahead.py --runs 5
	cd perf && ../$(BIN)/python bench_upload.py --runs 5
	cd perf && ../$(BIN)/python bench_upload_parts.py --runs 7
	cd perf && ../$(BIN)/python bench_download.py --runs 7
	cd perf && ../$(BIN)/python bench_datasets.py
	cd perf && ../$(BIN)/python bench_shm.py
	cd perf && ../$(BIN)/python bench_verify.py --runs 9
	cd perf && ../$(BIN)/python bench_requests.py --runs 5
	cd perf && ../$(BIN)/python bench_disk.py --runs 5

clean:
	rm -rf $(VENV) $(MIN_VENV) $(DEMO_VENV) build *.egg-info .pytest_cache .mypy_cache .ruff_cache .hypothesis
