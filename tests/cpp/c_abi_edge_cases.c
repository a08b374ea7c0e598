/* Issue 14: the C ABI under hostile use, from C, run by ctest (and by CI under AddressSanitizer +
 * UndefinedBehaviorSanitizer): null pointers, negative and overflowing sizes, views outside their
 * storage, double launches, short or null workspaces, tensors destroyed between the two phases,
 * aclrtMemcpy ranges. Every call must return its status code with a message, never crash, never
 * read or write outside the memory it was given. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "acl/acl.h"
#include "aclnnop/aclnn_cross_entropy_loss.h"
#include "aclnnop/aclnn_embedding_dense_backward.h"
#include "aclnnop/aclnn_silu_backward.h"
#include "c_abi_tensor.h"
#include "expect.h"

enum { kNullptr = 161001, kInvalid = 161002 };

static int embedding_phase1(const aclTensor* g, const aclTensor* idx, uint64_t v, const aclTensor* out,
                            uint64_t* ws, aclOpExecutor** ex) {
  return aclnnEmbeddingDenseBackwardGetWorkspaceSize(g, idx, v, (uint64_t)-1, false, out, ws, ex);
}

static void test_null_pointers(void) {
  float a[4] = {1, 2, 3, 4}, b[4] = {0};
  int64_t shape[1] = {4};
  aclTensor *ta = contiguous(shape, 1, ACL_FLOAT, a), *tb = contiguous(shape, 1, ACL_FLOAT, b);
  uint64_t ws = 0;
  aclOpExecutor* ex = NULL;
  EXPECT_ERR(aclnnSiluBackwardGetWorkspaceSize(NULL, ta, tb, &ws, &ex), kNullptr, "gradOutput");
  EXPECT_ERR(aclnnSiluBackwardGetWorkspaceSize(ta, NULL, tb, &ws, &ex), kNullptr, "self");
  EXPECT_ERR(aclnnSiluBackwardGetWorkspaceSize(ta, ta, NULL, &ws, &ex), kNullptr, "gradInput");
  EXPECT_ERR(aclnnSiluBackwardGetWorkspaceSize(ta, ta, tb, NULL, &ex), kNullptr, "workspaceSize out-pointer is null");
  EXPECT_ERR(aclnnSiluBackwardGetWorkspaceSize(ta, ta, tb, &ws, NULL), kNullptr, "executor out-pointer is null");
  EXPECT_ERR(aclnnSiluBackward(NULL, 0, NULL, NULL), kNullptr, "executor is null");
  EXPECT_ERR(aclnnEmbeddingDenseBackward(NULL, 0, NULL, NULL), kNullptr, "executor is null");
  /* a tensor with elements but no data: phase 1 accepts it (the vendor's flow gives addresses
     with aclSetInputTensorAddr before the launch); launching without one is 161001 */
  aclTensor* nodata = contiguous(shape, 1, ACL_FLOAT, NULL);
  if (nodata) {
    EXPECT(aclnnSiluBackwardGetWorkspaceSize(nodata, ta, tb, &ws, &ex) == ACLNN_SUCCESS);
    EXPECT_ERR(aclnnSiluBackward(NULL, 0, ex, NULL), kNullptr, "data is null (give it an address");
    EXPECT(aclDestroyAclOpExecutor(ex) == ACLNN_SUCCESS);
    aclDestroyTensor(nodata);
  }
  /* an executor id that was never handed out */
  EXPECT_ERR(aclnnSiluBackward(NULL, 0, (aclOpExecutor*)(uintptr_t)0x10, NULL), kInvalid, "is not live");
  EXPECT(aclDestroyTensor(ta) == ACLNN_SUCCESS);
  EXPECT(aclDestroyTensor(tb) == ACLNN_SUCCESS);
}

