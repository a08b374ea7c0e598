#include "core/executor.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>

#include "core/acl_objects.h"
#include "core/acl_tensor.h"
#include "core/error.h"
#include "core/workspace.h"

namespace tilegrad::core {

namespace {

// Executors are handed out as opaque ids that are never reused, so launching a released one (or
// a destroyed one) is detected instead of touching freed memory.
struct Entry {
  std::string op;
  std::shared_ptr<Launch> launch;  // shared: a running launch survives a concurrent destroy
  bool repeatable = false;
  TensorParams params;
  std::vector<ExecutorTensors::Record> tensors;
  bool stale = false;  // an address changed since the launch was last bound
};

std::mutex g_mutex;
std::unordered_map<uintptr_t, Entry> g_executors;
uintptr_t g_next_id = 0x1000;

struct AlignedBuffer {
  void* ptr = nullptr;
  uint64_t capacity = 0;
  void reserve(uint64_t bytes) {
    if (bytes <= capacity) return;
    std::free(ptr);
    capacity = 0;
    ptr = alloc_aligned(bytes);
    if (!ptr) throw std::bad_alloc();
    capacity = bytes;
  }
  ~AlignedBuffer() { std::free(ptr); }
};

// Native-path workspaces are kept per calling thread (up to kCachedWorkspaceLimit) so that repeated
// calls do not pay an allocation and its page faults each time (measured: ~31 faults per call for
// embedding backward's 1.8 MB workspace at D=64). A launch that itself runs a launch on the same
// thread gets a fresh buffer (the cached one is in use).
constexpr uint64_t kCachedWorkspaceLimit = 64ull << 20;
thread_local AlignedBuffer t_workspace;
thread_local bool t_workspace_in_use = false;

// launch.run(workspace), timed and traced when TILEGRAD_VERBOSE recorded a line for it.
void run_traced(Launch& launch, void* workspace) {
  launch.trace().timed([&] { launch.run(workspace); });
}

void run_with_own_workspace(Launch& launch) {
  const uint64_t bytes = launch.workspace_bytes();
  if (bytes == 0) return run_traced(launch, nullptr);
  if (bytes > kCachedWorkspaceLimit || t_workspace_in_use) {
    AlignedBuffer own;
    own.reserve(bytes);
    return run_traced(launch, own.ptr);
  }
  t_workspace.reserve(bytes);
  t_workspace_in_use = true;
  try {
    run_traced(launch, t_workspace.ptr);
  } catch (...) {
    t_workspace_in_use = false;
    throw;
  }
  t_workspace_in_use = false;
}

}  // namespace

void Operands::set(std::string name, const TensorView& view) { views_.emplace_back(std::move(name), view); }

const TensorView& Operands::operator[](const std::string& name) const {
  static const TensorView kAbsent;
  for (const auto& [n, v] : views_)
    if (n == name) return v;
  return kAbsent;
}

void Operands::bind(std::initializer_list<std::pair<const char*, TensorView*>> views) const {
  for (const auto& [name, view] : views) view->data = (*this)[name].data;
}

void Launch::bind(const Operands&) { fail(Status::kInner, "this launch cannot be bound to new addresses"); }

// Kernel-half addresses (never a user-space pointer on x86-64 / AArch64 Linux), 1 TiB apart: the
// stand-in data of the tensors an executor viewed without data.
constexpr uintptr_t kStandInBase = uintptr_t(0xffffa00000000000ull);
constexpr uintptr_t kStandInStride = uintptr_t(1) << 40;

TensorView ExecutorTensors::view(const std::string& arg, const aclTensor* t) {
  require_not_null(op_, arg.c_str(), t);
  Record r;
  r.arg = arg;
  r.user = t;
  r.address = t->data;
  void* stand_in = reinterpret_cast<void*>(kStandInBase + records_.size() * kStandInStride);
  r.planned = view_at(op_, arg.c_str(), t, t->data ? t->data : stand_in);
  r.has_elements = r.planned.numel() > 0 && dtype_size(r.planned.dtype) > 0;
  r.offset_bytes = t->offset * dtype_size(r.planned.dtype);
  records_.push_back(r);
  return r.planned;
}

TensorView ExecutorTensors::optional_view(const std::string& arg, const aclTensor* t) {
  return t ? view(arg, t) : TensorView{};
}

void run_now(const char* op, Launch& launch) {
  try {
    run_with_own_workspace(launch);
  } catch (const std::bad_alloc&) {
    throw Error(Status::kInner,
                concat(op, ": out of memory (workspace of ", launch.workspace_bytes(), " bytes could not be allocated)"),
                ErrorKind::kMemory);
  }
}

void check_executor_out_pointers(const char* op, const uint64_t* workspace_size, aclOpExecutor** executor) {
  if (!workspace_size) fail(Status::kParamNullptr, op, "GetWorkspaceSize: workspaceSize out-pointer is null");
  if (!executor) fail(Status::kParamNullptr, op, "GetWorkspaceSize: executor out-pointer is null");
}

namespace {

uintptr_t insert_entry(Entry entry) {
  std::lock_guard<std::mutex> lock(g_mutex);
  const uintptr_t id = g_next_id;
  g_next_id += 16;
  g_executors.emplace(id, std::move(entry));
  return id;
}

// The live entry behind `executor` (caller holds g_mutex): 161001 for NULL, 161002 if not live.
Entry& live_entry(const char* fn, aclOpExecutor* executor) {
  if (!executor) fail(Status::kParamNullptr, fn, ": executor is null");
  auto it = g_executors.find(reinterpret_cast<uintptr_t>(executor));
  check(it != g_executors.end(), fn, ": executor ", static_cast<const void*>(executor),
        " is not live (already launched, destroyed, or never created)");
  return it->second;
}

// The entry's tensors at their current addresses; 161001 for one with elements that has none yet.
Operands bound_operands(const Entry& e) {
  Operands operands;
  for (const ExecutorTensors::Record& r : e.tensors) {
    if (r.has_elements && !r.address)
      fail(Status::kParamNullptr, e.op, ": ", r.arg, " data is null (give it an address with aclSetInputTensorAddr / "
           "aclSetOutputTensorAddr before launching)");
    TensorView v = r.planned;
    if (r.has_elements) v.data = static_cast<char*>(r.address) + r.offset_bytes;
    operands.set(r.arg, v);
  }
  return operands;
}

// Binds the entry's launch to the addresses its tensors have now.
void rebind(Entry& e) {
  e.launch->bind(bound_operands(e));
  e.stale = false;
}

}  // namespace

aclOpExecutor* register_executor(const char* op, std::unique_ptr<Launch> launch, TensorParams params,
                                 ExecutorTensors tensors) {
  Entry e;
  e.op = op;
  e.launch = std::move(launch);
  e.params = std::move(params);
  e.tensors = std::move(tensors.records());
  for (const ExecutorTensors::Record& r : e.tensors) e.stale |= r.has_elements && !r.address;  // planned over stand-ins
  return reinterpret_cast<aclOpExecutor*>(insert_entry(std::move(e)));
}

int32_t launch_executor(const char* op, void* workspace, uint64_t workspace_size, aclOpExecutor* executor) {
  return guard(op, [&] {
    std::shared_ptr<Launch> launch;
    {
      std::lock_guard<std::mutex> lock(g_mutex);
      Entry& e = live_entry(op, executor);
      check(e.op == op, op, ": executor was created by ", e.op, "GetWorkspaceSize, not ", op, "GetWorkspaceSize");
      if (e.stale) rebind(e);
      const uint64_t needed = e.launch->workspace_bytes();
      check(workspace_size >= needed, op, ": workspaceSize ", workspace_size, " is smaller than the ", needed,
            " bytes GetWorkspaceSize asked for");
      check(workspace != nullptr || workspace_size == 0, op, ": workspace is null but workspaceSize is ",
            workspace_size);
      launch = e.launch;
      if (!e.repeatable) g_executors.erase(reinterpret_cast<uintptr_t>(executor));
    }
    run_traced(*launch, workspace);
  });
}

namespace {

// Which tensor parameters an address call counts: the Input / Output forms one side, aclSetTensorAddr
// and aclSetDynamicTensorAddr all of them, inputs first (the order of the GetWorkspaceSize signature).
enum class Side { kInput, kOutput, kAll };

const char* side_name(Side side) { return side == Side::kInput ? "input" : side == Side::kOutput ? "output" : "tensor"; }

// A list parameter's name in TensorParams ends in "[]"; its element i is recorded as "<name>[i]".
bool is_list_param(const std::string& name) { return name.size() > 2 && name.compare(name.size() - 2, 2, "[]") == 0; }

// The repeatable entry behind executor (caller holds g_mutex) and the name of its
// parameter `index` counted on `side`. null_status: what a NULL executor returns for this call.
std::pair<Entry*, std::string> address_slot(const char* fn, Status null_status, aclOpExecutor* executor, Side side,
                                             size_t index) {
  if (!executor) fail(null_status, fn, ": executor is null");
  Entry& e = live_entry(fn, executor);
  check(e.repeatable, fn, ": executor of ", e.op, " is not repeatable (call aclSetAclOpExecutorRepeatable "
        "right after ", e.op, "GetWorkspaceSize)");
  std::vector<std::string> names = side == Side::kOutput ? e.params.outputs : e.params.inputs;
  if (side == Side::kAll) names.insert(names.end(), e.params.outputs.begin(), e.params.outputs.end());
  check(index < names.size(), fn, ": index ", index, " is out of range: ", e.op, " has ", names.size(),
        side == Side::kAll ? "" : " ", side == Side::kAll ? "" : side_name(side), " tensors");
  return {&e, names[index]};
}

// The record of `arg` must belong to `tensor`: it (and the caller's tensor) get data pointer addr.
void set_recorded_addr(const char* fn, Entry& e, const std::string& arg, const std::string& what,
                       const aclTensor* tensor, void* addr) {
  bool found = false;
  for (ExecutorTensors::Record& r : e.tensors) {
    if (r.arg != arg) continue;
    check(r.user == tensor, fn, ": tensor ", static_cast<const void*>(tensor), " is not the ", arg, " (", what,
          ") passed to ", e.op, "GetWorkspaceSize");
    r.address = addr;
    found = true;
  }
  check(found, fn, ": ", what, " (", arg, ") of ", e.op,
        " was null at GetWorkspaceSize (or unused), so it has no address to refresh");
  const_cast<aclTensor*>(tensor)->data = addr;  // the caller's tensor records it too (as the vendor's)
  e.stale = true;
}

// index-th tensor parameter (counted on `side`) of a repeatable executor gets data pointer addr.
aclnnStatus set_tensor_addr(const char* fn, Status null_status, Side side, aclOpExecutor* executor, size_t index,
                            aclTensor* tensor, void* addr) {
  return guard(fn, [&] {
    std::lock_guard<std::mutex> lock(g_mutex);
    auto [e, arg] = address_slot(fn, null_status, executor, side, index);
    if (!tensor) fail(null_status, fn, ": tensor is null");
    check(!is_list_param(arg), fn, ": ", side_name(side), " ", index, " (", arg, ") of ", e->op,
          " is a tensor list: its elements take new addresses through aclSetDynamic*TensorAddr");
    set_recorded_addr(fn, *e, arg, concat(side_name(side), " ", index), tensor, addr);
  });
}

// Element relative_index of the tensor-list parameter ir_index (counted on `side`) gets data pointer addr.
aclnnStatus set_list_addr(const char* fn, Status null_status, Side side, aclOpExecutor* executor, size_t ir_index,
                          size_t relative_index, aclTensorList* tensors, void* addr) {
  return guard(fn, [&] {
    std::lock_guard<std::mutex> lock(g_mutex);
    if (!executor) fail(null_status, fn, ": executor is null");
    const Entry& live = live_entry(fn, executor);
    if (!tensors) fail(null_status, fn, ": tensors is null");
    const auto has_list = [](const std::vector<std::string>& names) {
      return std::any_of(names.begin(), names.end(), is_list_param);
    };
    check(has_list(live.params.inputs) || has_list(live.params.outputs), fn, ": ", live.op,
          " has no tensor-list parameter (irIndex ", ir_index, ")");
    auto [e, arg] = address_slot(fn, null_status, executor, side, ir_index);
    check(is_list_param(arg), fn, ": ", side_name(side), " ", ir_index, " (", arg, ") of ", e->op,
          " is not a tensor list (aclSet*TensorAddr refresh single tensors)");
    check(relative_index < tensors->tensors.size(), fn, ": relativeIndex ", relative_index,
          " is out of range: the list has ", tensors->tensors.size(), " tensors");
    const std::string name = arg.substr(0, arg.size() - 2);
    set_recorded_addr(fn, *e, concat(name, "[", relative_index, "]"),
                      concat(side_name(side), " ", ir_index, " element ", relative_index),
                      tensors->tensors[relative_index], addr);
  });
}

}  // namespace

}  // namespace tilegrad::core

