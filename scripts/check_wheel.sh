#!/usr/bin/env bash
# Checks a built wheel as a user gets it:
#   1. a fresh virtual environment (no system site-packages) and `pip install <wheel>` with NO compiler
#      on PATH (gcc, g++, cc, c++, clang, clang++ shadowed by stubs that record any call; CC/CXX
#      likewise), binary packages only; the install time is printed;
#   2. `python -m tilegrad` (from outside the source tree);
#   3. the compiler back: the C++ route, examples/cpp configured with find_package(tilegrad) from the
#      installed wheel, built and run;
#   4. the test suite against the installed wheel: tests/, examples/, scripts/, README.md and
#      pyproject.toml (the version the tests expect) copied out of the source tree,
#      pytest run there (rootdir outside the tree), after checking that `import tilegrad` is the wheel;
#   5. with torch installed in the venv (by default the floor of the supported range: torch==2.13.0,
#      the CPU build, and transformers==5.0.0, with the torch and test extras; TORCH_SPEC and
#      TRANSFORMERS_SPEC choose others; not with --no-torch, which leaves the torch tests to skip):
#      exactly one OpenMP runtime in a process holding tilegrad, oneDNN and torch, whichever is
#      imported first (scripts/openmp_runtimes.py --expect-one).
#
# Usage: scripts/check_wheel.sh [--no-torch] wheelhouse/tilegrad-<version>-<tags>.whl
#        PYTHON=python3.12 to check with another interpreter (matching the wheel's tag).
set -euo pipefail
with_torch=1
if [[ "${1:-}" == "--no-torch" ]]; then with_torch=0; shift; fi
[[ $# -eq 1 && -f "$1" ]] || { echo "usage: $0 [--no-torch] <wheel>"; exit 2; }
wheel=$(realpath "$1")
cd "$(dirname "$0")/.."
root=$(pwd)
python=${PYTHON:-python3}
start=$(date +%s)
step() { echo; echo "=== [check_wheel $(( $(date +%s) - start ))s] $*"; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
venv="$work/venv"

step "fresh virtual environment ($("$python" --version))"
"$python" -m venv "$venv"
vpython="$venv/bin/python"

step "pip install $(basename "$wheel") with no compiler on PATH"
# Stubs that shadow every compiler name: if pip (or anything it runs) tried to compile, the call is
# recorded and fails, and this check fails.
stubs="$work/no-compiler"
mkdir -p "$stubs"
for cc in gcc g++ cc c++ clang clang++ x86_64-linux-gnu-gcc x86_64-linux-gnu-g++; do
  printf '#!/bin/sh\necho "%s $*" >> "%s/calls"\nexit 1\n' "$cc" "$stubs" > "$stubs/$cc"
  chmod +x "$stubs/$cc"
done
install_start_ms=$(( $(date +%s%N) / 1000000 ))
PATH="$stubs:$venv/bin:$PATH" CC="$stubs/cc" CXX="$stubs/c++" \
  "$vpython" -m pip install -q --only-binary=:all: "$wheel"
install_ms=$(( $(date +%s%N) / 1000000 - install_start_ms ))
install_seconds="$(( install_ms / 1000 )).$(printf %03d $(( install_ms % 1000 )))"
if [[ -s "$stubs/calls" ]]; then echo "FAIL: a compiler was called during install:"; cat "$stubs/calls"; exit 1; fi
echo "installed in ${install_seconds}s (wheel $(du -k "$wheel" | cut -f1) KiB) without calling a compiler"

step "python -m tilegrad"
(cd "$work" && PATH="$stubs:$venv/bin:$PATH" "$vpython" -m tilegrad)
expected_version=$(basename "$wheel" | cut -d- -f2)
(cd "$work" && "$vpython" -c "
import sys, tilegrad
assert tilegrad.__file__.startswith('$venv/'), tilegrad.__file__
assert tilegrad.__version__ == '$expected_version', (tilegrad.__version__, '$expected_version')
assert tilegrad.build_info().startswith('tilegrad $expected_version;'), tilegrad.build_info()
print('import tilegrad:', tilegrad.__file__, 'version', tilegrad.__version__)
")

if [[ $with_torch -eq 1 ]]; then
  # torch first, pinned: a bare `torch` requirement could resolve to a CUDA build from the index.
  torch_spec=${TORCH_SPEC:-torch==2.13.0}
  transformers_spec=${TRANSFORMERS_SPEC:-transformers==5.0.0}
  step "$torch_spec, then the torch and test extras with $transformers_spec"
  "$vpython" -m pip install -q "$torch_spec"
  "$vpython" -m pip install -q --only-binary=:all: "${wheel}[torch,test]" "$transformers_spec"
  "$vpython" -c "import torch, transformers; print('torch', torch.__version__, '| transformers', transformers.__version__)"
else
  step "the test extra (pytest, cmake, ninja, ...)"
  "$vpython" -m pip install -q --only-binary=:all: "${wheel}[test]"
fi

step "C++ route: examples/cpp with find_package(tilegrad) from the installed wheel"
# pyproject: the version's source; docs + scripts: the drop-in symbol table the tests check; README,
# CHANGELOG and docs: the snippets tests/test_docs.py runs against the installed wheel
cp -r "$root/examples" "$root/tests" "$root/scripts" "$root/pyproject.toml" "$root/README.md" "$root/CHANGELOG.md" \
  "$root/docs" "$work/"
cmake_dir=$(cd "$work" && "$vpython" -m tilegrad --cmake-dir)
[[ "$cmake_dir" == "$venv/"* ]] || { echo "FAIL: cmake dir $cmake_dir is not the wheel's"; exit 1; }
"$venv/bin/cmake" -S "$work/examples/cpp" -B "$work/build-example" -G Ninja \
  -DCMAKE_MAKE_PROGRAM="$venv/bin/ninja" -Dtilegrad_DIR="$cmake_dir" > "$work/example.log" \
  || { cat "$work/example.log"; exit 1; }
"$venv/bin/cmake" --build "$work/build-example" >> "$work/example.log" || { cat "$work/example.log"; exit 1; }
"$work/build-example/silu_example"

step "test suite against the installed wheel (tests/ copied to $work)"
(cd "$work" && PATH="$venv/bin:$PATH" "$vpython" -m pytest tests -q -ra -p no:cacheprovider --rootdir "$work")

if [[ $with_torch -eq 1 ]]; then
  step "one OpenMP runtime with tilegrad, oneDNN and torch in one process"
  for order in tilegrad-first torch-first; do
    (cd "$work" && "$vpython" "$root/scripts/openmp_runtimes.py" --order "$order" --repeats 2 --calls 3 --expect-one)
  done
fi

step "ok: $(basename "$wheel") installs in ${install_seconds}s without a compiler and passes as installed"
