/*
 * One of several processes contending on one SQLite lease store for a few seconds.
 *
 * Keys k0 and k1 are driven through the store calls (one at a time, or both in one batched
 * renewal), k2 and k3 through tenant leases, all on
 * the system clocks and with one TTL (the audit replays expiry from the log with it). The
 * process sleeps at random, so leases run out and change hands, and sometimes names a wrong
 * epoch on purpose. Every operation the library acknowledged is written as a JSON line
 *
 *     {"key":"k3","op":"acquire","owner":"c-1","epoch":7}
 *
 * and the lead's lease-audit then checks that each one is in the store's log and that the
 * log obeys the lease rules. What a process believes is never trusted: only acknowledgements.
 *
 * Usage: contend DB_PATH OWNER SECONDS SEED TTL_MS ACK_FILE
 */
#define _POSIX_C_SOURCE 200809L

#include "gotry_tenant_state.h"
#include "splitmix.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define KEYS 4
#define LEASE_MARGIN_MS 20

static FILE *acks;
static const char *owner;
static long acknowledged[5]; /* by GotryLeaseOp */
static long held_refusals, lost, fenced, unavailable, unexpected;

static void ack(const char *key, GotryLeaseOp op, int64_t epoch) {
    fprintf(acks, "{\"key\":\"%s\",\"op\":\"%s\",\"owner\":\"%s\",\"epoch\":%lld}\n", key, gotry_lease_op_name(op),
            owner, (long long)epoch);
    acknowledged[op]++;
}

/* Counts a refusal; anything but the expected kinds is reported and fails the process. */
static void refused(const char *what, GotryStatus status) {
    switch (status) {
    case GOTRY_STATUS_LEASE_HELD: held_refusals++; break;
    case GOTRY_STATUS_LEASE_LOST: lost++; break;
    case GOTRY_STATUS_FENCED: fenced++; break;
    case GOTRY_STATUS_LEASE_STORE_UNAVAILABLE: unavailable++; break;
    default:
        unexpected++;
        fprintf(stderr, "contend %s: %s returned %s\n", owner, what, gotry_status_name(status));
    }
}

static void sleep_ms(long ms) {
    struct timespec t;
    t.tv_sec = ms / 1000;
    t.tv_nsec = (ms % 1000) * 1000000L;
    nanosleep(&t, NULL);
}

static double elapsed_s(const struct timespec *start) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)(now.tv_sec - start->tv_sec) + (double)(now.tv_nsec - start->tv_nsec) / 1e9;
}

/* One step on a key driven through the store calls; `epoch` is what this process holds (0: none). */
static void store_step(GotryStore *store, const char *key, int64_t *epoch, int64_t ttl) {
    size_t key_len = strlen(key), owner_len = strlen(owner);
    GotryRecord *record = NULL;
    int64_t granted = 0;
    GotryStatus status;
    if (*epoch == 0) {
        status = gotry_store_acquire(store, key, key_len, owner, owner_len, ttl, &record, &granted, NULL);
        if (status == GOTRY_STATUS_OK) {
            GotryRecordView view;
            if (gotry_record_view(record, &view) == GOTRY_STATUS_OK) {
                *epoch = view.epoch;
                ack(key, GOTRY_LEASE_OP_ACQUIRE, view.epoch);
            }
            gotry_record_free(record);
        } else {
            refused("acquire", status);
        }
        return;
    }
    int roll = (int)(next_u64() % 100);
    /* A wrong epoch now and then: the store must refuse it (the audit catches a grant). */
    int64_t named = roll >= 95 ? *epoch + 1 : *epoch;
    GotryLeaseOp op = roll < 60 ? GOTRY_LEASE_OP_RENEW
                      : roll < 70 ? GOTRY_LEASE_OP_FORGET
                      : roll < 95 ? GOTRY_LEASE_OP_RELEASE
                                  : GOTRY_LEASE_OP_RENEW;
    if (op == GOTRY_LEASE_OP_RENEW)
        status = gotry_store_renew(store, key, key_len, owner, owner_len, named, ttl, &record, &granted, NULL);
    else if (op == GOTRY_LEASE_OP_FORGET)
        status = gotry_store_mark_forgotten(store, key, key_len, owner, owner_len, named, &record, NULL);
    else
        status = gotry_store_release(store, key, key_len, owner, owner_len, named, &record, NULL);
    if (status == GOTRY_STATUS_OK) {
        ack(key, op, named);
        gotry_record_free(record);
        if (op == GOTRY_LEASE_OP_RELEASE) *epoch = 0;
    } else {
        refused(gotry_lease_op_name(op), status);
        if (status == GOTRY_STATUS_LEASE_LOST && named == *epoch) *epoch = 0;
    }
}