using namespace tilegrad::core;

extern "C" {

ACLNN_API aclnnStatus aclDestroyAclOpExecutor(aclOpExecutor* executor) {
  return guard("aclDestroyAclOpExecutor", [&] {
    std::lock_guard<std::mutex> lock(g_mutex);
    live_entry("aclDestroyAclOpExecutor", executor);
    g_executors.erase(reinterpret_cast<uintptr_t>(executor));
  });
}

ACLNN_API aclnnStatus aclSetAclOpExecutorRepeatable(aclOpExecutor* executor) {
  return guard("aclSetAclOpExecutorRepeatable", [&] {
    std::lock_guard<std::mutex> lock(g_mutex);
    live_entry("aclSetAclOpExecutorRepeatable", executor).repeatable = true;
  });
}

ACLNN_API aclnnStatus aclSetInputTensorAddr(aclOpExecutor* executor, const size_t index, aclTensor* tensor,
                                            void* addr) {
  return set_tensor_addr("aclSetInputTensorAddr", tilegrad::Status::kParamNullptr, Side::kInput, executor, index, tensor,
                         addr);
}

ACLNN_API aclnnStatus aclSetOutputTensorAddr(aclOpExecutor* executor, const size_t index, aclTensor* tensor,
                                             void* addr) {
  return set_tensor_addr("aclSetOutputTensorAddr", tilegrad::Status::kParamNullptr, Side::kOutput, executor, index, tensor,
                         addr);
}

// The vendor documents 561103 (ACLNN_ERR_INNER_NULLPTR) for a NULL executor or tensor(s) here.
static const tilegrad::Status kInnerNullptr = static_cast<tilegrad::Status>(ACLNN_ERR_INNER_NULLPTR);

ACLNN_API aclnnStatus aclSetTensorAddr(aclOpExecutor* executor, const size_t index, aclTensor* tensor, void* addr) {
  return set_tensor_addr("aclSetTensorAddr", kInnerNullptr, Side::kAll, executor, index, tensor, addr);
}

ACLNN_API aclnnStatus aclSetDynamicInputTensorAddr(aclOpExecutor* executor, size_t irIndex, const size_t relativeIndex,
                                                   aclTensorList* tensors, void* addr) {
  return set_list_addr("aclSetDynamicInputTensorAddr", tilegrad::Status::kParamNullptr, Side::kInput, executor, irIndex,
                       relativeIndex, tensors, addr);
}

ACLNN_API aclnnStatus aclSetDynamicOutputTensorAddr(aclOpExecutor* executor, size_t irIndex,
                                                    const size_t relativeIndex, aclTensorList* tensors, void* addr) {
  return set_list_addr("aclSetDynamicOutputTensorAddr", tilegrad::Status::kParamNullptr, Side::kOutput, executor,
                       irIndex, relativeIndex, tensors, addr);
}

ACLNN_API aclnnStatus aclSetDynamicTensorAddr(aclOpExecutor* executor, size_t irIndex, const size_t relativeIndex,
                                              aclTensorList* tensors, void* addr) {
  return set_list_addr("aclSetDynamicTensorAddr", kInnerNullptr, Side::kAll, executor, irIndex, relativeIndex,
                       tensors, addr);
}

}  // extern "C"