static void test_negative_and_overflowing_shapes(void) {
  float a[4] = {0};
  int64_t neg[2] = {2, -1}, one = 1;
  int64_t strides[2] = {1, 1};
  EXPECT(aclCreateTensor(neg, 2, ACL_FLOAT, strides, 0, ACL_FORMAT_ND, &one, 1, a) == NULL);
  EXPECT(aclCreateTensor(NULL, 2, ACL_FLOAT, strides, 0, ACL_FORMAT_ND, &one, 1, a) == NULL);

  /* elements or bytes beyond int64 */
  int64_t huge[2] = {(int64_t)1 << 62, 8}, huge_strides[2] = {8, 1}, storage = INT64_MAX;
  aclTensor* t = aclCreateTensor(huge, 2, ACL_FLOAT, huge_strides, 0, ACL_FORMAT_ND, &storage, 1, a);
  uint64_t ws = 0;
  aclOpExecutor* ex = NULL;
  if (t) {
    EXPECT_ERR(aclnnSiluBackwardGetWorkspaceSize(t, t, t, &ws, &ex), kInvalid, "");
    aclDestroyTensor(t);
  }
  /* a stride of INT64_MIN (|stride| does not exist) */
  int64_t s2[1] = {2}, bad_stride[1] = {INT64_MIN}, st2 = 2;
  t = aclCreateTensor(s2, 1, ACL_FLOAT, bad_stride, 0, ACL_FORMAT_ND, &st2, 1, a);
  if (t) {
    EXPECT_ERR(aclnnSiluBackwardGetWorkspaceSize(t, t, t, &ws, &ex), kInvalid, "");
    aclDestroyTensor(t);
  }

  /* embedding: numWeights 2^60 with 2^57 zero-stride indices: the workspace size overflows int64 */
  int64_t idx_data[1] = {0};
  float g[1] = {0};
  int64_t L = (int64_t)1 << 57, V = (int64_t)1 << 60;
  int64_t ishape[1] = {L}, istride[1] = {0}, gshape[2] = {L, 1}, gstride[2] = {0, 1}, oshape[2] = {V, 1};
  int64_t ostride[2] = {1, 1};
  aclTensor* idx = aclCreateTensor(ishape, 1, ACL_INT64, istride, 0, ACL_FORMAT_ND, &one, 1, idx_data);
  aclTensor* grad = aclCreateTensor(gshape, 2, ACL_FLOAT, gstride, 0, ACL_FORMAT_ND, &one, 1, g);
  /* out's storage described above both inputs (never touched: phase 1 only) */
  uintptr_t above = ((uintptr_t)idx_data > (uintptr_t)g ? (uintptr_t)idx_data : (uintptr_t)g) + 4096;
  aclTensor* out = aclCreateTensor(oshape, 2, ACL_FLOAT, ostride, 0, ACL_FORMAT_ND, &V, 1, (void*)above);
  EXPECT(idx && grad && out);
  EXPECT_ERR(embedding_phase1(grad, idx, (uint64_t)V, out, &ws, &ex), kInvalid, "overflows 64-bit sizes");
  /* numWeights not matching out, and numWeights beyond int64 */
  EXPECT_ERR(embedding_phase1(grad, idx, (uint64_t)V + 1, out, &ws, &ex), kInvalid, "out shape");
  EXPECT_ERR(embedding_phase1(grad, idx, UINT64_MAX, out, &ws, &ex), kInvalid, "");
  aclDestroyTensor(idx);
  aclDestroyTensor(grad);
  aclDestroyTensor(out);

  /* cross entropy: (2^59, 0) logits, zero-stride targets: 24 bytes per row overflows int64 */
  int64_t rows = (int64_t)1 << 59;
  int64_t xshape[2] = {rows, 0}, xstride[2] = {0, 1}, tshape[1] = {rows}, tstride[1] = {0};
  float loss = 0;
  aclTensor* x = aclCreateTensor(xshape, 2, ACL_FLOAT, xstride, 0, ACL_FORMAT_ND, &one, 1, a);
  aclTensor* tgt = aclCreateTensor(tshape, 1, ACL_INT64, tstride, 0, ACL_FORMAT_ND, &one, 1, idx_data);
  aclTensor* tloss = aclCreateTensor(NULL, 0, ACL_FLOAT, NULL, 0, ACL_FORMAT_ND, &one, 1, &loss);
  aclTensor* lp = aclCreateTensor(xshape, 2, ACL_FLOAT, xstride, 0, ACL_FORMAT_ND, &one, 1, a);
  EXPECT(x && tgt && tloss && lp);
  EXPECT_ERR(aclnnCrossEntropyLossGetWorkspaceSize(x, tgt, NULL, "mean", -100, 0.0, 0.0, false, tloss, lp, NULL, NULL,
                                                   &ws, &ex),
             kInvalid, "overflows 64-bit sizes");
  aclDestroyTensor(x);
  aclDestroyTensor(tgt);
  aclDestroyTensor(tloss);
  aclDestroyTensor(lp);
}

