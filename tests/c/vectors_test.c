/*
 * The shared vectors of tests/vectors, which every language's suite passes, through the C ABI.
 *
 * vectors_to_c.py turns the JSON into the tables this file includes (vectors.inc, found with
 * -I on the build folder). Each store scenario runs on a fresh SQLite file with a manual
 * clock that starts at the scenario's start_ms.
 *
 * Usage: vectors_test SCRATCH_DIR
 */
#define _POSIX_C_SOURCE 200809L

#include "gotry_tenant_state.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef struct DeriveVector {
    const char *note;
    const char *key;
    size_t key_len;
    const char *issuer;
    size_t issuer_len;
    const char *subject;
    size_t subject_len;
    const char *tenant;    /* NULL when refused */
    const char *partition; /* NULL when refused */
    const char *error;     /* the code when refused */
} DeriveVector;

enum { KIND_ORG, KIND_TENANT, KIND_PARTITION };
typedef struct ValidityVector {
    int kind;
    const char *value;
    size_t len;
    int valid;
} ValidityVector;

/* A lease key (root NULL) or a tenant root. */
typedef struct PathVector {
    const char *root;
    size_t root_len;
    const char *org;
    size_t org_len;
    const char *tenant;
    size_t tenant_len;
    const char *expect;
    const char *error;
} PathVector;

typedef struct RecordVector {
    const char *key;
    size_t key_len;
    const char *owner;
    size_t owner_len;
    int64_t epoch;
    int64_t lease_until_ms;
    int64_t forgotten_at_epoch;
} RecordVector;

typedef struct HistoryVector {
    const char *key;
    size_t key_len;
    const char *op;
    const char *owner;
    size_t owner_len;
    int64_t epoch;
    int64_t at_ms;
} HistoryVector;

typedef struct StepVector {
    const char *call; /* NULL: advance the clock */
    int64_t advance_ms;
    const char *key; /* NULL: history of every key */
    size_t key_len;
    const char *owner;
    size_t owner_len;
    int64_t epoch;
    int64_t ttl_ms;
    const char *error; /* GOTRY_TENANT_* or INVALID_ARGUMENT */
    int has_ttl;
    int64_t ttl;
    int record_expect; /* 0: no record, 1: `record`, 2: not checked */
    RecordVector record;
    int history_first; /* -1: no history expected */
    int history_count;
} StepVector;

typedef struct ScenarioVector {
    const char *name;
    int64_t start_ms;
    int first;
    int count;
} ScenarioVector;

#include "vectors.inc"

#define COUNT(array) (sizeof(array) / sizeof((array)[0]))

static int checks, failures;
static void check(int ok, const char *case_name, const char *what) {
    checks++;
    if (!ok) {
        failures++;
        fprintf(stderr, "vectors_test: %s: %s\n", case_name, what);
    }
}

static int same(const char *a, size_t a_len, const char *b, size_t b_len) {
    return a_len == b_len && memcmp(a, b, a_len) == 0;
}

/* The status and code a vector's error string stands for. */
static int failed_as(GotryStatus status, const GotryError *err, const char *expected) {
    const char *code = NULL;
    const char *status_code = gotry_status_code(status);
    if (strcmp(expected, "INVALID_ARGUMENT") == 0) return status == GOTRY_STATUS_INVALID_ARGUMENT;
    return status_code != NULL && strcmp(status_code, expected) == 0 &&
           gotry_error_code(err, &code) == GOTRY_STATUS_OK && strcmp(code, expected) == 0;
}

