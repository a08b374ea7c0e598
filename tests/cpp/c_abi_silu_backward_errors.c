/* aclnnSiluBackward through the C ABI, from C: a correct run (contiguous, broadcast, negative
 * strides, in-place, empty) and every error path of specification sections 0 and 1 with its status
 * code and message. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "acl/acl.h"
#include "c_abi_tensor.h"
#include "expect.h"
#include "aclnnop/aclnn_silu_backward.h"

static double silu_grad(double dy, double x) {
  const double s = 1.0 / (1.0 + exp(-x));
  return dy * s * (1.0 + x * (1.0 - s));
}

static aclTensor* make_fmt(const int64_t* shape, uint64_t rank, aclDataType dt, aclFormat fmt, void* data) {
  int64_t strides[16], numel = 1;
  for (int i = (int)rank - 1; i >= 0; --i) {
    strides[i] = numel;
    numel *= shape[i];
  }
  return aclCreateTensor(shape, rank, dt, strides, 0, fmt, &numel, 1, data);
}

/* Phase 1 status (destroying the executor if it succeeded). */
static int phase1(const aclTensor* dy, const aclTensor* x, aclTensor* dx) {
  uint64_t ws = 0;
  aclOpExecutor* ex = NULL;
  int st = aclnnSiluBackwardGetWorkspaceSize(dy, x, dx, &ws, &ex);
  if (st == ACLNN_SUCCESS) aclDestroyAclOpExecutor(ex);
  return st;
}

/* Both phases. */
static int run(const aclTensor* dy, const aclTensor* x, aclTensor* dx) {
  uint64_t ws = 0;
  aclOpExecutor* ex = NULL;
  int st = aclnnSiluBackwardGetWorkspaceSize(dy, x, dx, &ws, &ex);
  if (st != ACLNN_SUCCESS) return st;
  if (ws != 0) return -1; /* SiLU backward needs no workspace */
  return aclnnSiluBackward(NULL, 0, ex, NULL);
}

