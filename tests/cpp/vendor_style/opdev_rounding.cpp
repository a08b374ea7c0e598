/* Reads numbers (one per line, any strtod form such as 0x1.8p-3) and prints, for each:
 *   <fp16_t bits> <bfloat16 bits> <fp16_t from float bits> <bfloat16 from float bits>
 *   <float(fp16_t)> <float(bfloat16)> <aclFloatToFloat16 of the float>
 * in hex / %a form, so the test suite can compare every conversion with round-to-nearest-even
 * references (NumPy float16 from float64, an exact bfloat16 rounding). C++11. */
#include <cstdio>
#include <cstdlib>

#include "acl/acl.h"
#include "aclnn/opdev/bfloat16.h"
#include "aclnn/opdev/fp16_t.h"

int main() {
  char line[256];
  while (std::fgets(line, sizeof line, stdin)) {
    const double d = std::strtod(line, nullptr);
    const float f = static_cast<float>(d);
    const op::fp16_t h(d);
    const op::bfloat16 b(d);
    const op::fp16_t hf(f);
    const op::bfloat16 bf(f);
    std::printf("%04x %04x %04x %04x %a %a %04x\n", h.val, b.value, hf.val, bf.value,
                static_cast<double>(static_cast<float>(h)), static_cast<double>(static_cast<float>(b)),
                aclFloatToFloat16(f));
  }
  // Integers and arithmetic through float, as vendor examples use them.
  const op::fp16_t three(3), big(70000L), neg(-2LL);
  op::fp16_t sum = three;
  sum += 0.5f;
  const op::bfloat16 seven(7u);
  std::printf("ints %04x %04x %04x %04x %04x\n", three.val, big.val, neg.val, sum.val, seven.value);
  return 0;
}