static void run_ids(void) {
    for (size_t i = 0; i < COUNT(derive_vectors); i++) {
        const DeriveVector *v = &derive_vectors[i];
        char tenant[GOTRY_LEDGER_TENANT_ID_BUFFER_LEN];
        char partition[GOTRY_PROMPT_CACHE_PARTITION_BUFFER_LEN];
        GotryError *err = NULL;
        GotryStatus status = gotry_derive_ledger_tenant_id((const uint8_t *)v->key, v->key_len, v->issuer,
                                                           v->issuer_len, v->subject, v->subject_len, tenant,
                                                           sizeof tenant, &err);
        if (v->error != NULL) {
            check(failed_as(status, err, v->error), v->note, "refused with the vector's code");
        } else {
            check(status == GOTRY_STATUS_OK && strcmp(tenant, v->tenant) == 0, v->note, "ledger tenant id");
            check(gotry_derive_prompt_cache_partition((const uint8_t *)v->key, v->key_len, tenant, strlen(tenant),
                                                      partition, sizeof partition, NULL) == GOTRY_STATUS_OK &&
                      strcmp(partition, v->partition) == 0,
                  v->note, "prompt cache partition");
        }
        gotry_error_free(err);
    }
    for (size_t i = 0; i < COUNT(validity_vectors); i++) {
        const ValidityVector *v = &validity_vectors[i];
        GotryStatus status = v->kind == KIND_ORG      ? gotry_assert_organization_id(v->value, v->len, NULL)
                             : v->kind == KIND_TENANT ? gotry_assert_ledger_tenant_id(v->value, v->len, NULL)
                                                      : gotry_assert_prompt_cache_partition(v->value, v->len, NULL);
        check(status == (v->valid ? GOTRY_STATUS_OK : GOTRY_STATUS_ID_INVALID), v->value, "validator");
    }
    for (size_t i = 0; i < COUNT(path_vectors); i++) {
        const PathVector *v = &path_vectors[i];
        char out[4096];
        size_t out_len = 0;
        GotryError *err = NULL;
        GotryStatus status =
            v->root == NULL
                ? gotry_lease_key_for(v->org, v->org_len, v->tenant, v->tenant_len, out, sizeof out, &err)
                : gotry_tenant_root_for(v->root, v->root_len, v->org, v->org_len, v->tenant, v->tenant_len, out,
                                        sizeof out, &out_len, &err);
        if (v->error != NULL)
            check(failed_as(status, err, v->error), v->org, "path refused with the vector's code");
        else
            check(status == GOTRY_STATUS_OK && strcmp(out, v->expect) == 0 &&
                      (v->root == NULL || out_len == strlen(v->expect)),
                  v->expect, "path");
        gotry_error_free(err);
    }
}

static int record_matches(const GotryRecordView *view, const RecordVector *want) {
    return same(view->key, view->key_len, want->key, want->key_len) &&
           same(view->owner, view->owner_len, want->owner, want->owner_len) && view->epoch == want->epoch &&
           view->lease_until_ms == want->lease_until_ms && view->forgotten_at_epoch == want->forgotten_at_epoch;
}