static void test_runs(void) {
  float dy[8], x[8], dx[8];
  int64_t s24[2] = {2, 4};
  for (int i = 0; i < 8; ++i) dy[i] = 0.5f * (float)(i - 3), x[i] = (float)(i - 4) * 0.75f, dx[i] = 99.0f;
  aclTensor *tdy = contiguous(s24, 2, ACL_FLOAT, dy), *tx = contiguous(s24, 2, ACL_FLOAT, x);
  aclTensor *tdx = contiguous(s24, 2, ACL_FLOAT, dx);
  EXPECT(run(tdy, tx, tdx) == ACLNN_SUCCESS);
  for (int i = 0; i < 8; ++i) EXPECT(fabs(dx[i] - silu_grad(dy[i], x[i])) <= 1e-6 * (1 + fabs(silu_grad(dy[i], x[i]))));

  /* Broadcast: gradOutput [2,1], self [1,4] -> gradInput [2,4]. */
  int64_t s21[2] = {2, 1}, s14[2] = {1, 4};
  aclTensor *bdy = contiguous(s21, 2, ACL_FLOAT, dy), *bx = contiguous(s14, 2, ACL_FLOAT, x);
  EXPECT(run(bdy, bx, tdx) == ACLNN_SUCCESS);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 4; ++j) EXPECT(fabs(dx[i * 4 + j] - silu_grad(dy[i], x[j])) <= 1e-6);

  /* Negative stride: self read backwards (offset 7, stride -1 over storage of 8). */
  int64_t s8[1] = {8}, neg[1] = {-1}, st8[1] = {8};
  aclTensor* rx = aclCreateTensor(s8, 1, ACL_FLOAT, neg, 7, ACL_FORMAT_ND, st8, 1, x);
  aclTensor *fdy = contiguous(s8, 1, ACL_FLOAT, dy), *fdx = contiguous(s8, 1, ACL_FLOAT, dx);
  EXPECT(rx != NULL);
  EXPECT(run(fdy, rx, fdx) == ACLNN_SUCCESS);
  for (int i = 0; i < 8; ++i) EXPECT(fabs(dx[i] - silu_grad(dy[i], x[7 - i])) <= 1e-6);

  /* In place: gradInput is gradOutput. */
  float y[8];
  memcpy(y, dy, sizeof y);
  aclTensor *ty = contiguous(s8, 1, ACL_FLOAT, y), *tx8 = contiguous(s8, 1, ACL_FLOAT, x);
  EXPECT(run(ty, tx8, ty) == ACLNN_SUCCESS);
  for (int i = 0; i < 8; ++i) EXPECT(fabs(y[i] - silu_grad(dy[i], x[i])) <= 1e-6);

  /* Empty: succeeds with workspace 0. */
  int64_t s0[2] = {0, 4};
  aclTensor *e1 = contiguous(s0, 2, ACL_FLOAT, NULL), *e2 = contiguous(s0, 2, ACL_FLOAT, NULL);
  aclTensor *e3 = contiguous(s0, 2, ACL_FLOAT, NULL);
  EXPECT(run(e1, e2, e3) == ACLNN_SUCCESS);
  /* 0-d. */
  float a = 1.0f, b = 2.0f, c = 0.0f;
  aclTensor *z1 = contiguous(NULL, 0, ACL_FLOAT, &a), *z2 = contiguous(NULL, 0, ACL_FLOAT, &b);
  aclTensor *z3 = contiguous(NULL, 0, ACL_FLOAT, &c);
  EXPECT(run(z1, z2, z3) == ACLNN_SUCCESS);
  EXPECT(fabs(c - silu_grad(1.0, 2.0)) <= 1e-6);

  aclDestroyTensor(tdy); aclDestroyTensor(tx); aclDestroyTensor(tdx); aclDestroyTensor(bdy); aclDestroyTensor(bx);
  aclDestroyTensor(rx); aclDestroyTensor(fdy); aclDestroyTensor(fdx); aclDestroyTensor(ty); aclDestroyTensor(tx8);
  aclDestroyTensor(e1); aclDestroyTensor(e2); aclDestroyTensor(e3);
  aclDestroyTensor(z1); aclDestroyTensor(z2); aclDestroyTensor(z3);
}

