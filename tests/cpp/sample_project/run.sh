#!/bin/bash
# The vendor's sample-project script, unchanged in shape: picks the toolkit from ASCEND_INSTALL_PATH or
# ASCEND_HOME_PATH, sources its bin/setenv.bash, points DDK_PATH / NPU_HOST_LIB at it, then configures,
# builds (-std=c++11, see CMakeLists.txt) and runs bin/opapi_test. With tilegrad:
#   ASCEND_HOME_PATH=$(python -m tilegrad --ascend-home) bash run.sh
# src/main.cpp is the program (the test suite puts tests/cpp/vendor_style/silu_backward_fp16.cpp there).
set -e
CURRENT_DIR=$(cd "$(dirname "$0")" && pwd)

if [ -n "$ASCEND_INSTALL_PATH" ]; then
    _ASCEND_INSTALL_PATH=$ASCEND_INSTALL_PATH
elif [ -n "$ASCEND_HOME_PATH" ]; then
    _ASCEND_INSTALL_PATH=$ASCEND_HOME_PATH
else
    _ASCEND_INSTALL_PATH=/usr/local/Ascend/ascend-toolkit/latest
fi
source "$_ASCEND_INSTALL_PATH/bin/setenv.bash"
export DDK_PATH=$_ASCEND_INSTALL_PATH
export NPU_HOST_LIB=$_ASCEND_INSTALL_PATH/lib64

rm -rf "$CURRENT_DIR/build"
mkdir -p "$CURRENT_DIR/build"
cd "$CURRENT_DIR/build"
cmake ../ -DCMAKE_CXX_COMPILER=g++ -DCMAKE_SKIP_RPATH=TRUE
make
cd bin
./opapi_test