static void run_step(const ScenarioVector *scenario, const StepVector *step, GotryStore *store,
                     GotryManualClock *clock) {
    const char *name = scenario->name;
    if (step->call == NULL) {
        int64_t now = 0;
        check(gotry_manual_clock_advance(clock, step->advance_ms, &now, NULL) == GOTRY_STATUS_OK, name, "advance");
        return;
    }
    GotryError *err = NULL;
    GotryRecord *record = NULL;
    GotryHistory *history = NULL;
    int64_t ttl = 0;
    GotryStatus status;
    if (strcmp(step->call, "read") == 0)
        status = gotry_store_read(store, step->key, step->key_len, &record, &err);
    else if (strcmp(step->call, "acquire") == 0)
        status = gotry_store_acquire(store, step->key, step->key_len, step->owner, step->owner_len, step->ttl_ms,
                                     &record, &ttl, &err);
    else if (strcmp(step->call, "renew") == 0)
        status = gotry_store_renew(store, step->key, step->key_len, step->owner, step->owner_len, step->epoch,
                                   step->ttl_ms, &record, &ttl, &err);
    else if (strcmp(step->call, "release") == 0)
        status = gotry_store_release(store, step->key, step->key_len, step->owner, step->owner_len, step->epoch,
                                     &record, &err);
    else if (strcmp(step->call, "mark_forgotten") == 0)
        status = gotry_store_mark_forgotten(store, step->key, step->key_len, step->owner, step->owner_len,
                                            step->epoch, &record, &err);
    else if (strcmp(step->call, "history") == 0)
        status = gotry_store_history(store, step->key, step->key_len, &history, &err);
    else {
        check(0, name, step->call);
        return;
    }

    if (step->error != NULL) {
        check(failed_as(status, err, step->error), name, step->call);
        if (step->record_expect == 1) {
            GotryRecordView view;
            check(gotry_error_record(err, &view) == GOTRY_STATUS_OK && record_matches(&view, &step->record), name,
                  "the refusal's record");
        }
    } else {
        check(status == GOTRY_STATUS_OK, name, step->call);
        if (step->has_ttl) check(ttl == step->ttl, name, "granted ttl");
        if (step->record_expect == 0) check(record == NULL, name, "no record");
        if (step->record_expect == 1) {
            GotryRecordView view;
            check(record != NULL && gotry_record_view(record, &view) == GOTRY_STATUS_OK &&
                      record_matches(&view, &step->record),
                  name, "record");
        }
        if (step->history_first >= 0) {
            size_t len = 0;
            check(gotry_history_len(history, &len) == GOTRY_STATUS_OK && len == (size_t)step->history_count, name,
                  "history length");
            for (int i = 0; i < step->history_count && (size_t)i < len; i++) {
                const HistoryVector *want = &history_vectors[step->history_first + i];
                GotryHistoryEntry entry;
                check(gotry_history_get(history, (size_t)i, &entry) == GOTRY_STATUS_OK &&
                          same(entry.key, entry.key_len, want->key, want->key_len) &&
                          strcmp(gotry_lease_op_name(entry.op), want->op) == 0 &&
                          same(entry.owner, entry.owner_len, want->owner, want->owner_len) &&
                          entry.epoch == want->epoch && entry.at_ms == want->at_ms,
                      name, "history entry");
            }
        }
    }
    gotry_record_free(record);
    gotry_history_free(history);
    gotry_error_free(err);
}

/* A scenario starts from nothing, even when the scratch folder is reused. */
static void remove_store(const char *path) {
    static const char *const suffixes[] = {"", "-wal", "-shm", "-journal"};
    for (size_t i = 0; i < COUNT(suffixes); i++) {
        char file[1100];
        snprintf(file, sizeof file, "%s%s", path, suffixes[i]);
        remove(file);
    }
}

static void run_scenarios(const char *dir) {
    for (size_t s = 0; s < COUNT(scenario_vectors); s++) {
        const ScenarioVector *scenario = &scenario_vectors[s];
        char path[1024];
        snprintf(path, sizeof path, "%s/scenario-%zu.db", dir, s);
        remove_store(path);
        GotryManualClock *clock = NULL;
        GotryStore *store = NULL;
        if (gotry_manual_clock_new(scenario->start_ms, &clock) != GOTRY_STATUS_OK ||
            gotry_store_open(path, strlen(path), clock, &store, NULL) != GOTRY_STATUS_OK) {
            check(0, scenario->name, "open the store");
            gotry_manual_clock_free(clock);
            continue;
        }
        for (int i = 0; i < scenario->count; i++) run_step(scenario, &step_vectors[scenario->first + i], store, clock);
        gotry_store_free(store);
        gotry_manual_clock_free(clock);
    }
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s SCRATCH_DIR\n", argv[0]);
        return 2;
    }
    run_ids();
    run_scenarios(argv[1]);
    printf("vectors_test: %zu id, %zu validity, %zu path vectors and %zu store scenarios (%zu steps): "
           "%d checks, %d failed\n",
           COUNT(derive_vectors), COUNT(validity_vectors), COUNT(path_vectors), COUNT(scenario_vectors),
           COUNT(step_vectors), checks, failures);
    return failures == 0 ? 0 : 1;
}
