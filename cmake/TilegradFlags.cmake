# Compile flags shared by every tilegrad target. Never -ffast-math: it implies finite-math-only
# (breaks inf/NaN handling) and, when linking a shared object, sets flush-to-zero process-wide.

# Flags per kernel ISA level; a kernel file named *_kernel_<isa>.cpp gets the flags of <isa>.
set(TILEGRAD_ISA_FLAGS_scalar "")
set(TILEGRAD_ISA_FLAGS_avx2 -mavx2 -mfma -mf16c -mbmi2)
# GCC 12 warns about its own _mm512_undefined_ps() inside intrinsics: a known false positive.
# -mavx512bf16 only makes the vcvtneps2bf16 intrinsic available; simd_avx512.h uses it behind a
# run-time CPU check, and GCC never emits it on its own.
set(TILEGRAD_ISA_FLAGS_avx512 -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512bf16 -mavx2 -mfma -mf16c -mbmi2
    -Wno-uninitialized -Wno-maybe-uninitialized)

function(tilegrad_apply_common_flags target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wno-unused-parameter -fno-fast-math)
  if(TILEGRAD_SANITIZE)
    target_compile_options(${target} PRIVATE -fsanitize=address,undefined -fno-omit-frame-pointer
                                             -fno-sanitize-recover=undefined)
    target_link_options(${target} PRIVATE -fsanitize=address,undefined)
  endif()
endfunction()