static void test_errors(void) {
  float f[64] = {0}, g[64] = {0}, h[64] = {0};
  int32_t ints[8] = {0};
  uint16_t half[8] = {0};
  int64_t s24[2] = {2, 4}, s25[2] = {2, 5}, s3[1] = {3}, s9[9] = {1, 1, 1, 1, 1, 1, 1, 1, 2};
  aclTensor *dy = contiguous(s24, 2, ACL_FLOAT, f), *x = contiguous(s24, 2, ACL_FLOAT, g);
  aclTensor *dx = contiguous(s24, 2, ACL_FLOAT, h);
  uint64_t ws = 0;
  aclOpExecutor* ex = NULL;

  /* 161001: null tensors, null out-pointers, null data with elements, null executor at launch. */
  EXPECT_ERR(phase1(NULL, x, dx), ACLNN_ERR_PARAM_NULLPTR, "aclnnSiluBackward: gradOutput is null");
  EXPECT_ERR(phase1(dy, NULL, dx), ACLNN_ERR_PARAM_NULLPTR, "aclnnSiluBackward: self is null");
  EXPECT_ERR(phase1(dy, x, NULL), ACLNN_ERR_PARAM_NULLPTR, "aclnnSiluBackward: gradInput is null");
  EXPECT_ERR(aclnnSiluBackwardGetWorkspaceSize(dy, x, dx, NULL, &ex), ACLNN_ERR_PARAM_NULLPTR,
             "workspaceSize out-pointer is null");
  EXPECT_ERR(aclnnSiluBackwardGetWorkspaceSize(dy, x, dx, &ws, NULL), ACLNN_ERR_PARAM_NULLPTR,
             "executor out-pointer is null");
  aclTensor* nodata = contiguous(s24, 2, ACL_FLOAT, NULL);
  /* Phase 1 takes a tensor without data (the vendor's samples set addresses later); the launch refuses it. */
  EXPECT(phase1(dy, nodata, dx) == ACLNN_SUCCESS);
  EXPECT_ERR(run(dy, nodata, dx), ACLNN_ERR_PARAM_NULLPTR, "self data is null (give it an address");
  EXPECT_ERR(aclnnSiluBackward(NULL, 0, NULL, NULL), ACLNN_ERR_PARAM_NULLPTR, "executor is null");

  /* 161002: dtypes. */
  aclTensor* ti = contiguous(s24, 2, ACL_INT32, ints);
  EXPECT_ERR(phase1(ti, x, dx), ACLNN_ERR_PARAM_INVALID,
             "aclnnSiluBackward: gradOutput dtype must be one of {float32, float16, bfloat16}, got int32");
  EXPECT_ERR(phase1(dy, ti, dx), ACLNN_ERR_PARAM_INVALID, "self dtype must be one of");
  EXPECT_ERR(phase1(dy, x, ti), ACLNN_ERR_PARAM_INVALID, "gradInput dtype must be one of");
  aclTensor* th = contiguous(s24, 2, ACL_FLOAT16, half);
  EXPECT_ERR(phase1(dy, x, th), ACLNN_ERR_PARAM_INVALID, "gradInput dtype float16 != self dtype float32");
  aclTensor* th2 = contiguous(s24, 2, ACL_FLOAT16, half);
  EXPECT_ERR(phase1(th, x, th2), ACLNN_ERR_PARAM_INVALID, "so gradInput must be float32, got float16");
  EXPECT(phase1(th, x, dx) == ACLNN_SUCCESS); /* mixed inputs -> fp32 output is fine */
  aclTensor* tbad = contiguous(s24, 2, (aclDataType)99, f); /* a code no aclDataType has: no tensor */
  EXPECT(tbad == NULL);
  EXPECT(strstr(aclGetRecentErrMsg(), "aclCreateTensor: dataType 99 is not a data type tilegrad knows") != NULL);
  aclTensor* tcx = contiguous(s24, 2, ACL_COMPLEX64, f); /* a known type no operator computes on: named */
  EXPECT_ERR(phase1(dy, tcx, dx), ACLNN_ERR_PARAM_INVALID, "self dtype must be one of {float32, float16, bfloat16}, got complex64");
  aclDestroyTensor(tcx);

  /* Shapes and ranks. */
  aclTensor* d25 = contiguous(s25, 2, ACL_FLOAT, h);
  EXPECT_ERR(phase1(dy, x, d25), ACLNN_ERR_PARAM_INVALID, "aclnnSiluBackward: gradInput shape [2,5] != self shape [2,4]");
  aclTensor* t3 = contiguous(s3, 1, ACL_FLOAT, f);
  EXPECT_ERR(phase1(t3, x, dx), ACLNN_ERR_PARAM_INVALID, "gradOutput shape [3] and self shape [2,4] do not broadcast");
  int64_t s14[2] = {1, 4};
  aclTensor* b14 = contiguous(s14, 2, ACL_FLOAT, f);
  EXPECT_ERR(phase1(b14, x, d25), ACLNN_ERR_PARAM_INVALID, "gradInput shape [2,5] != broadcast of gradOutput [1,4] and self [2,4] = [2,4]");
  aclTensor* r9 = contiguous(s9, 9, ACL_FLOAT, f);
  aclTensor* r9b = contiguous(s9, 9, ACL_FLOAT, g);
  aclTensor* r9c = contiguous(s9, 9, ACL_FLOAT, h);
  EXPECT_ERR(phase1(r9, r9b, r9c), ACLNN_ERR_PARAM_INVALID, "rank must be at most 8, got 9");

  /* Formats: plain ones are accepted, private packed ones rejected. */
  aclTensor* nchw = make_fmt(s24, 2, ACL_FLOAT, ACL_FORMAT_NCHW, f);
  EXPECT(phase1(nchw, x, dx) == ACLNN_SUCCESS);
  static const aclFormat privates[] = {ACL_FORMAT_NC1HWC0, ACL_FORMAT_FRACTAL_Z, ACL_FORMAT_FRACTAL_NZ,
                                       ACL_FORMAT_NDC1HWC0, ACL_FRACTAL_Z_3D, ACL_FORMAT_NC1HWC0_C04};
  for (size_t i = 0; i < sizeof privates / sizeof privates[0]; ++i) {
    aclTensor* p = make_fmt(s24, 2, ACL_FLOAT, privates[i], g);
    EXPECT_ERR(phase1(dy, p, dx), ACLNN_ERR_PARAM_INVALID, "is a private packed format");
    aclDestroyTensor(p);
  }

  /* Views reaching outside their storage. */
  int64_t st4[1] = {4}, st8[1] = {8}, str[2] = {4, 1}, big[2] = {4, 2};
  aclTensor* small = aclCreateTensor(s24, 2, ACL_FLOAT, str, 0, ACL_FORMAT_ND, st4, 1, g);
  EXPECT_ERR(phase1(dy, small, dx), ACLNN_ERR_PARAM_INVALID, "outside its storage of 4 elements");
  aclTensor* shifted = aclCreateTensor(s24, 2, ACL_FLOAT, str, 1, ACL_FORMAT_ND, st8, 1, g);
  EXPECT_ERR(phase1(dy, x, shifted), ACLNN_ERR_PARAM_INVALID, "gradInput view (shape [2,4], strides [4,1], offset 1) reaches elements [1, 8]");
  aclTensor* strided = aclCreateTensor(s24, 2, ACL_FLOAT, big, 0, ACL_FORMAT_ND, st8, 1, g);
  EXPECT_ERR(phase1(strided, x, dx), ACLNN_ERR_PARAM_INVALID, "gradOutput view");
  int64_t s8[1] = {8}, neg[1] = {-1};
  aclTensor* backwards = aclCreateTensor(s8, 1, ACL_FLOAT, neg, 3, ACL_FORMAT_ND, st8, 1, g);
  aclTensor *f8 = contiguous(s8, 1, ACL_FLOAT, f), *h8 = contiguous(s8, 1, ACL_FLOAT, h);
  EXPECT_ERR(phase1(f8, backwards, h8), ACLNN_ERR_PARAM_INVALID, "reaches elements [-4, 3]");

  /* Extents that overflow int64 are refused (never wrap around into "inside the storage"). */
  int64_t huge[2] = {(int64_t)1 << 62, (int64_t)1 << 62}, s2x2[2] = {2, 2}, s3b[1] = {3};
  aclTensor* ovf1 = aclCreateTensor(s3b, 1, ACL_FLOAT, huge, 0, ACL_FORMAT_ND, st8, 1, g);
  aclTensor *d3 = contiguous(s3b, 1, ACL_FLOAT, f), *o3 = contiguous(s3b, 1, ACL_FLOAT, h);
  EXPECT_ERR(phase1(d3, ovf1, o3), ACLNN_ERR_PARAM_INVALID, "overflows 64-bit indexing");
  aclTensor* ovf2 = aclCreateTensor(s2x2, 2, ACL_FLOAT, huge, 0, ACL_FORMAT_ND, st8, 1, g);
  int64_t one[1] = {1}, bigstorage[2] = {(int64_t)1 << 62, 8};
  aclTensor *d22 = contiguous(s2x2, 2, ACL_FLOAT, f), *o22 = contiguous(s2x2, 2, ACL_FLOAT, h);
  EXPECT_ERR(phase1(d22, ovf2, o22), ACLNN_ERR_PARAM_INVALID, "overflows 64-bit indexing");
  aclTensor* ovf3 = aclCreateTensor(s8, 1, ACL_FLOAT, one, 0, ACL_FORMAT_ND, bigstorage, 2, g);
  EXPECT_ERR(phase1(f8, ovf3, h8), ACLNN_ERR_PARAM_INVALID, "overflows 64-bit indexing");
  aclDestroyTensor(ovf1); aclDestroyTensor(ovf2); aclDestroyTensor(ovf3);
  aclDestroyTensor(d3); aclDestroyTensor(o3); aclDestroyTensor(d22); aclDestroyTensor(o22);

  /* Output overlaps: itself (zero stride), an input partially. */
  int64_t zero[2] = {0, 1};
  aclTensor* self_overlap = aclCreateTensor(s24, 2, ACL_FLOAT, zero, 0, ACL_FORMAT_ND, st4, 1, h);
  EXPECT_ERR(phase1(dy, x, self_overlap), ACLNN_ERR_PARAM_INVALID, "gradInput has overlapping elements");
  aclTensor* partial = contiguous(s24, 2, ACL_FLOAT, g + 1);
  EXPECT_ERR(phase1(dy, x, partial), ACLNN_ERR_PARAM_INVALID, "gradInput overlaps self without being the same view");

  /* Executors: single use; a destroyed one cannot launch; null workspace with a size. */
  EXPECT(aclnnSiluBackwardGetWorkspaceSize(dy, x, dx, &ws, &ex) == ACLNN_SUCCESS && ws == 0);
  EXPECT(aclnnSiluBackward(NULL, 0, ex, NULL) == ACLNN_SUCCESS);
  EXPECT_ERR(aclnnSiluBackward(NULL, 0, ex, NULL), ACLNN_ERR_PARAM_INVALID, "is not live (already launched");
  EXPECT(aclnnSiluBackwardGetWorkspaceSize(dy, x, dx, &ws, &ex) == ACLNN_SUCCESS);
  EXPECT_ERR(aclnnSiluBackward(NULL, 64, ex, NULL), ACLNN_ERR_PARAM_INVALID, "workspace is null but workspaceSize is 64");
  EXPECT(aclnnSiluBackward(NULL, 0, ex, NULL) == ACLNN_SUCCESS); /* the failed launch did not consume it */
  EXPECT(aclnnSiluBackwardGetWorkspaceSize(dy, x, dx, &ws, &ex) == ACLNN_SUCCESS);
  EXPECT(aclDestroyAclOpExecutor(ex) == ACLNN_SUCCESS);
  EXPECT_ERR(aclnnSiluBackward(NULL, 0, ex, NULL), ACLNN_ERR_PARAM_INVALID, "is not live");
  EXPECT_ERR(aclDestroyAclOpExecutor(ex), ACLNN_ERR_PARAM_INVALID, "is not live");
  EXPECT_ERR(aclDestroyAclOpExecutor(NULL), ACLNN_ERR_PARAM_NULLPTR, "aclDestroyAclOpExecutor: executor is null");
  EXPECT_ERR(aclnnSiluBackward(NULL, 0, (aclOpExecutor*)(uintptr_t)0x12345, NULL), ACLNN_ERR_PARAM_INVALID, "is not live");

  aclDestroyTensor(dy); aclDestroyTensor(x); aclDestroyTensor(dx); aclDestroyTensor(nodata);
  aclDestroyTensor(ti); aclDestroyTensor(th); aclDestroyTensor(th2); aclDestroyTensor(d25); aclDestroyTensor(t3);
  aclDestroyTensor(b14); aclDestroyTensor(r9); aclDestroyTensor(r9b); aclDestroyTensor(r9c); aclDestroyTensor(nchw);
  aclDestroyTensor(small); aclDestroyTensor(shifted); aclDestroyTensor(strided); aclDestroyTensor(backwards);
  aclDestroyTensor(f8); aclDestroyTensor(h8); aclDestroyTensor(self_overlap); aclDestroyTensor(partial);
}

int main(void) {
  if (aclInit(NULL) != ACL_SUCCESS || aclrtSetDevice(0) != ACL_SUCCESS) return 1;
  test_runs();
  test_errors();
  aclrtResetDevice(0);
  aclFinalize();
  return expect_report("c_abi_silu_backward_errors");
}