static void test_out_of_storage(void) {
  float a[8] = {0}, b[8] = {0};
  int64_t shape[1] = {8}, stride[1] = {1}, small = 4, neg_stride[1] = {-1};
  aclTensor* past = aclCreateTensor(shape, 1, ACL_FLOAT, stride, 0, ACL_FORMAT_ND, &small, 1, a);
  aclTensor* offset_past = aclCreateTensor(shape, 1, ACL_FLOAT, stride, 1, ACL_FORMAT_ND, shape, 1, a);
  aclTensor* before = aclCreateTensor(shape, 1, ACL_FLOAT, neg_stride, 0, ACL_FORMAT_ND, shape, 1, a);
  aclTensor* negative_offset = aclCreateTensor(shape, 1, ACL_FLOAT, stride, -1, ACL_FORMAT_ND, shape, 1, a);
  aclTensor* ok = aclCreateTensor(shape, 1, ACL_FLOAT, stride, 0, ACL_FORMAT_ND, shape, 1, b);
  uint64_t ws = 0;
  aclOpExecutor* ex = NULL;
  aclTensor* bad[4] = {past, offset_past, before, negative_offset};
  for (int i = 0; i < 4; ++i) {
    if (!bad[i]) continue; /* refused by aclCreateTensor already (a negative offset): fine too */
    EXPECT_ERR(aclnnSiluBackwardGetWorkspaceSize(bad[i], ok, ok, &ws, &ex), kInvalid, "");
    EXPECT_ERR(aclnnSiluBackwardGetWorkspaceSize(ok, ok, bad[i], &ws, &ex), kInvalid, "");
    aclDestroyTensor(bad[i]);
  }
  aclDestroyTensor(ok);
}

/* Embedding backward over 6 indices into numWeights rows: phase 1, then the caller's choices. */
typedef struct {
  float grad[6 * 3];
  int64_t idx[6];
  float out[4096 * 3];
  aclTensor *tg, *ti, *to;
} EmbCase;

static void emb_case_init(EmbCase* c, int64_t v) {
  const int64_t rows[6] = {3, 0, 3, v - 1, 2, 3};
  for (int i = 0; i < 18; ++i) c->grad[i] = (float)(i + 1) * 0.5f;
  for (int i = 0; i < 6; ++i) c->idx[i] = rows[i];
  for (int i = 0; i < 4096 * 3; ++i) c->out[i] = -7.0f;
  int64_t gs[2] = {6, 3}, is[1] = {6}, os[2] = {v, 3};
  c->tg = contiguous(gs, 2, ACL_FLOAT, c->grad);
  c->ti = contiguous(is, 1, ACL_INT64, c->idx);
  c->to = contiguous(os, 2, ACL_FLOAT, c->out);
}

static int emb_case_check(const EmbCase* c, int64_t v) {
  for (int64_t r = 0; r < v; ++r)
    for (int d = 0; d < 3; ++d) {
      float want = 0.0f;
      for (int i = 0; i < 6; ++i)
        if (c->idx[i] == r) want += c->grad[i * 3 + d];
      if (c->out[r * 3 + d] != want) return 0;
    }
  return 1;
}

static void test_executor_misuse_and_workspace(void) {
  for (int k = 0; k < 2; ++k) {
    const int64_t v = k == 0 ? 8 : 4096; /* counting sort, then the sparse (sorted) path */
    EmbCase* c = (EmbCase*)malloc(sizeof(EmbCase));
    emb_case_init(c, v);
    uint64_t ws = 0;
    aclOpExecutor* ex = NULL;
    EXPECT(embedding_phase1(c->tg, c->ti, (uint64_t)v, c->to, &ws, &ex) == ACLNN_SUCCESS);
    EXPECT(ws > 0);
    void* work = NULL;
    EXPECT(aclrtMalloc(&work, ws, ACL_MEM_MALLOC_HUGE_FIRST) == ACL_SUCCESS);
    /* short and null workspaces are refused and leave the executor usable */
    EXPECT_ERR(aclnnEmbeddingDenseBackward(work, ws - 1, ex, NULL), kInvalid, "is smaller than the");
    EXPECT_ERR(aclnnEmbeddingDenseBackward(NULL, ws, ex, NULL), kInvalid, "workspace is null");
    EXPECT_ERR(aclnnEmbeddingDenseBackward(NULL, 0, ex, NULL), kInvalid, "is smaller than the");
    /* the wrong operator's launch */
    EXPECT_ERR(aclnnSiluBackward(work, ws, ex, NULL), kInvalid, "executor was created by");
    /* tensors destroyed between the two phases: the launch keeps what it needs */
    EXPECT(aclDestroyTensor(c->tg) == ACLNN_SUCCESS);
    EXPECT(aclDestroyTensor(c->ti) == ACLNN_SUCCESS);
    EXPECT(aclDestroyTensor(c->to) == ACLNN_SUCCESS);
    EXPECT(aclnnEmbeddingDenseBackward(work, ws, ex, NULL) == ACLNN_SUCCESS);
    EXPECT(emb_case_check(c, v));
    /* a second launch, and destroying a launched executor */
    EXPECT_ERR(aclnnEmbeddingDenseBackward(work, ws, ex, NULL), kInvalid, "is not live");
    EXPECT_ERR(aclDestroyAclOpExecutor(ex), kInvalid, "is not live");
    EXPECT(aclrtFree(work) == ACL_SUCCESS);
    free(c);
  }
  /* destroying an executor that was never launched, then launching it */
  EmbCase* c = (EmbCase*)malloc(sizeof(EmbCase));
  emb_case_init(c, 8);
  uint64_t ws = 0;
  aclOpExecutor* ex = NULL;
  EXPECT(embedding_phase1(c->tg, c->ti, 8, c->to, &ws, &ex) == ACLNN_SUCCESS);
  EXPECT(aclDestroyAclOpExecutor(ex) == ACLNN_SUCCESS);
  EXPECT_ERR(aclnnEmbeddingDenseBackward(NULL, 0, ex, NULL), kInvalid, "is not live");
  /* an index out of range: 161002 at launch naming it, workspace freed, nothing leaked */
  c->idx[4] = 8;
  EXPECT(embedding_phase1(c->tg, c->ti, 8, c->to, &ws, &ex) == ACLNN_SUCCESS);
  void* work = malloc(ws + 64);
  void* aligned = (void*)(((uintptr_t)work + 63) & ~(uintptr_t)63);
  EXPECT_ERR(aclnnEmbeddingDenseBackward(aligned, ws, ex, NULL), kInvalid, "indices[4] must be in [0, numWeights)");
  free(work);
  aclDestroyTensor(c->tg);
  aclDestroyTensor(c->ti);
  aclDestroyTensor(c->to);
  free(c);
}

