/* Every vendor header tilegrad ships, compiled as C99 (the test suite also builds this with
 * -std=c99 -pedantic -Werror), plus the aclFloat16 conversions and data type sizes from C. */
#include <stdio.h>

#include "acl/acl.h"
#include "acl/acl_base.h"
#include "acl/acl_rt.h"
#include "aclnn/aclnn_base.h"
#include "aclnnop/aclnn_binary_cross_entropy_with_logits.h"
#include "aclnnop/aclnn_binary_cross_entropy_with_logits_backward.h"
#include "aclnnop/aclnn_cross_entropy_loss.h"
#include "aclnnop/aclnn_cross_entropy_loss_grad.h"
#include "aclnnop/aclnn_embedding_dense_backward.h"
#include "aclnnop/aclnn_flash_attention_score.h"
#include "aclnnop/aclnn_flash_attention_score_grad.h"
#include "aclnnop/aclnn_fused_cross_entropy_loss_with_max_sum.h"
#include "aclnnop/aclnn_fused_linear_cross_entropy_loss_grad.h"
#include "aclnnop/aclnn_fused_linear_online_max_sum.h"
#include "aclnnop/aclnn_rotary_position_embedding.h"
#include "aclnnop/aclnn_rotary_position_embedding_grad.h"
#include "aclnnop/aclnn_silu_backward.h"

static int g_failures = 0;

static void expect(int ok, const char* what) {
  if (!ok) {
    fprintf(stderr, "FAIL: %s\n", what);
    ++g_failures;
  }
}

int main(void) {
  aclFloat16 h = aclFloatToFloat16(0.1f);
  expect(h == 0x2e66, "aclFloatToFloat16(0.1) == 0x2e66");
  expect(aclFloat16ToFloat(h) == 0.0999755859375f, "aclFloat16ToFloat(0x2e66)");
  expect(aclFloatToFloat16(-0.0f) == 0x8000, "negative zero keeps its sign");
  expect(aclFloatToFloat16(5.9604644775390625e-8f) == 0x0001, "smallest subnormal");
  expect(aclFloatToFloat16(2.98023223876953125e-8f) == 0x0000, "half of it ties to even (zero)");
  expect(aclDataTypeSize(ACL_FLOAT16) == 2 && aclDataTypeSize(ACL_COMPLEX128) == 16, "aclDataTypeSize");
  expect(aclDataTypeSize((aclDataType)99) == 0, "aclDataTypeSize of an unknown type is 0");
  {
    aclrtRunMode mode;
    expect(aclrtGetRunMode(&mode) == ACL_SUCCESS && mode == ACL_HOST, "aclrtGetRunMode");
  }
  {
    bool values[2] = {true, false};
    aclBoolArray* a = aclCreateBoolArray(values, 2);
    uint64_t n = 0;
    expect(a != NULL && aclGetBoolArraySize(a, &n) == ACLNN_SUCCESS && n == 2, "aclCreateBoolArray from C");
    aclDestroyBoolArray(a);
  }
  if (g_failures == 0) printf("c_headers_c99: ok\n");
  return g_failures ? 1 : 0;
}