/* One batched renewal of every store-driven key this process holds. */
static void batch_step(GotryStore *store, const char *const *keys, int64_t *epochs, int64_t ttl) {
    GotryLeaseRef leases[2];
    int index[2];
    size_t count = 0;
    for (int k = 0; k < 2; k++) {
        if (epochs[k] == 0) continue;
        leases[count].key = keys[k];
        leases[count].key_len = strlen(keys[k]);
        leases[count].epoch = epochs[k];
        index[count++] = k;
    }
    if (count == 0) return;
    GotryRenewBatch *batch = NULL;
    GotryStatus status = gotry_store_renew_batch(store, owner, strlen(owner), ttl, leases, count, &batch, NULL);
    if (status != GOTRY_STATUS_OK) {
        refused("renew batch", status);
        return;
    }
    for (size_t i = 0; i < count; i++) {
        GotryStatus answer = GOTRY_STATUS_INTERNAL_ERROR;
        gotry_renew_batch_status(batch, i, &answer);
        if (answer == GOTRY_STATUS_OK) {
            ack(keys[index[i]], GOTRY_LEASE_OP_RENEW, leases[i].epoch);
        } else {
            refused("batched renew", answer);
            if (answer == GOTRY_STATUS_LEASE_LOST) epochs[index[i]] = 0;
        }
    }
    gotry_renew_batch_free(batch);
}

/* One step on a key driven through a tenant lease. */
static void lease_step(GotryStore *store, const char *key, GotryLease **lease, int64_t ttl) {
    GotryStatus status;
    if (*lease == NULL) {
        status = gotry_lease_acquire(store, key, strlen(key), owner, strlen(owner), ttl, LEASE_MARGIN_MS, NULL,
                                     lease, NULL);
        int64_t epoch = 0;
        if (status == GOTRY_STATUS_OK && gotry_lease_epoch(*lease, &epoch) == GOTRY_STATUS_OK)
            ack(key, GOTRY_LEASE_OP_ACQUIRE, epoch);
        else if (status != GOTRY_STATUS_OK)
            refused("lease acquire", status);
        return;
    }
    int64_t epoch = 0;
    gotry_lease_epoch(*lease, &epoch);
    int roll = (int)(next_u64() % 100);
    if (roll < 65) {
        status = gotry_lease_renew(*lease, NULL);
        if (status == GOTRY_STATUS_OK) ack(key, GOTRY_LEASE_OP_RENEW, epoch);
    } else if (roll < 80) {
        GotryRecord *record = NULL;
        status = gotry_lease_mark_forgotten(*lease, &record, NULL);
        if (status == GOTRY_STATUS_OK) ack(key, GOTRY_LEASE_OP_FORGET, epoch);
        gotry_record_free(record);
    } else {
        /* A release that finds the lease lost succeeds without a grant: not acknowledged. */
        status = gotry_lease_release(*lease, NULL);
        gotry_lease_free(*lease);
        *lease = NULL;
        if (status != GOTRY_STATUS_OK) refused("lease release", status);
        return;
    }
    if (status != GOTRY_STATUS_OK) {
        refused("lease step", status);
        if (status == GOTRY_STATUS_LEASE_LOST || status == GOTRY_STATUS_FENCED) {
            gotry_lease_free(*lease);
            *lease = NULL;
        }
    }
}

int main(int argc, char **argv) {
    if (argc != 7) {
        fprintf(stderr, "usage: %s DB_PATH OWNER SECONDS SEED TTL_MS ACK_FILE\n", argv[0]);
        return 2;
    }
    const char *path = argv[1];
    owner = argv[2];
    double seconds = strtod(argv[3], NULL);
    rng_state = strtoull(argv[4], NULL, 10);
    int64_t ttl = strtoll(argv[5], NULL, 10);
    acks = fopen(argv[6], "w");
    if (acks == NULL) {
        perror(argv[6]);
        return 2;
    }
    setvbuf(acks, NULL, _IOLBF, 0);

    GotryStore *store = NULL;
    GotryError *error = NULL;
    if (gotry_store_open(path, strlen(path), NULL, &store, &error) != GOTRY_STATUS_OK) {
        const char *message = NULL;
        size_t len = 0;
        gotry_error_message(error, &message, &len);
        fprintf(stderr, "contend %s: cannot open %s: %.*s\n", owner, path, (int)len, message ? message : "");
        gotry_error_free(error);
        return 2;
    }
    static const char *const keys[KEYS] = {"k0", "k1", "k2", "k3"};
    int64_t epochs[2] = {0, 0};
    GotryLease *leases[2] = {NULL, NULL};
    struct timespec start;
    clock_gettime(CLOCK_MONOTONIC, &start);
    long steps = 0;
    while (elapsed_s(&start) < seconds) {
        int k = (int)(next_u64() % KEYS);
        if (chance(10))
            batch_step(store, keys, epochs, ttl);
        else if (k < 2)
            store_step(store, keys[k], &epochs[k], ttl);
        else
            lease_step(store, keys[k], &leases[k - 2], ttl);
        steps++;
        /* Mostly short pauses; sometimes long enough for a lease to run out. */
        if (chance(25)) sleep_ms((long)(next_u64() % (uint64_t)(chance(20) ? ttl * 2 : ttl / 4 + 1)));
    }
    for (int i = 0; i < 2; i++) {
        if (leases[i] != NULL) gotry_lease_release(leases[i], NULL);
        gotry_lease_free(leases[i]);
    }
    gotry_store_free(store);
    fclose(acks);
    long total = acknowledged[1] + acknowledged[2] + acknowledged[3] + acknowledged[4];
    printf("contend %s: %ld steps, %ld acknowledged (acquire %ld, renew %ld, release %ld, forget %ld); "
           "refused: held %ld, lost %ld, fenced %ld, unavailable %ld, unexpected %ld\n",
           owner, steps, total, acknowledged[1], acknowledged[2], acknowledged[3], acknowledged[4], held_refusals,
           lost, fenced, unavailable, unexpected);
    return unexpected == 0 ? 0 : 1;
}
