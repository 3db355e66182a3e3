/*
 * What a call through the C ABI costs, as ratios to baselines measured in the same run:
 * the cheapest crossing (gotry_manual_clock_get, one atomic load behind the panic boundary)
 * against the same load in plain C, the hot paths against that crossing, and a batched
 * renewal against single renewals of the same leases. Not a test: no figure fails it.
 *
 * Usage: bench SCRATCH_DIR   (tests/c/bench.sh builds it against the release library)
 */
#define _POSIX_C_SOURCE 200809L

#include "gotry_tenant_state.h"

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

typedef void (*Op)(void *context);

/* Nanoseconds per call: doubles the count until one round takes at least `budget_s`. */
static double measure(Op op, void *context, double budget_s) {
    for (long n = 1;; n *= 2) {
        double start = now_s();
        for (long i = 0; i < n; i++) op(context);
        double elapsed = now_s() - start;
        if (elapsed >= budget_s) return elapsed * 1e9 / (double)n;
    }
}

static atomic_llong plain_clock;
static volatile long long sink;
static void plain_load(void *context) {
    (void)context;
    sink = atomic_load(&plain_clock);
}

static void clock_get(void *context) {
    int64_t now = 0;
    gotry_manual_clock_get((const GotryManualClock *)context, &now);
    sink = now;
}

static void validate(void *context) {
    (void)context;
    sink = gotry_assert_ledger_tenant_id("t-2c1abb82307c834491ac911a91db816b", 34, NULL);
}

static void refuse_without_details(void *context) {
    (void)context;
    sink = gotry_assert_ledger_tenant_id("t-nope", 6, NULL);
}

static void refuse_with_details(void *context) {
    (void)context;
    GotryError *err = NULL;
    sink = gotry_assert_ledger_tenant_id("t-nope", 6, &err);
    gotry_error_free(err);
}

static void derive(void *context) {
    (void)context;
    char id[GOTRY_LEDGER_TENANT_ID_BUFFER_LEN];
    sink = gotry_derive_ledger_tenant_id((const uint8_t *)"0123456789abcdef0123456789abcdef", 32,
                                         "https://idp.example", 19, "user-1", 6, id, sizeof id, NULL);
}

static void gate(void *context) { sink = gotry_lease_assert_held((const GotryLease *)context, NULL); }

#define BATCH 16
typedef struct Renewals {
    GotryStore *store;
    GotryLeaseRef leases[BATCH];
    char keys[BATCH][16];
} Renewals;

static void renew_one_by_one(void *context) {
    Renewals *r = (Renewals *)context;
    for (int i = 0; i < BATCH; i++) {
        GotryRecord *record = NULL;
        int64_t ttl = 0;
        sink = gotry_store_renew(r->store, r->leases[i].key, r->leases[i].key_len, "bench", 5, 1, 60000, &record,
                                 &ttl, NULL);
        gotry_record_free(record);
    }
}

static void renew_batched(void *context) {
    Renewals *r = (Renewals *)context;
    GotryRenewBatch *batch = NULL;
    sink = gotry_store_renew_batch(r->store, "bench", 5, 60000, r->leases, BATCH, &batch, NULL);
    gotry_renew_batch_free(batch);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s SCRATCH_DIR\n", argv[0]);
        return 2;
    }
    GotryManualClock *clock = NULL;
    GotryStore *store = NULL;
    GotryLease *lease = NULL;
    char path[1024];
    snprintf(path, sizeof path, "%s/bench.db", argv[1]);
    if (gotry_manual_clock_new(0, &clock) != GOTRY_STATUS_OK ||
        gotry_store_open(path, strlen(path), NULL, &store, NULL) != GOTRY_STATUS_OK ||
        gotry_lease_acquire(store, "acme/t-bench", 12, "bench", 5, 600000, 1000, NULL, &lease, NULL) !=
            GOTRY_STATUS_OK) {
        fprintf(stderr, "bench: setup failed\n");
        return 1;
    }
    Renewals renewals;
    renewals.store = store;
    for (int i = 0; i < BATCH; i++) {
        snprintf(renewals.keys[i], sizeof renewals.keys[i], "k%02d", i);
        GotryRecord *record = NULL;
        int64_t ttl = 0;
        gotry_store_acquire(store, renewals.keys[i], strlen(renewals.keys[i]), "bench", 5, 60000, &record, &ttl,
                            NULL);
        gotry_record_free(record);
        renewals.leases[i].key = renewals.keys[i];
        renewals.leases[i].key_len = strlen(renewals.keys[i]);
        renewals.leases[i].epoch = 1;
    }

    double plain = measure(plain_load, NULL, 0.2);
    double crossing = measure(clock_get, clock, 0.3);
    printf("plain C atomic load              %9.1f ns\n", plain);
    printf("gotry_manual_clock_get (baseline) %8.1f ns  %6.1fx plain C\n", crossing, crossing / plain);
    struct {
        const char *name;
        Op op;
        void *context;
    } hot[] = {
        {"gotry_assert_ledger_tenant_id ok", validate, NULL},
        {"  refused, out_error NULL", refuse_without_details, NULL},
        {"  refused, with error object", refuse_with_details, NULL},
        {"gotry_lease_assert_held", gate, lease},
        {"gotry_derive_ledger_tenant_id", derive, NULL},
    };
    for (size_t i = 0; i < sizeof hot / sizeof hot[0]; i++) {
        double ns = measure(hot[i].op, hot[i].context, 0.3);
        printf("%-33s %9.1f ns  %6.1fx baseline\n", hot[i].name, ns, ns / crossing);
    }
    double single = measure(renew_one_by_one, &renewals, 1.0) / BATCH;
    double batched = measure(renew_batched, &renewals, 1.0) / BATCH;
    printf("gotry_store_renew, per lease      %9.0f ns\n", single);
    printf("gotry_store_renew_batch of %d, per lease %5.0f ns  %6.3fx single renewals\n", BATCH, batched,
           batched / single);

    gotry_lease_release(lease, NULL);
    gotry_lease_free(lease);
    gotry_store_free(store);
    gotry_manual_clock_free(clock);
    return 0;
}
