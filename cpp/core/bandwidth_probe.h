// The machine's read+write bandwidth ceiling for elementwise kernels: out = a + b over float32
// arrays with every thread and non-temporal stores, through the same tiling and span loop as the
// operators. Benchmarks report operator throughput as a fraction of it.
#pragma once

#include <cstdint>

#include "core/dispatch.h"
#include "tilegrad/export.h"

namespace tilegrad::core {

using StreamAddFn = void (*)(float* out, const float* a, const float* b, int64_t n, bool stream);
void stream_add_scalar(float*, const float*, const float*, int64_t, bool);
void stream_add_avx2(float*, const float*, const float*, int64_t, bool);
void stream_add_avx512(float*, const float*, const float*, int64_t, bool);

TILEGRAD_API void bandwidth_probe(float* out, const float* a, const float* b, int64_t n, bool streaming_stores);

}  // namespace tilegrad::core
