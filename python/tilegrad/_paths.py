"""Where the installed C/C++ parts live (for C++ consumers: ``find_package(tilegrad)``)."""

import os

_HERE = os.path.dirname(os.path.abspath(__file__))


def get_include() -> str:
    """Folder holding ``tilegrad/tilegrad.hpp``, ``acl/acl.h`` and ``aclnnop/*.h``."""
    return os.path.join(_HERE, "include")


def get_cmake_dir() -> str:
    """Folder holding ``tilegradConfig.cmake``: pass it as ``-Dtilegrad_DIR=...``."""
    return os.path.join(_HERE, "share", "cmake", "tilegrad")


def get_library() -> str:
    """Path of the shared library ``libtilegrad.so``."""
    return os.path.join(_HERE, "lib", "libtilegrad.so")
