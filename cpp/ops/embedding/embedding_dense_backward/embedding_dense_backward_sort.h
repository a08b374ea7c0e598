// Embedding dense backward, phase 1 at launch: read the indices (any supported dtype, any strides),
// check every one is in [0, numWeights), and counting-sort the gradient rows by output row, stable
// (index order kept within a row). Raw pointers and strides only; no tensors, no allocation.
#pragma once

#include <cstdint>
#include <string>

#include "tilegrad/tensor_view.hpp"

namespace tilegrad::ops {

// A strided walk over a row-major shape (strides in bytes), size-1 dims dropped and mergeable
// neighbours collapsed.
struct StridedDims {
  int ndim = 0;
  int64_t shape[kMaxDims] = {};
  int64_t strides[kMaxDims] = {};
};
StridedDims collapse_dims(const int64_t* shape, const int64_t* elem_strides, int ndim, int64_t elem_size);
// Byte offset of flat (row-major) position pos.
int64_t offset_of(const StridedDims& d, int64_t pos);

struct IndexSource {
  const char* data = nullptr;
  DType dtype = DType::kInt64;
  StridedDims dims;
};

// Converts indices [begin, end) to row numbers (floats truncate toward zero) into keys[begin..end)
// (if keys != nullptr) and adds them to hist (if != nullptr, V entries). Stops at and returns the
// first position whose index is not in [0, num_weights); -1 if all are valid.
int64_t convert_indices(const IndexSource& src, int64_t begin, int64_t end, int64_t num_weights, int64_t* keys,
                        int64_t* hist);

// The index at pos as written in the tensor ("-3", "1.5", "nan"), for error messages.
std::string index_value_str(const IndexSource& src, int64_t pos);

// For positions [begin, end): src_rows[cursor[keys[i]]++] = byte offset of gradient row i.
void scatter_rows(const int64_t* keys, int64_t begin, int64_t end, const StridedDims& grad_rows, int64_t* cursor,
                  int64_t* src_rows);

}  // namespace tilegrad::ops
