# Two entry points: `make demo` and `make test`. Both build .venv from nothing.
# Also: `make test-fast` (the tests that start no process, about a minute), and `make gpu-selftest`,
# which runs with the Python you name (PY=...), not .venv: on a GPU machine, your training
# environment's Python with its CUDA build of torch.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
TORCH_VERSION := 2.13.0
STAMP := $(VENV)/.installed
# pip prints a warning per missing local mirror folder on this workplace; keep the log readable
# without hiding pip's exit status.
SHELL := /bin/bash
.SHELLFLAGS := -eo pipefail -c
QUIET_PIP := 2>&1 | { grep -v "is ignored: it is neither a file nor a directory" || true; }

.PHONY: demo test test-durations test-fast test-under-load gpu-selftest venv docs catalogue-index bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	# The CPU build of torch first: a plain `torch` requirement would pull a 5 GB CUDA build.
	$(BIN)/python -m pip install -q torch==$(TORCH_VERSION) $(QUIET_PIP) || \
	  $(BIN)/python -m pip install -q torch==$(TORCH_VERSION) --index-url https://download.pytorch.org/whl/cpu $(QUIET_PIP)
	$(BIN)/python -m pip install -q -e '.[dev]' $(QUIET_PIP)
	touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	-$(BIN)/ddpdoctor check --no-comm
	$(BIN)/ddpdoctor comm --cpu --nproc 2
	$(BIN)/ddpdoctor probe --cpu --nproc 2

# Two pytest workers (pytest-xdist): most of the suite's wall time is process tests waiting (ranks starting in
# other processes, deadlines), not CPU. Measured 2026-12-05 on the shared 2-core machine at load ~8: the whole
# suite 1596 s with 2 workers (CPU 900 s) against ~2750 s in one; a 5-test subset of test_run_faults.py 72 s vs 165 s.
# Each test carries its own process mark and port, and deadlines stretch with the measured slowness (tests/machine.py),
# so two at once are one more busy process to them. JOBS=0 runs them in this process, one at a time.
# Tests marked `exclusive` judge how the host shares its CPUs (a rank pinned beside a hog, time slices): a second
# worker's ranks on the same cores change what they measure (a pinned-hog test saw both ranks equally slow), so
# they run after the others, one at a time.
JOBS ?= 2
# Only the files that hold exclusive tests are collected for their run alone (collecting the whole suite again took
# 13.6 s of the 104 s that run took at a339663).
EXCLUSIVE_FILES = $(shell grep -l "mark.exclusive" tests/test_*.py)
XDIST = $(if $(filter 0,$(JOBS)),-p no:xdist,-n $(JOBS) --dist worksteal)

# Every test process (ranks, launchers, the CLI) imports ddpdoctor: compile it once first. Where PYTHONDONTWRITEBYTECODE
# is set (this workplace sets it) no process writes the .pyc files, and each would compile the package again
# (~0.3 s of CPU for a process that loads the checks; two process tests: 23.1 -> 21.5 s CPU). compileall writes
# them whatever that variable says.
PYC = $(BIN)/python -m compileall -q ddpdoctor > /dev/null

test: $(STAMP)
	$(PYC)
	$(BIN)/python -m pytest -q $(XDIST) -m "not exclusive"
	$(BIN)/python -m pytest -q -p no:xdist -m exclusive $(EXCLUSIVE_FILES)

# The suite runs longest test first (tests/schedule.py); this records each test's time for that order.
test-durations: $(STAMP)
	rm -f tests/data/durations.json.new
	$(PYC)
	DDPDOCTOR_TEST_DURATIONS_OUT=tests/data/durations.json.new $(BIN)/python -m pytest -q $(XDIST) -m "not exclusive"
	DDPDOCTOR_TEST_DURATIONS_OUT=tests/data/durations.json.new $(BIN)/python -m pytest -q -p no:xdist -m exclusive $(EXCLUSIVE_FILES)
	mv tests/data/durations.json.new tests/data/durations.json

test-fast: $(STAMP)
	$(PYC)
	$(BIN)/python -m pytest -q -m "not slow" $(XDIST)

# The whole suite RUNS times in a row against BUSY processes spinning on the cores (flake hunting).
RUNS ?= 3
BUSY ?= 2
test-under-load: $(STAMP)
	PY=$(BIN)/python BUSY=$(BUSY) benchmarks/under_load.sh $(RUNS)

# No venv, no install: ddpdoctor runs from this checkout with $(PY), which needs torch (CUDA build),
# transformers, click, psutil and nvidia-ml-py. Without a GPU it says so and exits 0.
gpu-selftest:
	$(PY) benchmarks/gpu_selftest.py $(SELFTEST_ARGS)

docs: $(STAMP)
	$(BIN)/ddpdoctor checks --format markdown > docs/checks.md

# What the triage matcher derives from each catalogue pattern, written once (ddpdoctor/data/messages_derived.json):
# run it after editing ddpdoctor/data/messages.json (an entry it does not describe is derived at run time: slower only)
catalogue-index: $(STAMP)
	$(BIN)/python -c "from ddpdoctor.facts import messages; print(messages.write_derived(), 'entries')"

bench: $(STAMP)
	$(BIN)/python benchmarks/run_all.py

clean:
	rm -rf $(VENV) build *.egg-info
