// aicore/dispatch.asc (its kernel, without the <<<...>>> launcher) run on the host behind
// dispatch_shim/kernel_operator.h, on the segments the expander writes: every wave launched
// on every block, as the host launches it on the device. The kernels are recording stubs
// (kernels.inc, written by the test), so what is checked is the dispatcher itself: each task
// of the wave runs exactly once, on its block, with its record's kernel, tiles and scalars,
// and each block reads (GetValue) two words of the index of runs, then its own tasks' numbers
// and records and nothing else: O(its tasks), not O(the wave).
//
//   dispatch_driver PLAN DATA CAPACITY BLOCKS
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "harness_io.h"
#include "expand.aicpu"

static std::vector<const void *> reads;  /* the words the running block read, in order */
namespace AscendC {
int64_t test_block = 0, test_cache_drops = 0;
void test_read(const void *at) { reads.push_back(at); }
}
struct Call { int64_t kernel, block; WspTile tiles[WSP_MAX_TILES]; WspScalar scalars[WSP_MAX_SCALARS]; };
static std::vector<Call> calls;
static void wsp_test_called(int64_t kernel, const WspTile *t, const WspScalar *s) {
    Call c;
    c.kernel = kernel;
    c.block = AscendC::test_block;
    for (int i = 0; i < WSP_MAX_TILES; i++) c.tiles[i] = t[i];
    for (int i = 0; i < WSP_MAX_SCALARS; i++) c.scalars[i] = s[i];
    calls.push_back(c);
}
#include "kernels.inc"
#include "dispatch_kernel.inc"

static std::vector<int64_t> read_words(const char *path) {
    FILE *f = std::fopen(path, "rb");
    std::vector<int64_t> w;
    int64_t x;
    while (f && std::fread(&x, sizeof x, 1, f) == 1) w.push_back(x);
    if (f) std::fclose(f);
    return w;
}

static bool same_task(const Call &c, const int64_t *rec) {
    if (c.kernel != rec[WSP_T_KERNEL] || c.block != rec[WSP_T_CORE]) return false;
    for (int64_t k = 0; k < rec[WSP_T_NTILES]; k++) {
        const int64_t *t = rec + WSP_T_TILES + k * WSP_TILE_WORDS;
        if ((int64_t)c.tiles[k].addr != t[WSP_TILE_ADDR] || c.tiles[k].rows != t[WSP_TILE_ROWS] ||
            c.tiles[k].cols != t[WSP_TILE_COLS] || c.tiles[k].stride != t[WSP_TILE_STRIDE]) return false;
    }
    for (int64_t k = 0; k < rec[WSP_T_NSCALARS]; k++)
        if (c.scalars[k].i != rec[WSP_T_SCALARS + k]) return false;
    return true;
}

int main(int argc, char **argv) {
    if (argc != 5) return 2;
    std::vector<int64_t> plan = read_words(argv[1]);
    static harness_data d;
    harness_read(argv[2], &d);
    const int64_t capacity = std::atoll(argv[3]), blocks = std::atoll(argv[4]);
    std::vector<uint64_t> bases(d.ntensors + 1);
    for (int64_t t = 0; t < d.ntensors; t++) bases[t] = (uint64_t)(uintptr_t)d.tensors[t];
    std::vector<int64_t> tasks(capacity * WSP_TASK_WORDS), ctl(WSP_CTL_WORDS(capacity, blocks));
    std::vector<int64_t> state(wsp_state_words(plan.data(), capacity), 0);
    WspExpandArgs a = {(uint64_t)(uintptr_t)plan.data(), (uint64_t)(uintptr_t)d.syms,
                       (uint64_t)(uintptr_t)bases.data(), (uint64_t)(uintptr_t)bases.data(),
                       (uint64_t)(uintptr_t)tasks.data(), (uint64_t)(uintptr_t)ctl.data(),
                       (uint64_t)(uintptr_t)state.data(), capacity, blocks, 0};
    int64_t total = 0, launches = 0, total_reads = 0;
    for (;;) {
        wsp_expand(&a);
        if (ctl[WSP_C_STATUS] == WSP_EXPAND_ERROR) { std::printf("expander error\n"); return 1; }
        const int64_t n = ctl[WSP_C_NTASKS];
        std::vector<int> ran(n, 0);
        for (int64_t w = 0; w < ctl[WSP_C_NWAVES]; w++) {
            const size_t before = calls.size();
            for (int64_t b = 0; b < blocks; b++) {  /* the blocks of one launch */
                AscendC::test_block = b;
                reads.clear();
                wsp_dispatch((GM_ADDR)tasks.data(), (GM_ADDR)ctl.data(), w, capacity, blocks);
                launches++;
                /* what it read: ctl words (two of the index of runs, one task number per task)
                   and words of the records of its own tasks of this wave, nothing else */
                int64_t ctl_reads = 0, own = 0;
                for (int64_t j = 0; j < n; j++)
                    own += tasks[j * WSP_TASK_WORDS + WSP_T_WAVE] == w &&
                           tasks[j * WSP_TASK_WORDS + WSP_T_CORE] == b;
                for (const void *at : reads) {
                    const int64_t *p = (const int64_t *)at;
                    if (p >= ctl.data() && p < ctl.data() + ctl.size()) { ctl_reads++; continue; }
                    const int64_t off = p - tasks.data();
                    if (off < 0 || off >= n * WSP_TASK_WORDS) { std::printf("a read outside the segment\n"); return 1; }
                    const int64_t *r = tasks.data() + (off / WSP_TASK_WORDS) * WSP_TASK_WORDS;
                    if (r[WSP_T_WAVE] != w || r[WSP_T_CORE] != b) {
                        std::printf("block %lld read a record of another run (task %lld)\n",
                                    (long long)b, (long long)(off / WSP_TASK_WORDS));
                        return 1;
                    }
                }
                if (ctl_reads != 2 + own) {
                    std::printf("block %lld read %lld control words for %lld tasks\n", (long long)b,
                                (long long)ctl_reads, (long long)own);
                    return 1;
                }
                total_reads += (int64_t)reads.size();
            }
            for (size_t i = before; i < calls.size(); i++) {  /* match calls to the wave's records */
                int64_t hit = -1;
                for (int64_t j = 0; j < n && hit < 0; j++)
                    if (!ran[j] && tasks[j * WSP_TASK_WORDS + WSP_T_WAVE] == w &&
                        same_task(calls[i], tasks.data() + j * WSP_TASK_WORDS)) hit = j;
                if (hit < 0) { std::printf("a call matches no record of wave %lld\n", (long long)w); return 1; }
                ran[hit] = 1;
            }
        }
        for (int64_t j = 0; j < n; j++)
            if (!ran[j]) { std::printf("task %lld never ran\n", (long long)j); return 1; }
        total += n;
        if (ctl[WSP_C_STATUS] == WSP_EXPAND_DONE) break;
    }
    std::printf("ok %lld tasks %lld calls %lld launches %lld cache-drops %lld reads\n", (long long)total,
                (long long)calls.size(), (long long)launches, (long long)AscendC::test_cache_drops,
                (long long)total_reads);
    return 0;
}
