"""The supported torch range: tilegrad.torch refuses a torch below the floor that pyproject.toml
states, with what to do, instead of failing somewhere inside its import."""

import re
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

import tilegrad.torch as tgt  # noqa: E402


def _extra_floor() -> tuple:
    text = (Path(__file__).resolve().parents[2] / "pyproject.toml").read_text()
    major, minor = re.search(r'"torch>=(\d+)\.(\d+)"', text).groups()
    return int(major), int(minor)


def test_import_floor_is_the_torch_extras_floor():
    assert tgt.MINIMUM_TORCH == _extra_floor()


def test_installed_torch_is_in_the_supported_range():
    tgt._require_torch(torch.__version__)  # the import above already ran it; this names the version
    assert tuple(int(p) for p in torch.__version__.split(".")[:2]) >= tgt.MINIMUM_TORCH


@pytest.mark.parametrize("version", ["2.12.1", "2.6.0+cu124", "1.13.1"])
def test_older_torch_is_refused_with_the_fix(version):
    with pytest.raises(ImportError, match=r"tilegrad.torch needs torch>=2\.13, found torch " + re.escape(version)
                       + r": pip install 'torch>=2\.13'"):
        tgt._require_torch(version)


@pytest.mark.parametrize("version", ["2.13.0", "2.13.0+cpu", "2.14.1+cu130", "2.15.0", "3.0.0a0", "2.16.0.dev20261127"])
def test_supported_torch_is_accepted(version):
    tgt._require_torch(version)
