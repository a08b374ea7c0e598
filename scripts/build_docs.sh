#!/usr/bin/env bash
# Builds the documentation site (default: into site/) in strict mode: a broken link, a missing page, an
# unresolved API reference, an operator README or a benchmark data file that cannot be found fails.
# Installs the docs extra's packages first (not tilegrad itself: the API pages come from the sources
# through static analysis). CI runs this after the tests.
set -euo pipefail
cd "$(dirname "$0")/.."
requirements=$(mktemp)
trap 'rm -f "$requirements"' EXIT
python - > "$requirements" <<'PY'
import tomllib
with open("pyproject.toml", "rb") as f:
    print("\n".join(tomllib.load(f)["project"]["optional-dependencies"]["docs"]))
PY
python -m pip install -q -r "$requirements"
python scripts/bench_tables.py check
NO_MKDOCS_2_WARNING=1 python -m mkdocs build --strict --site-dir "${1:-site}"
