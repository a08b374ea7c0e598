// Process-wide runtime settings: threads and the instruction-set cap.
#pragma once

#include <string>

#include "tilegrad/export.h"

namespace tilegrad {

enum class Isa : int { kScalar = 0, kAvx2 = 1, kAvx512 = 2 };

TILEGRAD_API const char* isa_name(Isa isa);  // "scalar", "avx2", "avx512"
TILEGRAD_API Isa detected_isa();             // best level this CPU (and OS) supports
// Level kernels run at: min(detected, cap). The cap starts from TILEGRAD_MAX_ISA (read once) and
// can be changed with set_max_isa; an unknown name throws tilegrad::Error.
TILEGRAD_API Isa active_isa();
TILEGRAD_API void set_max_isa(const std::string& name);
TILEGRAD_API std::string max_isa();

// Threads used by operators (default: OpenMP's max threads, i.e. OMP_NUM_THREADS or the cores).
TILEGRAD_API void set_num_threads(int n);
TILEGRAD_API int get_num_threads();

// One-line build description: version, compiler, flags.
TILEGRAD_API std::string build_info();

}  // namespace tilegrad
