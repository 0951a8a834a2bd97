# nvatom: two commands on a fresh machine -- `make demo` (the main job) and `make test`.
# Both create .venv and install what they need by themselves.

PYTHON ?= python3
VENV   := .venv
VPY    := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp
# pytest workers: CI machines have 2 cores.
JOBS   ?= 2

.PHONY: all demo test lint hw bench-layout bench-banks bench-build clean

all: test

$(STAMP): pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(VPY) -m pip install -q --disable-pip-version-check -U pip
	$(VPY) -m pip install -q --disable-pip-version-check -e '.[test,sm70,ir]'
	# pycute (CUTLASS's Python layout model) for cross-checks and the layout benchmark;
	# its wheel's other dependencies are not needed for that.
	$(VPY) -m pip install -q --disable-pip-version-check --no-deps nvidia-cutlass==4.2.0.0
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/nvatom demo

# ruff, then the room table of docs/ARCHITECTURE.md as import contracts ([tool.importlinter])
lint: $(STAMP)
	$(VPY) -m ruff check src tests bench scripts
	$(VENV)/bin/lint-imports --no-cache --no-logo

test: $(STAMP) lint
	$(VPY) -m pytest -q -n $(JOBS) tests

# On a machine with an NVIDIA GPU, from a working tree, with the system python3 that has
# numpy/cupy/pytest (no network needed): runs the `gpu` tests, writes reports/hw/latest.json.
hw:
	PYTHONPATH=src $(PYTHON) scripts/hw_report.py --out reports/hw/latest.json

bench-layout: $(STAMP)
	$(VPY) bench/layout_bench.py

# Python build times: GEMM kernels' PTX, the 300-op IR module (reports/bench/build_time.json).
bench-build: $(STAMP)
	$(VPY) bench/build_time.py

# On a GPU machine (uses ncu when present): predicted vs measured bank conflicts.
bench-banks:
	PYTHONPATH=src $(PYTHON) bench/banks_ncu.py

clean:
	rm -rf build .pytest_cache $(VENV)
