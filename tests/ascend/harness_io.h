/* The input of both task-stream drivers (cpu_stub.c and expand_driver.cpp), written by
 * tests/ascend/streams.py: the bound symbols, every tensor's bytes, and per kernel how many
 * tile parameters it has. All numbers are little-endian int64.
 *
 *   nsyms, syms[nsyms], ntensors, { nbytes, bytes (padded to 8) } x ntensors,
 *   nkernels, ntiles[nkernels]
 */
#ifndef WSP_HARNESS_IO_H
#define WSP_HARNESS_IO_H
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct harness_data {
    int64_t nsyms, ntensors, nkernels;
    int64_t *syms;
    char **tensors;
    int64_t *nbytes;
    int64_t *ktiles;
} harness_data;

static int64_t harness_word(FILE *f) {
    int64_t w = 0;
    if (fread(&w, sizeof w, 1, f) != 1) { fprintf(stderr, "harness: short input\n"); exit(3); }
    return w;
}

static void harness_read(const char *path, harness_data *d) {
    FILE *f = fopen(path, "rb");
    if (!f) { perror(path); exit(3); }
    d->nsyms = harness_word(f);
    d->syms = (int64_t *)calloc((size_t)d->nsyms + 1, sizeof(int64_t));
    for (int64_t i = 0; i < d->nsyms; i++) d->syms[i] = harness_word(f);
    d->ntensors = harness_word(f);
    d->tensors = (char **)calloc((size_t)d->ntensors + 1, sizeof(char *));
    d->nbytes = (int64_t *)calloc((size_t)d->ntensors + 1, sizeof(int64_t));
    for (int64_t i = 0; i < d->ntensors; i++) {
        int64_t n = harness_word(f), padded = (n + 7) / 8 * 8;
        d->nbytes[i] = n;
        d->tensors[i] = (char *)calloc((size_t)padded + 8, 1);
        if (padded && fread(d->tensors[i], 1, (size_t)padded, f) != (size_t)padded) {
            fprintf(stderr, "harness: short tensor\n");
            exit(3);
        }
    }
    d->nkernels = harness_word(f);
    d->ktiles = (int64_t *)calloc((size_t)d->nkernels + 1, sizeof(int64_t));
    for (int64_t i = 0; i < d->nkernels; i++) d->ktiles[i] = harness_word(f);
    fclose(f);
}
#endif
