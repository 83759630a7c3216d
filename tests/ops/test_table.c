/* The CPU backend's op table (its members are made from kernels/ops.def): its name and activation
 * type, and the memory and thread functions behave. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/threads.h"
#include "kernels/ops.h"
#include "tests/ops/op_test.h"

int main(void) {
  const TxlOps *ops = txl_ops_cpu();
  printf("op table\n");
  ot_check_true("name is \"cpu\"", ops && strcmp(ops->name, "cpu") == 0, "%s", ops ? ops->name : "(null)");
  ot_check_true("activations in fp32", ops->act == TXL_F32, "act = %d", (int)ops->act);

  printf("memory\n");
  const size_t sizes[] = {1, 7, 64, 1000, 1 << 20};
  int aligned = 1, zeroed = 1;
  for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
    unsigned char *p = ops->alloc(sizes[k], "test buffer");
    aligned &= ((uintptr_t)p % 256) == 0;
    for (size_t i = 0; i < sizes[k]; i++) zeroed &= p[i] == 0;
    ops->free(p);
  }
  ot_check_true("alloc 256-byte aligned (as cudaMalloc)", aligned, NULL);
  ot_check_true("alloc zero-filled", zeroed, NULL);
  float a[37], b[37], c[37];
  for (int i = 0; i < 37; i++) a[i] = (float)i - 3.5f;
  float *d = ops->alloc(sizeof a, "device copy");
  ops->to_device(d, a, sizeof a);
  float *e = ops->alloc(sizeof a, "device copy 2");
  ops->copy(e, d, sizeof a);
  ops->to_host(b, e, sizeof a);
  ot_check_same("to_device / copy / to_host", b, a, sizeof a);
  ops->zero(e, sizeof a);
  ops->to_host(c, e, sizeof a);
  memset(b, 0, sizeof b);
  ot_check_same("zero", c, b, sizeof c);
  ops->upload_reserve(sizeof a); /* nothing to make on the CPU */
  ops->upload(e, a, sizeof a);
  ops->to_host(b, e, sizeof a);
  ot_check_same("upload", b, a, sizeof a);
  ops->free(d), ops->free(e);
  ops->free(NULL);

  printf("threads\n");
  txl_cpu_set_threads(1);
  const int t1 = txl_cpu_threads();
  txl_cpu_set_threads(2);
  ot_check_true("txl_cpu_set_threads / txl_cpu_threads", t1 == 1 && txl_cpu_threads() == 2, "%d then %d", t1,
                txl_cpu_threads());
  return ot_finish("test_op_table");
}
