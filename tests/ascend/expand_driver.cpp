// The AICPU expander (aicpu/expand.aicpu, compiled with the host C++ compiler behind
// shim/aicpu_api.h) driven the way host/main.asc drives it on a device: launch, read the
// control block, run the segment (here: print its task records), launch again, until the
// expander says it is done or failed. The plan words are the ones of include/wsp_plan_data.h.
//
//   expand_driver PLAN.bin DATA CAPACITY BLOCKS
//
// prints the task stream in cpu_stub.c's format (with " | wave=W core=C" after each task),
// "flush" between segments, then "end ok" or "end error ...".
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "harness_io.h"
#include "expand.aicpu"

static std::vector<int64_t> read_plan(const char *path) {
    FILE *f = std::fopen(path, "rb");
    if (!f) { std::perror(path); std::exit(3); }
    std::vector<int64_t> words;
    int64_t w;
    while (std::fread(&w, sizeof w, 1, f) == 1) words.push_back(w);
    std::fclose(f);
    return words;
}

static void print_task(const int64_t *rec, const int64_t *st, const WspLayout &l, int64_t i,
                       const harness_data &d) {
    std::printf("task stmt=%lld kernel=%lld coords=", (long long)rec[WSP_T_STMT], (long long)rec[WSP_T_KERNEL]);
    for (int64_t c = 0; c < rec[WSP_T_NCOORDS]; c++)
        std::printf("%s%lld", c ? "," : "", (long long)rec[WSP_T_COORDS + c]);
    std::printf(" disp=%lld stream=%lld tiles=", (long long)rec[WSP_T_DISPATCHER], (long long)rec[WSP_T_STREAM]);
    for (int64_t t = 0; t < rec[WSP_T_NTILES]; t++) {
        const int64_t *x = rec + WSP_T_TILES + t * WSP_TILE_WORDS;
        const int64_t tn = x[WSP_TILE_TENSOR];
        std::printf("[%lld:%lld:%lld:%lld:%lld:%lld]", (long long)tn,
                    (long long)((uint64_t)x[WSP_TILE_ADDR] - (uint64_t)(uintptr_t)d.tensors[tn]),
                    (long long)x[WSP_TILE_ROWS], (long long)x[WSP_TILE_COLS],
                    (long long)x[WSP_TILE_STRIDE], (long long)x[WSP_TILE_COL_STRIDE]);
    }
    std::printf(" acc=");
    const int64_t first = st[l.task_acc + i], n = st[l.task_nacc + i];
    for (int64_t j = first; j < first + n; j++) {
        const int64_t *a = st + l.acc + j * WSP_A_WORDS;
        std::printf("[%lld:%lld:", (long long)a[WSP_A_TENSOR], (long long)a[WSP_A_MODE]);
        for (int64_t k = 0; k < a[WSP_A_NDIM]; k++)
            std::printf("%s%lld-%lld", k ? "," : "", (long long)a[WSP_A_LO + k], (long long)a[WSP_A_HI + k]);
        std::printf("]");
    }
    std::printf(" scal=");
    for (int64_t s = 0; s < rec[WSP_T_NSCALARS]; s++)
        std::printf("%s%lld", s ? "," : "", (long long)rec[WSP_T_SCALARS + s]);
    std::printf(" | wave=%lld core=%lld\n", (long long)rec[WSP_T_WAVE], (long long)rec[WSP_T_CORE]);
}

