// Process-wide runtime settings: threads and the instruction-set cap.
#pragma once

#include <string>

#include "tilegrad/export.h"

namespace tilegrad {

enum class Isa : int { kScalar = 0, kAvx2 = 1, kAvx512 = 2 };

TILEGRAD_API const char* isa_name(Isa isa);  // "scalar", "avx2", "avx512"
TILEGRAD_API Isa detected_isa();             // best level this CPU (and OS) supports
// Level kernels run at: min(detected, cap). The cap starts from TILEGRAD_MAX_ISA (read once) and
// can be changed with set_max_isa; an unknown name throws tilegrad::Error. An unknown
// TILEGRAD_MAX_ISA value means no cap and is reported once (max_isa_env_warning, else stderr).
TILEGRAD_API Isa active_isa();
TILEGRAD_API void set_max_isa(const std::string& name);
TILEGRAD_API std::string max_isa();

// The message about an unknown TILEGRAD_MAX_ISA value ("" when it is unset or valid). Taking it
// marks it reported (the Python module turns it into a warning), so it is not printed to stderr.
TILEGRAD_API std::string take_max_isa_env_warning();

// Upper bound of the thread count: far above any machine's cores, far below where OpenMP runtimes
// fail to create threads (50000 aborts libgomp, 100000 crashes it).
constexpr int kMaxNumThreads = 1024;

// Threads used by operators (default: OpenMP's max threads, i.e. OMP_NUM_THREADS or the cores,
// capped at kMaxNumThreads). set_num_threads: n in [1, kMaxNumThreads], else tilegrad::Error.
TILEGRAD_API void set_num_threads(int n);
TILEGRAD_API int get_num_threads();

// One-line build description: version, compiler, flags.
TILEGRAD_API std::string build_info();

}  // namespace tilegrad
