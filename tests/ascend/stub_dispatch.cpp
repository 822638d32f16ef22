// A stand-in for aicore/dispatch.asc on the host (tests/ascend/test_host.py): runs a wave of
// the segment's task records the way the AICore dispatcher does (block by block, each block
// its own run of the wave, in order), calling cpu_sim's C kernels for the kernels (kernels.c of
// backends/cpu, whose `wsp_tile` has the same fields as WspTile, the column stride a
// strided view's or 1).
// Checks the wave index as it goes and appends "wave W: N tasks" to $WSP_DISPATCH_LOG.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "wsp_plan.h"
extern "C" {
#include "wsp_runtime.h"
extern wsp_kernel_fn wsp_test_kernels[];
extern unsigned long long wsp_test_float_scalars[];  /* per kernel: bit k = scalar k is a float */
int wsp_kernel_fail(const char *message) {
    std::fprintf(stderr, "kernel failed: %s\n", message);
    return WSP_ERR_KERNEL;
}
}

void wsp_launch_dispatch(uint32_t blocks, void *stream, void *tasks, void *ctl, int64_t wave,
                         int64_t capacity, void *wsp_ws) {
    (void)stream;
    (void)wsp_ws;
    const int64_t *rec = (const int64_t *)tasks, *cb = (const int64_t *)ctl;
    const int64_t *runs = cb + WSP_C_RUN_START(capacity) + wave * (int64_t)blocks;
    int64_t ran = 0;
    for (uint32_t block = 0; block < blocks; block++)  /* each block its own run of the wave */
        for (int64_t j = runs[block]; j < runs[block + 1]; j++) {
            const int64_t *r = rec + cb[WSP_C_ORDER + j] * WSP_TASK_WORDS;
            if (r[WSP_T_WAVE] != wave || r[WSP_T_CORE] != (int64_t)block) {
                std::fprintf(stderr, "task in the wrong run\n");
                std::exit(9);
            }
            wsp_tile tiles[WSP_MAX_TILES];
            wsp_scalar scalars[WSP_MAX_SCALARS];
            for (int64_t k = 0; k < r[WSP_T_NTILES]; k++) {
                const int64_t *t = r + WSP_T_TILES + k * WSP_TILE_WORDS;
                tiles[k].data = (void *)(uintptr_t)t[WSP_TILE_ADDR];
                tiles[k].rows = t[WSP_TILE_ROWS];
                tiles[k].cols = t[WSP_TILE_COLS];
                tiles[k].stride = t[WSP_TILE_STRIDE];
                tiles[k].col_stride = t[WSP_TILE_COL_STRIDE];
            }
            const unsigned long long floats = wsp_test_float_scalars[r[WSP_T_KERNEL]];
            for (int64_t k = 0; k < r[WSP_T_NSCALARS]; k++) {
                scalars[k].i = r[WSP_T_SCALARS + k];
                if ((floats >> k) & 1u) {  /* the record's f32 bits as cpu_sim's double */
                    const uint32_t bits = (uint32_t)r[WSP_T_SCALARS + k];
                    float f;
                    std::memcpy(&f, &bits, sizeof f);
                    scalars[k].f = (double)f;
                }
            }
            if (wsp_test_kernels[r[WSP_T_KERNEL]](tiles, scalars) != 0) std::exit(8);
            ran++;
        }
    int64_t in_wave = 0;  /* the wave's tasks by the wave's own flag, against the runs */
    for (int64_t i = 0; i < cb[WSP_C_NTASKS]; i++) in_wave += rec[i * WSP_TASK_WORDS + WSP_T_WAVE] == wave;
    if (ran != in_wave) { std::fprintf(stderr, "a task of the wave ran on no block\n"); std::exit(9); }
    const char *log = std::getenv("WSP_DISPATCH_LOG");
    if (log) {
        FILE *f = std::fopen(log, "a");
        if (f) { std::fprintf(f, "wave %lld: %lld tasks\n", (long long)wave, (long long)ran); std::fclose(f); }
    }
}
