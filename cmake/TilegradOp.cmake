# tilegrad_add_op(<op>): adds cpp/ops/<op>/ to libtilegrad.
#   <op>_api.cpp, <op>_tiling.cpp, and any other *.cpp in the folder build with baseline flags;
#   <op>_kernel_<isa>.cpp builds with the flags of <isa> (see TilegradFlags.cmake);
#   cpp/python/bind_<op>.cpp, if present, joins the Python module (registered automatically).
set_property(GLOBAL PROPERTY TILEGRAD_OPS "")

function(tilegrad_add_op op)
  set(dir "${PROJECT_SOURCE_DIR}/cpp/ops/${op}")
  if(NOT EXISTS "${dir}")
    message(FATAL_ERROR "tilegrad_add_op(${op}): no folder ${dir}")
  endif()
  file(GLOB sources CONFIGURE_DEPENDS "${dir}/*.cpp")
  target_sources(tilegrad PRIVATE ${sources})
  foreach(isa scalar avx2 avx512)
    set(kernel "${dir}/${op}_kernel_${isa}.cpp")
    if(EXISTS "${kernel}" AND TILEGRAD_ISA_FLAGS_${isa})
      set_source_files_properties("${kernel}" PROPERTIES COMPILE_OPTIONS "${TILEGRAD_ISA_FLAGS_${isa}}")
    endif()
  endforeach()
  set_property(GLOBAL APPEND PROPERTY TILEGRAD_OPS ${op})
endfunction()
