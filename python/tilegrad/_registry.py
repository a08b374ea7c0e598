"""The operator registry: every operator tilegrad has, with its family folder, its names, dtypes and
sample arguments. One JSON file, ``cpp/ops/operators.json`` in the source tree (CMake builds the
families it lists), installed as ``share/tilegrad/operators.json`` in this package."""

import functools
import json
import os
from typing import Any, Dict, List

from . import _paths


def registry_file() -> str:
    """Path of the installed registry, ``share/tilegrad/operators.json``."""
    return os.path.join(_paths.package_data_dir(), "share", "tilegrad", "operators.json")


@functools.lru_cache(maxsize=None)
def families() -> List[Dict[str, Any]]:
    """The registry's families, in its order: ``family`` (``<category>/<family>``, the folder under
    cpp/ops/), ``title``, ``page`` (under docs/operators/), optional ``helpers`` (public functions
    of the family that launch no operator of their own) and ``operators``."""
    with open(registry_file(), encoding="utf-8") as f:
        return json.load(f)["families"]


@functools.lru_cache(maxsize=None)
def operators() -> List[Dict[str, Any]]:
    """Every operator, with its defaults filled in: ``name`` (the C++ function, ``<name>_api.cpp``,
    the trace line's name for operators without an aclnn one), ``python`` (the NumPy function,
    ``tilegrad.<python>``; default ``name``), ``aclnn`` (the C ABI operator, entry points
    ``<aclnn>GetWorkspaceSize`` and ``<aclnn>``; None for tilegrad's own), ``api`` (the file under
    the family folder that defines it; default ``<name>_api.cpp``), ``family``, ``category``,
    ``dtypes``, ``sample`` (arguments of the Python call) and ``c_abi`` (the C ABI call's parameters
    with sample data; absent without an aclnn name)."""
    out = []
    for fam in families():
        for op in fam["operators"]:
            full = {"python": op["name"], "api": f"{op['name']}_api.cpp", **op}
            full.update(family=fam["family"], category=fam["family"].split("/")[0])
            out.append(full)
    return out


def table() -> str:
    """The registry as a text table (``python -m tilegrad --operators``)."""
    rows = [("python", "aclnn", "family", "dtypes")]
    for op in operators():
        rows.append((f"tilegrad.{op['python']}", op["aclnn"] or "(tilegrad's own)", op["family"],
                     ",".join(op["dtypes"])))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[-1] for r in rows)
