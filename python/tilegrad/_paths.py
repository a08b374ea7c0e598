"""Where the installed C/C++ parts live (for C++ consumers: ``find_package(tilegrad)``)."""

import importlib.util
import os


def _package_data_dir() -> str:
    """Folder holding lib/, include/ and share/: next to the compiled module ``tilegrad._core``. In a
    normal install that is this package's folder; in an editable install (Python files from the source
    tree) it is the installed copy in site-packages, where the build put the library and headers."""
    spec = importlib.util.find_spec("tilegrad._core")
    if spec is not None and spec.origin:
        return os.path.dirname(os.path.abspath(spec.origin))
    return os.path.dirname(os.path.abspath(__file__))


_HERE = _package_data_dir()


def get_include() -> str:
    """Folder holding ``tilegrad/tilegrad.hpp``, ``acl/acl.h`` and ``aclnnop/*.h``."""
    return os.path.join(_HERE, "include")


def get_cmake_dir() -> str:
    """Folder holding ``tilegradConfig.cmake``: pass it as ``-Dtilegrad_DIR=...``."""
    return os.path.join(_HERE, "share", "cmake", "tilegrad")


def get_library() -> str:
    """Path of the shared library ``libtilegrad.so``."""
    return os.path.join(_HERE, "lib", "libtilegrad.so")
