/* simlog_cycles.c: per-task cycles in the cycle model's log (wsp_policy.task_cycles: a kernel's
 * `add_cycles(n)`, a schedule's `trace = cycles(key)`), called by wsp__simlog_add.
 * The replay costs a task by its kernel's entry and relies on tasks of one entry taking equal
 * time (each entry's tasks end in issue order: sim.c). So a task whose cycles differ from its
 * kernel's gets the entry of its (kernel, cycles) pair, made on first use: an open-addressed
 * map from the pair to the entry, both grown by doubling, cleared per run (wsp__simlog_begin).
 * Cost: one probe per task, and only in programs that give tasks cycles. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "wsp_internal.h"

static uint64_t vhash(int64_t kernel, int64_t cycles) {
    uint64_t h = (uint64_t)cycles * UINT64_C(0x9E3779B97F4A7C15) ^ (uint64_t)kernel;
    return h ^ (h >> 29);
}

/* The cost entry of `kernel` taking `cycles`; -1: no memory, or more than 2^24 entries (the
 * run's model then fails as out of memory, never costs a task wrongly). */
int32_t wsp__simlog_task_entry(wsp_simlog *l, int32_t kernel, int64_t cycles) {
    if (cycles < 0) cycles = 0;
    if (cycles == l->costs[kernel].cycles) return kernel;
    if (2 * (int64_t)(l->nkernels - l->nbase + 1) > l->capv) {  /* keep the map half empty */
        int64_t cap = l->capv ? 2 * l->capv : 1024;
        if (cap > (INT64_C(1) << 25)) return -1;
        int64_t *key = malloc((size_t)cap * sizeof *key);
        int32_t *idx = malloc((size_t)cap * sizeof *idx);
        if (!key || !idx) {
            free(key);
            free(idx);
            return -1;
        }
        memset(idx, 0xff, (size_t)cap * sizeof *idx);
        for (int64_t i = 0; i < l->capv; i++) {   /* rehash: an entry's key is its cost */
            int32_t e = l->vidx[i];
            if (e < 0) continue;
            uint64_t j = vhash(l->vkey[i], l->costs[e].cycles) & (uint64_t)(cap - 1);
            while (idx[j] >= 0) j = (j + 1) & (uint64_t)(cap - 1);
            key[j] = l->vkey[i];
            idx[j] = e;
        }
        free(l->vkey);
        free(l->vidx);
        l->vkey = key;
        l->vidx = idx;
        l->capv = cap;
    }
    uint64_t mask = (uint64_t)(l->capv - 1), j = vhash(kernel, cycles) & mask;
    for (; l->vidx[j] >= 0; j = (j + 1) & mask)
        if (l->vkey[j] == kernel && l->costs[l->vidx[j]].cycles == cycles) return l->vidx[j];
    if (wsp__grow((void **)&l->costs, &l->capcosts, (int64_t)l->nkernels + 1, sizeof *l->costs))
        return -1;
    int32_t e = l->nkernels++;
    l->costs[e] = l->costs[kernel];
    l->costs[e].cycles = cycles;
    l->vkey[j] = kernel;
    l->vidx[j] = e;
    return e;
}

