# tilegrad_add_family(<category>/<family> [KERNEL_OPTIONS <flag>...]): adds the operator family in
# cpp/ops/<category>/<family>/ (e.g. norm/rms_norm: aclnnRmsNorm and aclnnRmsNormGrad) to libtilegrad.
#   Every *.cpp in the folder builds with baseline flags, except <name>_kernel_<isa>.cpp, which gets
#   the flags of <isa> (see TilegradFlags.cmake) plus KERNEL_OPTIONS;
#   each <op>_api.cpp names an operator <op> of the family: cpp/python/bind_<op>.cpp, if present,
#   joins the Python module (registered automatically).
set_property(GLOBAL PROPERTY TILEGRAD_OPS "")

function(tilegrad_add_family family)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "" "KERNEL_OPTIONS")
  set(dir "${PROJECT_SOURCE_DIR}/cpp/ops/${family}")
  if(NOT EXISTS "${dir}")
    message(FATAL_ERROR "tilegrad_add_family(${family}): no folder ${dir}")
  endif()
  file(GLOB sources CONFIGURE_DEPENDS "${dir}/*.cpp")
  target_sources(tilegrad PRIVATE ${sources})
  foreach(source IN LISTS sources)
    get_filename_component(name "${source}" NAME_WE)
    if(name MATCHES "_kernel_(scalar|avx2|avx512)$")
      set(options ${TILEGRAD_ISA_FLAGS_${CMAKE_MATCH_1}} ${arg_KERNEL_OPTIONS})
      set_source_files_properties("${source}" PROPERTIES COMPILE_OPTIONS "${options}")
    elseif(name MATCHES "^(.+)_api$")
      set_property(GLOBAL APPEND PROPERTY TILEGRAD_OPS ${CMAKE_MATCH_1})
    endif()
  endforeach()
endfunction()