// The index of runs must list every task of the segment once, by wave, then block (its CORE),
// in enumeration order within a run.
static bool index_ok(const int64_t *ctl, const int64_t *tasks, int64_t capacity, int64_t blocks) {
    const int64_t n = ctl[WSP_C_NTASKS], nw = ctl[WSP_C_NWAVES];
    const int64_t *runs = ctl + WSP_C_RUN_START(capacity), *order = ctl + WSP_C_ORDER;
    std::vector<int> seen(n, 0);
    if (runs[0] != 0 || runs[nw * blocks] != n) return false;
    for (int64_t w = 0; w < nw; w++)
        for (int64_t b = 0; b < blocks; b++) {
            const int64_t r = w * blocks + b;
            if (runs[r + 1] < runs[r]) return false;
            for (int64_t j = runs[r]; j < runs[r + 1]; j++) {
                if (order[j] < 0 || order[j] >= n || seen[order[j]]++) return false;
                const int64_t *rec = tasks + order[j] * WSP_TASK_WORDS;
                if (rec[WSP_T_WAVE] != w || rec[WSP_T_CORE] != b) return false;
                if (j > runs[r] && order[j] < order[j - 1]) return false;
            }
        }
    return true;
}

int main(int argc, char **argv) {
    if (argc != 5) {
        std::fprintf(stderr, "usage: %s PLAN DATA CAPACITY BLOCKS\n", argv[0]);
        return 2;
    }
    std::vector<int64_t> plan = read_plan(argv[1]);
    static harness_data d;
    harness_read(argv[2], &d);
    const int64_t capacity = std::atoll(argv[3]), blocks = std::atoll(argv[4]);
    std::vector<uint64_t> bases(d.ntensors + 1);
    for (int64_t t = 0; t < d.ntensors; t++) bases[t] = (uint64_t)(uintptr_t)d.tensors[t];
    std::vector<int64_t> tasks(capacity * WSP_TASK_WORDS), ctl(WSP_CTL_WORDS(capacity, blocks));
    std::vector<int64_t> state(wsp_state_words(plan.data(), capacity), 0);
    WspExpandArgs args;
    args.plan = (uint64_t)(uintptr_t)plan.data();
    args.syms = (uint64_t)(uintptr_t)d.syms;
    args.tensors = (uint64_t)(uintptr_t)bases.data();
    args.views = (uint64_t)(uintptr_t)bases.data();
    args.tasks = (uint64_t)(uintptr_t)tasks.data();
    args.ctl = (uint64_t)(uintptr_t)ctl.data();
    args.state = (uint64_t)(uintptr_t)state.data();
    args.capacity = capacity;
    args.blocks = blocks;
    args.rank = 0;
    const WspLayout l = wsp_layout(plan.data(), capacity);
    for (int launches = 0;; launches++) {
        wsp_expand(&args);
        const int64_t status = ctl[WSP_C_STATUS];
        if (status == WSP_EXPAND_ERROR) {  /* the records before the failure, then it */
            for (int64_t i = 0; i < ctl[WSP_C_NTASKS]; i++)
                print_task(tasks.data() + i * WSP_TASK_WORDS, state.data(), l, i, d);
            const int64_t e = ctl[WSP_C_ERROR];
            std::printf("end error %lld %lld %lld %lld", (long long)e, (long long)ctl[WSP_C_ERR_ID],
                        (long long)ctl[WSP_C_ERR_A], (long long)ctl[WSP_C_ERR_B]);
            if (e == WSP_ERR_CHECK)
                for (int64_t i = 0; i < ctl[WSP_C_ERR_N]; i++) std::printf(" %lld", (long long)ctl[WSP_C_ERR_VALS + i]);
            if (e == WSP_ERR_DEADLOCK)
                for (int64_t i = 0; i < 4 * ctl[WSP_C_NBLOCKED]; i++) std::printf(" %lld", (long long)ctl[WSP_C_BLOCKED + i]);
            std::printf("\n");
            return 0;
        }
        if (!index_ok(ctl.data(), tasks.data(), capacity, blocks)) {
            std::printf("end bad-index\n");
            return 1;
        }
        for (int64_t i = 0; i < ctl[WSP_C_NTASKS]; i++)
            print_task(tasks.data() + i * WSP_TASK_WORDS, state.data(), l, i, d);
        if (status == WSP_EXPAND_DONE) break;
        if (status != WSP_EXPAND_FLUSH || launches > 1000000) {
            std::printf("end bad-status %lld\n", (long long)status);
            return 1;
        }
        std::printf("flush\n");
    }
    std::printf("end ok\n");
    return 0;
}
