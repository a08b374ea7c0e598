# tilegrad's CPU toolkit prefix (python -m tilegrad --ascend-home): exports what the vendor's
# set_env.sh exports that a build and a run on the CPU need. Source it: source <prefix>/bin/setenv.bash
_tilegrad_home="$(cd "$(dirname "${BASH_SOURCE[0]:-$0}")/.." && pwd)"
export ASCEND_HOME_PATH="$_tilegrad_home"
export ASCEND_TOOLKIT_HOME="$_tilegrad_home"
export ASCEND_OPP_PATH="$_tilegrad_home/opp"
export ASCEND_AICPU_PATH="$_tilegrad_home"
# libtilegrad.so, which every library name of the prefix (lib64/libascendcl.so, ...) resolves to.
export LD_LIBRARY_PATH="$(cd "$_tilegrad_home/../lib" && pwd)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
unset _tilegrad_home