static void test_memcpy_ranges(void) {
  void* dev = NULL;
  char host[256];
  memset(host, 1, sizeof host);
  EXPECT(aclrtMalloc(&dev, 128, ACL_MEM_MALLOC_HUGE_FIRST) == ACL_SUCCESS);
  EXPECT(aclrtMemcpy(dev, 128, host, 128, ACL_MEMCPY_HOST_TO_DEVICE) == ACL_SUCCESS);
  EXPECT(aclrtMemcpy(dev, 128, host, 129, ACL_MEMCPY_HOST_TO_DEVICE) != ACL_SUCCESS);      /* count > destMax */
  EXPECT(aclrtMemcpy(dev, 256, host, 200, ACL_MEMCPY_HOST_TO_DEVICE) != ACL_SUCCESS);      /* past the allocation */
  EXPECT(aclrtMemcpy((char*)dev + 64, 64, host, 65, ACL_MEMCPY_HOST_TO_DEVICE) != ACL_SUCCESS);
  EXPECT(aclrtMemcpy(host, 256, (char*)dev + 100, 64, ACL_MEMCPY_DEVICE_TO_HOST) != ACL_SUCCESS); /* read past */
  EXPECT(aclrtMemcpy(host, 256, dev, 128, ACL_MEMCPY_DEVICE_TO_HOST) == ACL_SUCCESS);
  EXPECT(aclrtMemcpy(NULL, 16, host, 16, ACL_MEMCPY_HOST_TO_DEVICE) != ACL_SUCCESS);
  EXPECT(aclrtMemcpy(dev, 128, NULL, 16, ACL_MEMCPY_HOST_TO_DEVICE) != ACL_SUCCESS);
  EXPECT(aclrtMemcpy(dev, SIZE_MAX, host, SIZE_MAX, ACL_MEMCPY_HOST_TO_DEVICE) != ACL_SUCCESS);
  EXPECT(aclrtMemset(dev, 128, 0, 129) != ACL_SUCCESS);
  EXPECT(aclrtMemset(dev, 128, 0, 128) == ACL_SUCCESS);
  EXPECT(aclrtFree(dev) == ACL_SUCCESS);
  EXPECT(aclrtFree(dev) != ACL_SUCCESS); /* double free is an error, not a crash */
  void* none = NULL;
  EXPECT(aclrtMalloc(&none, SIZE_MAX, ACL_MEM_MALLOC_HUGE_FIRST) != ACL_SUCCESS);
  EXPECT(aclrtMalloc(NULL, 16, ACL_MEM_MALLOC_HUGE_FIRST) != ACL_SUCCESS);
}

int main(void) {
  EXPECT(aclInit(NULL) == ACL_SUCCESS);
  EXPECT(aclrtSetDevice(0) == ACL_SUCCESS);
  test_null_pointers();
  test_negative_and_overflowing_shapes();
  test_out_of_storage();
  test_executor_misuse_and_workspace();
  test_memcpy_ranges();
  aclrtResetDevice(0);
  aclFinalize();
  return expect_report("c_abi_edge_cases");
}
