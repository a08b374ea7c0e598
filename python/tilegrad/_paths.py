"""Where the installed C/C++ parts live (for C++ consumers: ``find_package(tilegrad)``)."""

import importlib.util
import os


def package_data_dir() -> str:
    """Folder holding lib/, include/ and share/: next to the compiled module ``tilegrad._core``. In a
    normal install that is this package's folder; in an editable install (Python files from the source
    tree) it is the installed copy in site-packages, where the build put the library and headers."""
    spec = importlib.util.find_spec("tilegrad._core")
    if spec is not None and spec.origin:
        return os.path.dirname(os.path.abspath(spec.origin))
    return os.path.dirname(os.path.abspath(__file__))


_HERE = package_data_dir()


def get_include() -> str:
    """Folder holding ``tilegrad/tilegrad.hpp``, ``acl/acl.h`` and ``aclnnop/*.h``."""
    return os.path.join(_HERE, "include")


def get_cmake_dir() -> str:
    """Folder holding ``tilegradConfig.cmake``: pass it as ``-Dtilegrad_DIR=...``."""
    return os.path.join(_HERE, "share", "cmake", "tilegrad")


def get_library() -> str:
    """Path of the shared library ``libtilegrad.so``."""
    return os.path.join(_HERE, "lib", "libtilegrad.so")


# First line of every library file of the toolkit prefix (a GNU ld linker script); see get_ascend_home.
_PREFIX_LIBRARY_MARK = "/* tilegrad toolkit-prefix library"


def _prefix_library_script(library: str) -> str:
    quoted = '"' + library.replace('"', '\\"') + '"' if any(c in library for c in ' "(),') else library
    return f"{_PREFIX_LIBRARY_MARK}: resolves to {os.path.basename(library)} */\nINPUT({quoted})\n"


def _point_prefix_libraries_at(home: str, library: str) -> None:
    """Rewrites each linker script under home to name `library` by absolute path, so a program
    linked with -lascendcl, -lopapi, ... records that path and runs without LD_LIBRARY_PATH."""
    want = _prefix_library_script(library)
    for root, _dirs, files in os.walk(home):
        for name in files:
            if not name.endswith(".so"):
                continue
            path = os.path.join(root, name)
            with open(path, encoding="utf-8", errors="replace") as f:
                text = f.read()
            if text == want or not text.startswith(_PREFIX_LIBRARY_MARK):
                continue
            tmp = f"{path}.tmp{os.getpid()}"
            with open(tmp, "w", encoding="utf-8") as f:
                f.write(want)
            os.replace(tmp, path)  # atomic: a concurrent build never reads half a script


def _user_copy_of_prefix(home: str, library: str) -> str:
    """A writable copy of the prefix (when the installed package is read-only), keyed by the library."""
    import hashlib
    import shutil

    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    key = hashlib.sha256(library.encode()).hexdigest()[:16]
    root = os.path.join(cache, "tilegrad", key)  # one per installed library
    copy = os.path.join(root, "ascend")
    if not os.path.isdir(copy):
        os.makedirs(root, exist_ok=True)
        tmp = f"{copy}.tmp{os.getpid()}"
        shutil.copytree(home, tmp)
        os.replace(tmp, copy)
    # setenv.bash finds libtilegrad.so as <prefix>/../lib: give the copy that neighbour too.
    lib_dir = os.path.join(root, "lib")
    if not os.path.exists(lib_dir):
        os.symlink(os.path.dirname(library), lib_dir)
    return copy


def get_ascend_home() -> str:
    """Folder shaped like a CANN toolkit (``$ASCEND_HOME_PATH``): include/ (with include/aclnnop and
    include/aclnn), lib64/ and the other library folders of the vendor's build scripts, whose
    libascendcl.so, libopapi.so, libnnopbase.so, ... all resolve to libtilegrad.so, and
    bin/setenv.bash. Inside the installed package; if that is read-only, a copy in the user's cache."""
    home = os.path.join(_HERE, "ascend")
    if not os.path.isdir(home):
        raise FileNotFoundError(f"no toolkit prefix at {home}: this tilegrad was built without the Python package")
    library = os.path.realpath(get_library())
    try:
        _point_prefix_libraries_at(home, library)
    except OSError:
        home = _user_copy_of_prefix(home, library)
        _point_prefix_libraries_at(home, library)
    return home
