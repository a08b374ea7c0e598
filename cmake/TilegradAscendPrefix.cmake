# The toolkit-shaped prefix installed inside the Python package (tilegrad/ascend): the folders and
# library names CANN programs' build scripts use, so they build unchanged with ASCEND_HOME_PATH (or
# DDK_PATH / NPU_HOST_LIB) pointing here. Headers are copies (a wheel cannot hold symlinks). Every
# library name is a tiny GNU ld linker script; `python -m tilegrad --ascend-home` writes into each the
# absolute path of the installed libtilegrad.so (unknown at build time), so a program linked with
# -lascendcl -lopapi ... records that path and runs without LD_LIBRARY_PATH.
set(TILEGRAD_ASCEND_PREFIX "ascend")
set(TILEGRAD_ASCEND_LIBRARY_NAMES ascendcl opapi nnopbase opapi_nn opapi_math cust_opapi acl_op_compiler)
set(TILEGRAD_ASCEND_LIBRARY_DIRS lib64 runtime/lib64 runtime/lib64/stub acllib/lib64 acllib/lib64/stub atc/lib64
    atc/lib64/stub opp/vendors/customize/op_api/lib)

set(_tg_placeholder "${CMAKE_CURRENT_BINARY_DIR}/ascend_library_placeholder.so")
file(WRITE "${_tg_placeholder}"
     "/* tilegrad toolkit-prefix library: resolves to libtilegrad.so once `python -m tilegrad --ascend-home` ran */\n"
     "INPUT(libtilegrad.so)\n")
foreach(dir IN LISTS TILEGRAD_ASCEND_LIBRARY_DIRS)
  foreach(name IN LISTS TILEGRAD_ASCEND_LIBRARY_NAMES)
    install(FILES "${_tg_placeholder}" DESTINATION "${TILEGRAD_ASCEND_PREFIX}/${dir}" RENAME "lib${name}.so")
  endforeach()
endforeach()

foreach(dir include runtime/include atc/include acllib/include)
  install(DIRECTORY cpp/include/ DESTINATION "${TILEGRAD_ASCEND_PREFIX}/${dir}")
endforeach()
# Custom-operator headers sit flat in op_api/include (#include "aclnn_xxx.h").
install(DIRECTORY cpp/include/aclnnop/ DESTINATION "${TILEGRAD_ASCEND_PREFIX}/opp/vendors/customize/op_api/include")
install(PROGRAMS cmake/ascend/setenv.bash DESTINATION "${TILEGRAD_ASCEND_PREFIX}/bin")
