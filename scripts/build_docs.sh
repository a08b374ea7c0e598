#!/usr/bin/env bash
# Builds the documentation site into site/ in strict mode: a broken link, a missing page, an
# unresolved API reference, an operator README or benchmark data file that cannot be found fails.
# Needs the docs extra (pip install ".[docs]"); CI runs this after the tests.
set -euo pipefail
cd "$(dirname "$0")/.."
python scripts/bench_tables.py check
mkdocs build --strict --site-dir "${1:-site}"
