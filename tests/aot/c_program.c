/* attn_gen.c_program (CMakeLists.txt): the generated header and library from C. Calls the
 * kernel 'attention' (q, k, v, output: batch, H = 8, T, Dh = 16) with v one row short and prints
 * the code and the message; exits 0 if the call was refused. */
#include <stdio.h>
#include "attention.h"

static float q[8 * 3 * 16], k[8 * 3 * 16], v[8 * 2 * 16], out[8 * 3 * 16];

static void describe(halide_buffer_t *b, halide_dimension_t *dim, float *data, int t) {
  const int32_t extents[4] = {16, t, 8, 1};
  int32_t stride = 1;
  for (int i = 0; i < 4; ++i) {
    dim[i].min = 0;
    dim[i].extent = extents[i];
    dim[i].stride = stride;
    dim[i].flags = 0;
    stride *= extents[i];
  }
  b->device = 0;
  b->device_interface = NULL;
  b->host = (uint8_t *)data;
  b->flags = 0;
  b->type.code = halide_type_float;
  b->type.bits = 32;
  b->type.lanes = 1;
  b->dimensions = 4;
  b->dim = dim;
  b->padding = NULL;
}

int main(void) {
  halide_buffer_t qb, kb, vb, ob;
  halide_dimension_t qd[4], kd[4], vd[4], od[4];
  describe(&qb, qd, q, 3);
  describe(&kb, kd, k, 3);
  describe(&vb, vd, v, 2);
  describe(&ob, od, out, 3);
  const int rc = attention(&qb, &kb, &vb, &ob);
  printf("%d %s\n", rc, attention_error());
  return rc == halide_error_code_constraint_violated ? 0 : 1;
}
