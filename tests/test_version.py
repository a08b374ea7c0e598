"""The version has one source (pyproject.toml); every place that reports it agrees."""

import re
from importlib import metadata
from pathlib import Path

import tilegrad as tg


def test_version_is_the_distributions():
    assert tg.__version__ == metadata.version("tilegrad")
    assert re.fullmatch(r"\d+\.\d+\.\d+\S*", tg.__version__), tg.__version__


def test_library_reports_the_same_version():
    assert tg.build_info().startswith(f"tilegrad {tg.__version__}; "), tg.build_info()


def test_cmake_package_reports_the_same_version():
    config = Path(tg.get_cmake_dir()) / "tilegradConfigVersion.cmake"
    numeric = re.match(r"\d+(\.\d+)*", tg.__version__).group(0)
    assert f'set(PACKAGE_VERSION "{numeric}")' in config.read_text()
