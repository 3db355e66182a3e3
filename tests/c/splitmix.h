/*
 * The seeded random numbers of the C programs that run at random (fuzz_ids.c, contend.c):
 * splitmix64, small, fast, and the same sequence for the same seed everywhere, so a printed
 * seed replays a run.
 */
#ifndef GOTRY_TESTS_SPLITMIX_H
#define GOTRY_TESTS_SPLITMIX_H

#include <stddef.h>
#include <stdint.h>

/* The seed, then the generator's state: set it once before the first draw. */
static uint64_t rng_state;

static inline uint64_t next_u64(void) {
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static inline size_t below(size_t n) { return n == 0 ? 0 : (size_t)(next_u64() % n); }
static inline int chance(int percent) { return (int)below(100) < percent; }

#endif
