"""python -m tilegrad [--cmake-dir | --include | --library | --ascend-home | --operators]: build and machine
information."""

import argparse
import sys

from . import __version__, _core, _paths, _registry


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tilegrad", description=__doc__)
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--cmake-dir", action="store_true", help="print the folder holding tilegradConfig.cmake")
    group.add_argument("--include", action="store_true", help="print the C/C++ include folder")
    group.add_argument("--library", action="store_true", help="print the path of libtilegrad.so")
    group.add_argument("--ascend-home", action="store_true",
                       help="print a CANN-toolkit-shaped folder for ASCEND_HOME_PATH / DDK_PATH (its libascendcl.so, "
                            "libopapi.so, ... resolve to libtilegrad.so; bin/setenv.bash sets up a shell)")
    group.add_argument("--operators", action="store_true",
                       help="list every operator (the registry, share/tilegrad/operators.json): NumPy function, "
                            "aclnn name, family folder, dtypes")
    args = parser.parse_args(argv)
    if args.cmake_dir:
        print(_paths.get_cmake_dir())
    elif args.include:
        print(_paths.get_include())
    elif args.library:
        print(_paths.get_library())
    elif args.ascend_home:
        print(_paths.get_ascend_home())
    elif args.operators:
        print(_registry.table())
    else:
        platform = _core.platform()
        print(f"tilegrad {__version__}")
        print(f"detected ISA: {_core.detected_isa()}")
        print(f"active ISA:   {_core.active_isa()} (cap {_core.max_isa()}; set TILEGRAD_MAX_ISA to change)")
        print(f"oneDNN ISA:   {_core._onednn_isa()} (GEMMs of the fused linear cross entropy; "
              "set ONEDNN_MAX_CPU_ISA to cap)")
        print(f"threads:      {_core.get_num_threads()}")
        print(f"trace:        {'on' if _core._verbose() else 'off'} (TILEGRAD_VERBOSE=1: one line per operator "
              "launch on stderr)")
        print(f"caches:       L1 {platform['l1_bytes'] >> 10} KiB, L2 {platform['l2_bytes'] >> 10} KiB, "
              f"L3 {platform['l3_bytes'] >> 20} MiB (as used for tiling)")
        print(f"build:        {_core.build_info()}")
        print(f"cmake dir:    {_paths.get_cmake_dir()}")
        print("ascend home:  python -m tilegrad --ascend-home (CANN-toolkit-shaped prefix)")
        print(f"operators:    {len(_registry.operators())} (python -m tilegrad --operators)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
