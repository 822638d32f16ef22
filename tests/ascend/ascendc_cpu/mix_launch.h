// mix_launch.h: the host side of a MIX launch (KERNEL_TYPE_MIX_AIC_1_2 / _1_1) on the CPU
// Ascend C of kernel_operator.h: one block's cube core (AIC) and its one or two vector cores
// (AIV) run as threads, each with its own memories, and the cross-core flags and GM workspace
// tracking behind kernel_operator.h's hooks. Kept out of kernel_operator.h because its
// standard headers defeat the declaration scan that checks that header against the real one.
//
// Flags, mode 2 (the asc-devkit CrossCoreSetFlag page, atlasascendc_api_07_0273): a flag id
// 0..10 is a counter per core; the AIC's set adds 1 to the counter of every AIV, the AIVs' sets
// add 1 to the AIC's once each AIV has set; a wait blocks while its counter is 0, then takes 1;
// a counter holds at most 15 sets. A wait that no core can ever satisfy (every other core of
// the group waiting or finished) is the device's hang: a failure here, as is a set no core
// waits for by the end of the launch (the next kernel on the group would inherit it).
//
// The GM a test marks as workspace (wsp_cpu_track_gm) is tracked per 32-byte block: which core
// last wrote it on which pipe (Fixpipe: FIX, a UB -> GM copy: MTE3), and which cores read it (a
// GM -> UB / L1 copy: MTE2). A core may read a block another core wrote only after waiting for
// a set of that core issued on the writing pipe after the write (a set is ordered after its
// own pipe's earlier instructions only), and may overwrite a block another core read only
// after the same from the reader (on MTE2): otherwise a race, reported at the access. What a
// core knows passes on: a set carries what its setter had waited for (AIV 0 learns of AIV 1's
// copies through a set of the AIC issued after the AIC waited for AIV 1's).

#ifndef WSP_ASCENDC_CPU_MIX_LAUNCH_H
#define WSP_ASCENDC_CPU_MIX_LAUNCH_H

#include <algorithm>
#include <atomic>
#include <cstring>
#include <deque>
#include <exception>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "kernel_operator.h"

