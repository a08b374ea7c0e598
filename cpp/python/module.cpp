// tilegrad._core: the pybind11 module. Runtime settings and test hooks live here; each operator's
// binding is cpp/python/bind_<op>.cpp, registered through the generated ops_registry.inc.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <vector>

#include "core/bandwidth_probe.h"
#include "core/elementwise_op_tiling.h"
#include "core/gemm.h"
#include "core/ordered_reduce.h"
#include "core/platform.h"
#include "core/trace.h"
#include "core/vmath_eval.h"
#include "py_tensor.h"
#include "py_tiling.h"
#include "tilegrad/runtime.hpp"
#include "tilegrad/status.hpp"

#define TILEGRAD_BIND(op) void bind_##op(py::module_& m);
#include "ops_registry.inc"
#undef TILEGRAD_BIND

namespace {

py::dict platform_dict(const tilegrad::core::Platform& p) {
  py::dict d;
  d["threads"] = p.threads;
  d["l1_bytes"] = p.l1_bytes;
  d["l2_bytes"] = p.l2_bytes;
  d["l3_bytes"] = p.l3_bytes;
  d["isa"] = tilegrad::isa_name(p.isa);
  return d;
}

}  // namespace

PYBIND11_MODULE(_core, m) {
  m.doc() = "tilegrad C++ core";

  // tilegrad::Error -> ValueError / TypeError / IndexError / MemoryError with the aclnn message;
  // the status code is kept as the exception's `code` attribute.
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const tilegrad::Error& e) {
      PyObject* type = PyExc_ValueError;
      switch (e.kind()) {
        case tilegrad::ErrorKind::kType: type = PyExc_TypeError; break;
        case tilegrad::ErrorKind::kIndex: type = PyExc_IndexError; break;
        case tilegrad::ErrorKind::kMemory: type = PyExc_MemoryError; break;
        default: break;
      }
      py::object exc = py::reinterpret_steal<py::object>(PyObject_CallFunction(type, "s", e.what()));
      if (exc) {
        PyObject_SetAttrString(exc.ptr(), "code", py::int_(e.code()).ptr());
        PyErr_SetObject(type, exc.ptr());
      }
    }
  });

  m.def("set_num_threads", &tilegrad::set_num_threads, py::arg("n"));
  m.attr("MAX_NUM_THREADS") = tilegrad::kMaxNumThreads;
  m.def("_take_max_isa_env_warning", &tilegrad::take_max_isa_env_warning);
  m.def("get_num_threads", &tilegrad::get_num_threads);
  m.def("set_max_isa", &tilegrad::set_max_isa, py::arg("isa"));
  m.def("max_isa", &tilegrad::max_isa);
  m.def("active_isa", [] { return std::string(tilegrad::isa_name(tilegrad::active_isa())); });
  m.def("detected_isa", [] { return std::string(tilegrad::isa_name(tilegrad::detected_isa())); });
  m.def("build_info", &tilegrad::build_info);
  m.def("platform", [] { return platform_dict(tilegrad::core::Platform::current()); });
  m.def("_verbose", [] { return tilegrad::core::verbose(); });  // TILEGRAD_VERBOSE is on
  m.def("_onednn_isa", [] { return std::string(tilegrad::core::onednn_isa()); });
  m.def(
      "_vmath",
      [](const std::string& name, const std::string& isa, py::array_t<float, py::array::c_style | py::array::forcecast> x) {
        py::array_t<float> out(x.size());
        tilegrad::core::vmath_eval(name, tilegrad::py_support::isa_from_name(isa), x.data(), out.mutable_data(), x.size());
        return out;
      },
      py::arg("name"), py::arg("isa"), py::arg("x"));

  m.def(
      "_bandwidth_probe",
      [](py::array_t<float, py::array::c_style> out, py::array_t<float, py::array::c_style> a,
         py::array_t<float, py::array::c_style> b, bool streaming_stores) {
        if (a.size() != out.size() || b.size() != out.size()) throw py::value_error("arrays must have equal sizes");
        py::gil_scoped_release release;
        tilegrad::core::bandwidth_probe(out.mutable_data(), a.data(), b.data(), out.size(), streaming_stores);
      },
      py::arg("out"), py::arg("a"), py::arg("b"), py::arg("streaming_stores") = true);

  // The elementwise operators' one tiling (SiLU backward, SwiGLU, GELU, GeGLU; forward and backward).
  tilegrad::py_support::def_tiling_hook<int64_t, int64_t, bool>(m, "_elementwise_op_tiling",
                                                                 tilegrad::core::elementwise_op_tiling,
                                                                 py::arg("numel"), py::arg("bytes_per_elem"),
                                                                 py::arg("out_contiguous"));

  // core/ordered_reduce.h test hooks: the row-block plan, a column sum through it, a sum of squares.
  m.def(
      "_row_blocks",
      [](int64_t rows, int64_t cols) {
        const auto rb = tilegrad::core::plan_row_blocks(rows, cols);
        py::dict d;
        d["rows"] = rb.rows;
        d["cols"] = rb.cols;
        d["block_rows"] = rb.block_rows;
        d["num_blocks"] = rb.num_blocks;
        d["partial_stride"] = rb.partial_stride();
        d["workspace_bytes"] = rb.workspace_bytes();
        return d;
      },
      py::arg("rows"), py::arg("cols"));
  m.def(
      "_ordered_column_sum",
      [](py::array_t<float, py::array::c_style> a, int threads) {
        if (a.ndim() != 2) throw py::value_error("a must be 2-D");
        const int64_t rows = a.shape(0), cols = a.shape(1);
        const auto rb = tilegrad::core::plan_row_blocks(rows, cols);
        std::vector<float> ws(static_cast<size_t>(rb.workspace_bytes() / 4 + 1));
        py::array_t<float> out(cols);
        py::gil_scoped_release release;
        tilegrad::core::ordered_column_sum(a.data(), rows, cols, cols, out.mutable_data(), ws.data(), threads);
        return out;
      },
      py::arg("a"), py::arg("threads"));
  m.def(
      "_sum_squares",
      [](const py::list& arrays, int threads) {
        std::vector<tilegrad::core::FloatSpan> spans;
        for (const auto& a : arrays) {
          const tilegrad::TensorView v = tilegrad::py_support::view_of(a, "arrays");
          if (v.shape.size() != 1) throw py::value_error("arrays must be 1-D");
          spans.push_back({v.data, v.shape[0], v.strides[0], v.dtype});
        }
        std::vector<double> ws(
            static_cast<size_t>(tilegrad::core::sum_squares_workspace_bytes(spans.data(), spans.size()) / 8));
        py::gil_scoped_release release;
        return tilegrad::core::sum_squares(spans.data(), static_cast<int64_t>(spans.size()), ws.data(), threads);
      },
      py::arg("arrays"), py::arg("threads"));

#define TILEGRAD_BIND(op) bind_##op(m);
#include "ops_registry.inc"
#undef TILEGRAD_BIND
}
