/* kernels.c: the kernels of tests/mpi/transport_case.py, which drives the runtime's transport
 * with hand-built tasks (the lowering's tasks, as tests/test_mesh_mpi.py describes). */
#include "wsp_runtime.h"

/* x *= scalar 0, in place (a device's own computation before the collective) */
int k_scale(const wsp_tile *t, const wsp_scalar *s) {
    float *x = t[0].data;
    for (int64_t i = 0; i < t[0].rows; i++)
        for (int64_t j = 0; j < t[0].cols; j++)
            x[i * t[0].stride + j * t[0].col_stride] *= (float)s[0].f;
    return 0;
}

/* dst (tile p) = src_0 + src_1 + ... + src_{p-1}, in that order, in f32 (scalar 0 is p) */
int k_sum(const wsp_tile *t, const wsp_scalar *s) {
    int p = (int)s[0].i;
    const wsp_tile *d = &t[p];
    float *y = d->data;
    for (int64_t i = 0; i < d->rows; i++)
        for (int64_t j = 0; j < d->cols; j++) {
            const float *x0 = t[0].data;
            float acc = x0[i * t[0].stride + j * t[0].col_stride];
            for (int q = 1; q < p; q++) {
                const float *xq = t[q].data;
                acc += xq[i * t[q].stride + j * t[q].col_stride];
            }
            y[i * d->stride + j * d->col_stride] = acc;
        }
    return 0;
}

/* fails: the kernel error a rank reports */
int k_fail(const wsp_tile *t, const wsp_scalar *s) {
    (void)t;
    (void)s;
    return wsp_kernel_fail("k_fail was asked to fail");
}

wsp_kernel_fn case_kernel(int which) {
    return which == 0 ? k_scale : which == 1 ? k_sum : k_fail;
}
