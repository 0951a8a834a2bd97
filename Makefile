# nvatom: two commands on a fresh machine -- `make demo` (the main job) and `make test`.
# Both create .venv and install what they need by themselves.

PYTHON ?= python3
VENV   := .venv
VPY    := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp
# pytest workers: CI machines have 2 cores.
JOBS   ?= 2

.PHONY: all demo test lint wheel-check hw sanitize bench-layout bench-banks bench-build fuzz clean

all: test

# Each step says what it does first: on a fresh machine the installs take about 30 s, and
# pip -q prints nothing while it works (without -q it prints hundreds of lines).
$(STAMP): pyproject.toml Makefile
	@echo "nvatom: setting up $(VENV) (first run, or pyproject.toml/Makefile changed; about 30 s)"
	@echo "nvatom: [1/4] creating the virtual environment $(VENV) with $(PYTHON)"
	$(PYTHON) -m venv $(VENV)
	@echo "nvatom: [2/4] upgrading pip"
	$(VPY) -m pip install -q --disable-pip-version-check -U pip
	@echo "nvatom: [3/4] installing nvatom (editable) with numpy, xDSL 0.74.0 (the IR), the CUDA"
	@echo "        12.9 ptxas wheel (sm_70), pytest, ruff, llvmlite, import-linter, build: the longest step"
	$(VPY) -m pip install -q --disable-pip-version-check -e '.[test,sm70,ir]'
	@echo "nvatom: [4/4] installing pycute (nvidia-cutlass 4.2.0.0, without its dependencies)"
	# pycute (CUTLASS's Python layout model) for cross-checks and the layout benchmark;
	# its wheel's other dependencies are not needed for that.
	$(VPY) -m pip install -q --disable-pip-version-check --no-deps nvidia-cutlass==4.2.0.0
	touch $(STAMP)
	@echo "nvatom: $(VENV) is ready"

demo: $(STAMP)
	$(VENV)/bin/nvatom demo

# ruff, then the room table of docs/ARCHITECTURE.md as import contracts ([tool.importlinter])
lint: $(STAMP)
	$(VPY) -m ruff check src tests bench scripts
	$(VENV)/bin/lint-imports --no-cache --no-logo

test: $(STAMP) lint wheel-check
	$(VPY) -m pytest -q -n $(JOBS) tests

# The package as users get it (docs/packaging.md): `python -m build` makes the sdist and, from
# it, the wheel; the wheel (not editable) goes into a fresh venv, whose `nvatom check` and
# scripts/wheel_smoke.py run from outside the tree, so a file missing from the package fails.
WHEEL_VENV := build/wheel-venv
wheel-check: $(STAMP)
	rm -rf build/dist $(WHEEL_VENV)
	mkdir -p build
	$(VPY) -m build -q --outdir build/dist . > build/wheel-build.log 2>&1 || \
		{ cat build/wheel-build.log; exit 1; }
	$(PYTHON) -m venv $(WHEEL_VENV)
	$(WHEEL_VENV)/bin/python -m pip install -q --disable-pip-version-check build/dist/nvatom-*.whl
	cd $(WHEEL_VENV) && env -u PYTHONPATH bin/nvatom check
	cd $(WHEEL_VENV) && env -u PYTHONPATH bin/python $(CURDIR)/scripts/wheel_smoke.py $(CURDIR)/src/nvatom

# On a machine with an NVIDIA GPU, from a working tree, with the system python3 that has
# numpy/cupy/pytest (no network needed): runs the `gpu` tests (on 6 workers where pytest-xdist
# is installed), then `make sanitize`'s run, and writes reports/hw/latest.json (with the
# sanitizer's summary) and reports/sanitize.json.
hw:
	PYTHONPATH=src $(PYTHON) scripts/hw_report.py --out reports/hw/latest.json -- \
		$$($(PYTHON) -c "import xdist" 2>/dev/null && echo "-n 6 --dist loadfile")

# On a GPU machine: every shipped kernel configuration under compute-sanitizer's memcheck,
# racecheck, synccheck and initcheck (scripts/sanitize.py); writes reports/sanitize.json.
sanitize:
	PYTHONPATH=src $(PYTHON) scripts/sanitize.py --out reports/sanitize.json

bench-layout: $(STAMP)
	$(VPY) bench/layout_bench.py

# Python build times: GEMM kernels' PTX, the 300-op IR module (reports/bench/build_time.json).
bench-build: $(STAMP)
	$(VPY) bench/build_time.py

# On a GPU machine (uses ncu when present): predicted vs measured bank conflicts.
bench-banks:
	PYTHONPATH=src $(PYTHON) bench/banks_ncu.py

# A long fuzzing campaign (docs/reliability.md "Fuzzing"): FUZZ_INPUTS inputs over all seven
# targets (FUZZ_PER_TARGET fixes the slow ones' counts, the rest is shared by weight), a random
# seed (printed) unless FUZZ_SEED is set; the report goes to reports/fuzz/latest.json.
FUZZ_INPUTS ?= 1000000
FUZZ_PER_TARGET ?= atom_name=20000,cli=60000,ir=40000,api=150000
fuzz: $(STAMP)
	$(VPY) scripts/fuzz.py --inputs $(FUZZ_INPUTS) --per-target $(FUZZ_PER_TARGET) \
		$(if $(FUZZ_SEED),--seed $(FUZZ_SEED)) --workers 2 --json reports/fuzz/latest.json \
		--markdown

clean:
	rm -rf build .pytest_cache $(VENV)