namespace AscendC {
namespace detail {
constexpr int MIX_FLAGS = 11, MIX_MAX_SETS = 15, MIX_CORES = 3;
struct MixSet {
    int setter;
    int pipe;
    uint32_t ordinal;  // the setter's count of sets, this one included
    // what the setter knew when it set (its `seen`): a wait orders the waiter after the sets it
    // took, so a set after it carries them on (the AIC relaying one AIV's sets to the other)
    uint32_t knew[MIX_CORES][NPIPES];
};
struct MixBlockUse {
    int writer = -1, wpipe = 0;
    uint32_t wcount = 0;               // the writer's count of sets before the write
    uint32_t rcount[MIX_CORES] = {0};  // per reader: its count of sets before its last read, + 1
};
struct MixRegion {
    uint8_t *at;
    size_t bytes;
    std::vector<MixBlockUse> blocks;
};
// a spin lock: the cores are few and their waits short
struct MixMutex {
    std::atomic_flag f = ATOMIC_FLAG_INIT;
    void lock()
    {
        while (f.test_and_set(std::memory_order_acquire)) std::this_thread::yield();
    }
    void unlock() { f.clear(std::memory_order_release); }
};
struct MixHold {
    MixMutex &m;
    explicit MixHold(MixMutex &mu) : m(mu) { m.lock(); }
    ~MixHold() { m.unlock(); }
};
struct MixGroup {
    MixMutex mu;
    int ncores = 0;
    int waitsFor[MIX_CORES] = {-1, -1, -1};  // the flag a core waits for (-1: running)
    bool done[MIX_CORES] = {false, false, false};
    std::deque<MixSet> counter[MIX_CORES][MIX_FLAGS];
    std::deque<MixSet> fromAiv[MIX_CORES][MIX_FLAGS];  // the AIC's, per AIV, until all have set
    uint32_t sets[MIX_CORES] = {0};
    uint32_t seen[MIX_CORES][MIX_CORES][NPIPES] = {{{0}}};  // [waiter][setter][pipe]: ordinal
    std::string failure;
    std::vector<MixRegion> regions;
};
inline MixGroup *&mixGroup()
{
    static MixGroup *g = nullptr;
    return g;
}
inline std::vector<std::pair<uint8_t *, size_t>> &trackedGm()
{
    static std::vector<std::pair<uint8_t *, size_t>> t;
    return t;
}
inline size_t MixNeed(const MixGroup *g, int c)
{
    // the AIC's counter holds one entry per AIV for each set of the group
    return c == 0 ? (size_t)(g->ncores - 1) : 1;
}
// no core can go on: each has finished or waits for a flag its counter does not have
inline bool MixStuck(const MixGroup *g)
{
    for (int c = 0; c < g->ncores; ++c) {
        if (g->done[c]) continue;
        const int f = g->waitsFor[c];
        if (f < 0 || g->counter[c][f].size() >= MixNeed(g, c)) return false;
    }
    return true;
}
inline const char *MixCoreName(int c) { return c == 0 ? "the AIC" : c == 1 ? "AIV 0" : "AIV 1"; }

inline void MixSetHook(int pipe, unsigned flagId)
{
    const char *api = "CrossCoreSetFlag";
    MixGroup *g = mixGroup();
    MixHold hold(g->mu);
    const int me = mixCore;
    MixSet s{me, pipe, ++g->sets[me], {}};
    std::memcpy(s.knew, g->seen[me], sizeof s.knew);
    auto push = [&](std::deque<MixSet> &q, const MixSet &v) {
        if ((int)q.size() >= MIX_MAX_SETS)
            ShimFail(api, "more than 15 sets of one flag id pending (the counter's limit)");
        q.push_back(v);
    };
    if (me == 0) {
        for (int c = 1; c < g->ncores; ++c) push(g->counter[c][flagId], s);
        return;
    }
    push(g->fromAiv[me][flagId], s);
    bool all = true;
    for (int c = 1; c < g->ncores; ++c) all = all && !g->fromAiv[c][flagId].empty();
    if (!all) return;
    // every AIV has set: the AIC's counter takes one, carrying each AIV's set
    for (int c = 1; c < g->ncores; ++c) {
        push(g->counter[0][flagId], g->fromAiv[c][flagId].front());
        g->fromAiv[c][flagId].pop_front();
    }
}

inline void MixWaitHook(unsigned flagId)
{
    const char *api = "CrossCoreWaitFlag";
    MixGroup *g = mixGroup();
    MixHold hold(g->mu);
    const int me = mixCore;
    std::deque<MixSet> &q = g->counter[me][flagId];
    const size_t need = MixNeed(g, me);
    g->waitsFor[me] = (int)flagId;
    while (q.size() < need) {
        if (!g->failure.empty()) {
            g->waitsFor[me] = -1;
            ShimFail(api, "another core of the group failed: " + g->failure);
        }
        if (MixStuck(g)) {
            char msg[200];
            std::snprintf(msg, sizeof msg, "%s waits for flag %u, which no core of the group sets: "
                          "every other core is waiting or finished (a hang on the device)",
                          MixCoreName(me), flagId);
            g->waitsFor[me] = -1;  // the launcher records the failure as the thread ends
            ShimFail(api, msg);
        }
        g->mu.unlock();  // let the other cores run, then look again
        std::this_thread::yield();
        g->mu.lock();
    }
    g->waitsFor[me] = -1;
    for (size_t k = 0; k < need; ++k) {
        const MixSet s = q.front();
        q.pop_front();
        uint32_t &seen = g->seen[me][s.setter][s.pipe];
        seen = std::max(seen, s.ordinal);
        for (int c = 0; c < MIX_CORES; ++c)
            for (int q = 0; q < NPIPES; ++q) g->seen[me][c][q] = std::max(g->seen[me][c][q], s.knew[c][q]);
    }
}

inline void MixGmHook(const void *p, size_t bytes, bool write, int pipe, const char *api)
{
    MixGroup *g = mixGroup();
    MixHold hold(g->mu);
    const uint8_t *b = static_cast<const uint8_t *>(p);
    const int me = mixCore;
    for (MixRegion &r : g->regions) {
        if (b + bytes <= r.at || b >= r.at + r.bytes) continue;
        const size_t lo = b > r.at ? (size_t)(b - r.at) / BLOCK : 0;
        const size_t hi = (std::min((size_t)(b + bytes - r.at), r.bytes) + BLOCK - 1) / BLOCK;
        for (size_t k = lo; k < hi; ++k) {
            MixBlockUse &u = r.blocks[k];
            char msg[400];
            if (u.writer >= 0 && u.writer != me && g->seen[me][u.writer][u.wpipe] <= u.wcount) {
                std::snprintf(msg, sizeof msg,
                              "%s %s workspace bytes [%zu, %zu) that %s wrote on pipe %s with no "
                              "CrossCoreSetFlag on that pipe after the write waited for in between "
                              "(a race on the device)",
                              MixCoreName(me), write ? "overwrites" : "reads", k * BLOCK, (k + 1) * BLOCK,
                              MixCoreName(u.writer), PipeName(u.wpipe));
                ShimFail(api, msg);
            }
            if (write)
                for (int c = 0; c < g->ncores; ++c)
                    if (c != me && u.rcount[c] && g->seen[me][c][P_MTE2] < u.rcount[c]) {
                        std::snprintf(msg, sizeof msg,
                                      "%s overwrites workspace bytes [%zu, %zu) that %s read with no "
                                      "CrossCoreSetFlag after the read waited for in between (a race "
                                      "on the device)",
                                      MixCoreName(me), k * BLOCK, (k + 1) * BLOCK, MixCoreName(c));
                        ShimFail(api, msg);
                    }
            if (write) {
                u.writer = me;
                u.wpipe = pipe;
                u.wcount = g->sets[me];
                for (uint32_t &rc : u.rcount) rc = 0;
            } else {
                u.rcount[me] = g->sets[me] + 1;
            }
        }
    }
}
}  // namespace detail

// one block of a MIX launch: `aic` runs on the block's cube core, `aiv` on each of its `ratio`
// vector cores (1 or 2), each a thread with its own memories; the first failure (a ShimError)
// is rethrown, and a set never waited for is one
template <typename Aic, typename Aiv>
inline void wsp_cpu_mix_launch(int64_t block, int ratio, Aic aic, Aiv aiv)
{
    if (ratio != 1 && ratio != 2) ShimFail("wsp_cpu_mix_launch", "a group has 1 or 2 AIVs");
    detail::MixGroup g;
    g.ncores = 1 + ratio;
    for (auto &t : detail::trackedGm())
        g.regions.push_back({t.first, t.second, std::vector<detail::MixBlockUse>((t.second + 31) / 32)});
    detail::mixGroup() = &g;
    detail::mixHooks = {detail::MixSetHook, detail::MixWaitHook, detail::MixGmHook};
    std::vector<std::thread> threads;
    for (int c = 0; c < g.ncores; ++c)
        threads.emplace_back([&, c] {
            detail::mixCore = c;
            detail::mixBlock = block;
            detail::mixRatio = ratio;
            detail::core().ktype = c == 0 ? (int)KERNEL_TYPE_AIC_ONLY : (int)KERNEL_TYPE_AIV_ONLY;
            try {
                if (c == 0) aic();
                else aiv();
            } catch (const std::exception &e) {
                detail::MixHold hold(g.mu);
                if (g.failure.empty()) g.failure = e.what();
            }
            detail::MixHold hold(g.mu);
            g.done[c] = true;
            detail::DropCore();
            detail::mixCore = -1;
        });
    for (auto &t : threads) t.join();
    detail::mixGroup() = nullptr;
    detail::mixHooks = {nullptr, nullptr, nullptr};
    if (!g.failure.empty()) throw ShimError(g.failure);
    for (int c = 0; c < g.ncores; ++c)
        for (int f = 0; f < detail::MIX_FLAGS; ++f)
            if (!g.counter[c][f].empty() || !g.fromAiv[c][f].empty()) {
                char msg[200];
                std::snprintf(msg, sizeof msg, "flag %d was set for %s and never waited for: the next "
                              "kernel on the group would inherit the count", f, detail::MixCoreName(c));
                ShimFail("wsp_cpu_mix_launch", msg);
            }
}

// mark [p, p + bytes) of GM as the workspace of the MIX launches that follow
inline void wsp_cpu_track_gm(void *p, size_t bytes)
{
    detail::trackedGm().push_back({static_cast<uint8_t *>(p), bytes});
}
inline void wsp_cpu_untrack_gm() { detail::trackedGm().clear(); }
}  // namespace AscendC

#endif  // WSP_ASCENDC_CPU_MIX_LAUNCH_H
