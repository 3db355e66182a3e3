/*
 * The lease store of gotry_tenant_state.h and its failure paths, from C: a SQLite store on a
 * manual clock (grants, LEASE_HELD with the holder's record, renewals, forgetting, expiry,
 * the range checks of keys, owners and TTLs, the log, listing, use after close, opening by
 * URL, files that are not SQLite), and renewals in a batch, each lease answered on its own.
 * Given a URL, it runs only the same store calls, a holder and a keeper on that server.
 *
 * One of the suites of the C API by area, with ids_test.c and lease_test.c; like them it
 * compiles as C11 and as C++17, and run.sh runs both under valgrind.
 *
 * Usage: store_test SCRATCH_DIR             (an existing, empty, writable directory)
 *        store_test SCRATCH_DIR MYSQL_URL   (only the checks of a store on a MySQL/MariaDB
 *                                            server, with a table prefix no one else uses)
 */
#define _POSIX_C_SOURCE 200809L

/* Every failure's error is proven whole: status, code and a message (see test_common.h). */
#define CHECK_WHOLE_ERRORS
#include "test_common.h"

static void test_store(const char *dir) {
    GotryError *err = NULL;
    GotryManualClock *clock = NULL;
    GotryStore *store = NULL;
    GotryRecord *record = NULL;
    GotryRecordView view;
    int64_t ttl = 0;
    char path[1024];
    snprintf(path, sizeof path, "%s/nested/leases.db", dir);

    STATUS(gotry_manual_clock_new(1000000, &clock), GOTRY_STATUS_OK);
    STATUS(gotry_store_open(path, strlen(path), clock, &store, &err), GOTRY_STATUS_OK);
    CHECK(store != NULL && access(path, F_OK) == 0);
    int64_t now = 0;
    STATUS(gotry_store_now_ms(store, &now, &err), GOTRY_STATUS_OK);
    CHECK(now == 1000000);

    /* Nothing there yet: success with a NULL record. */
    record = (GotryRecord *)&view; /* a sentinel that must be overwritten */
    STATUS(gotry_store_read(store, S("k"), &record, &err), GOTRY_STATUS_OK);
    CHECK(record == NULL);

    STATUS(gotry_store_acquire(store, S("k"), S("replica-a"), 1000, &record, &ttl, &err), GOTRY_STATUS_OK);
    view = record_view_of(record);
    CHECK(LENT_IS(view.key, view.key_len, "k") && LENT_IS(view.owner, view.owner_len, "replica-a"));
    CHECK(view.epoch == 1 && view.lease_until_ms == 1001000 && view.forgotten_at_epoch == 0 && ttl == 1000);
    gotry_record_free(record);

    /* Held by someone else: LEASE_HELD carries the holder's record. */
    record = NULL;
    STATUS(gotry_store_acquire(store, S("k"), S("replica-b"), 1000, &record, &ttl, &err), GOTRY_STATUS_LEASE_HELD);
    CHECK(record == NULL);
    GotryRecordView held;
    STATUS(gotry_error_record(err, &held), GOTRY_STATUS_OK);
    CHECK(LENT_IS(held.owner, held.owner_len, "replica-a") && held.epoch == 1 && held.lease_until_ms == 1001000);
    CHECK(LENT_IS(held.key, held.key_len, "k"));
    GotryFenceReason reason;
    STATUS(gotry_error_fence_reason(err, &reason), GOTRY_STATUS_NO_VALUE);
    ERROR_IS(GOTRY_STATUS_LEASE_HELD, "GOTRY_TENANT_LEASE_HELD");

    STATUS(gotry_manual_clock_advance(clock, 400, &now, NULL), GOTRY_STATUS_OK);
    STATUS(gotry_store_renew(store, S("k"), S("replica-a"), 1, 1000, &record, &ttl, &err), GOTRY_STATUS_OK);
    CHECK(record_view_of(record).lease_until_ms == 1001400 && record_view_of(record).epoch == 1);
    gotry_record_free(record);
    FAILS(gotry_store_renew(store, S("k"), S("replica-b"), 1, 1000, &record, &ttl, &err), GOTRY_STATUS_LEASE_LOST,
          "GOTRY_TENANT_LEASE_LOST");
    FAILS(gotry_store_renew(store, S("k"), S("replica-a"), 2, 1000, &record, &ttl, &err), GOTRY_STATUS_LEASE_LOST,
          "GOTRY_TENANT_LEASE_LOST");
    STATUS(gotry_store_mark_forgotten(store, S("k"), S("replica-a"), 1, &record, &err), GOTRY_STATUS_OK);
    CHECK(record_view_of(record).forgotten_at_epoch == 1);
    gotry_record_free(record);

    /* Range checks: epoch, TTL bounds, text length in UTF-16 units, UTF-8. */
    FAILS_RANGE(gotry_store_renew(store, S("k"), S("replica-a"), 0, 1000, &record, &ttl, &err));
    FAILS_RANGE(gotry_store_renew(store, S("k"), S("replica-a"), 1, 99, &record, &ttl, &err));
    FAILS_RANGE(gotry_store_acquire(store, S("other"), S("o"), 99, &record, &ttl, &err));
    FAILS_RANGE(gotry_store_acquire(store, S("other"), S("o"), 600001, &record, &ttl, &err));
    FAILS_RANGE(gotry_store_acquire(store, S("other"), S("o"), -1, &record, &ttl, &err));
    FAILS_RANGE(gotry_store_acquire(store, S(""), S("o"), 1000, &record, &ttl, &err));
    FAILS_RANGE(gotry_store_acquire(store, S("other"), S(""), 1000, &record, &ttl, &err));
    FAILS_RANGE(gotry_store_acquire(store, S("k\xff"), S("o"), 1000, &record, &ttl, &err));
    FAILS_RANGE(gotry_store_acquire(store, S("k"), S("o\xc0\xaf"), 1000, &record, &ttl, &err));
    FAILS_RANGE(gotry_store_release(store, S("k"), S("replica-a"), -3, &record, &err));
    FAILS_RANGE(gotry_store_mark_forgotten(store, S("k"), S("replica-a"), 0, &record, &err));
    FAILS_RANGE(gotry_store_read(store, S(""), &record, &err));
    char text[900];
    memset(text, 'x', sizeof text);
    STATUS(gotry_store_acquire(store, text, 200, S("o"), 100, &record, &ttl, &err), GOTRY_STATUS_OK);
    gotry_record_free(record);
    FAILS_RANGE(gotry_store_acquire(store, text, 201, S("o"), 100, &record, &ttl, &err));
    /* 100 emoji are 400 bytes and 200 UTF-16 units: accepted; 101 are refused. */
    for (int i = 0; i < 101; i++) memcpy(text + 4 * i, "\xf0\x9f\x98\x80", 4);
    STATUS(gotry_store_acquire(store, S("emoji"), text, 400, GOTRY_MIN_LEASE_TTL_MS, &record, &ttl, &err),
           GOTRY_STATUS_OK);
    view = record_view_of(record);
    CHECK(view.owner_len == 400 && memcmp(view.owner, text, 400) == 0 && view.owner[400] == '\0');

    gotry_record_free(record);
    FAILS_RANGE(gotry_store_acquire(store, S("emoji2"), text, 404, 1000, &record, &ttl, &err));

    /* A key may hold a NUL (the rules allow it): it is kept whole, not cut at the NUL. */
    STATUS(gotry_store_acquire(store, S("n\0ul"), S("o"), 1000, &record, &ttl, &err), GOTRY_STATUS_OK);
    gotry_record_free(record);
    STATUS(gotry_store_read(store, S("n\0ul"), &record, &err), GOTRY_STATUS_OK);
    CHECK(record != NULL && LENT_IS(record_view_of(record).key, record_view_of(record).key_len, "n\0ul"));
    gotry_record_free(record);
    STATUS(gotry_store_read(store, S("n"), &record, &err), GOTRY_STATUS_OK);
    CHECK(record == NULL);

    /* Expiry on the store's clock: renew and forget are refused, release is still allowed. */
    STATUS(gotry_manual_clock_advance(clock, 1000, &now, NULL), GOTRY_STATUS_OK);
    FAILS(gotry_store_renew(store, S("k"), S("replica-a"), 1, 1000, &record, &ttl, &err), GOTRY_STATUS_LEASE_LOST,
          "GOTRY_TENANT_LEASE_LOST");
    FAILS(gotry_store_mark_forgotten(store, S("k"), S("replica-a"), 1, &record, &err), GOTRY_STATUS_LEASE_LOST,
          "GOTRY_TENANT_LEASE_LOST");
    FAILS(gotry_store_release(store, S("k"), S("replica-b"), 1, &record, &err), GOTRY_STATUS_LEASE_LOST,
          "GOTRY_TENANT_LEASE_LOST");
    STATUS(gotry_store_release(store, S("k"), S("replica-a"), 1, &record, &err), GOTRY_STATUS_OK);
    CHECK(record_view_of(record).lease_until_ms == 1001400);
    gotry_record_free(record);
    STATUS(gotry_store_acquire(store, S("k"), S("replica-b"), 1000, &record, &ttl, &err), GOTRY_STATUS_OK);
    view = record_view_of(record);
    CHECK(view.epoch == 2 && view.forgotten_at_epoch == 1 && view.lease_until_ms == 1002400);
    gotry_record_free(record);
    /* Release expires it at once: the next acquire needs no wait. */
    STATUS(gotry_store_release(store, S("k"), S("replica-b"), 2, &record, &err), GOTRY_STATUS_OK);
    CHECK(record_view_of(record).lease_until_ms == 1001400);
    gotry_record_free(record);
    STATUS(gotry_store_acquire(store, S("k"), S("replica-a"), 1000, &record, &ttl, &err), GOTRY_STATUS_OK);
    CHECK(record_view_of(record).epoch == 3);
    gotry_record_free(record);

    /* The log of one key, in order. */
    GotryHistory *history = NULL;
    size_t count = 0;
    STATUS(gotry_store_history(store, S("k"), &history, &err), GOTRY_STATUS_OK);
    STATUS(gotry_history_len(history, &count), GOTRY_STATUS_OK);
    CHECK(count == 7);
    static const GotryLeaseOp ops[7] = {GOTRY_LEASE_OP_ACQUIRE, GOTRY_LEASE_OP_RENEW,   GOTRY_LEASE_OP_FORGET,
                                        GOTRY_LEASE_OP_RELEASE, GOTRY_LEASE_OP_ACQUIRE, GOTRY_LEASE_OP_RELEASE,
                                        GOTRY_LEASE_OP_ACQUIRE};
    static const int64_t epochs[7] = {1, 1, 1, 1, 2, 2, 3};
    static const int64_t at[7] = {1000000, 1000400, 1000400, 1001400, 1001400, 1001400, 1001400};
    for (size_t i = 0; i < 7 && i < count; i++) {
        GotryHistoryEntry entry;
        STATUS(gotry_history_get(history, i, &entry), GOTRY_STATUS_OK);
        CHECK(entry.op == ops[i] && entry.epoch == epochs[i] && entry.at_ms == at[i]);
        CHECK(LENT_IS(entry.key, entry.key_len, "k"));
        const char *owner = i == 4 || i == 5 ? "replica-b" : "replica-a";
        CHECK(lent_equals(entry.owner, entry.owner_len, owner, strlen(owner)));
    }
    GotryHistoryEntry entry;
    STATUS(gotry_history_get(history, 7, &entry), GOTRY_STATUS_INVALID_ARGUMENT);
    STATUS(gotry_history_get(history, 0, NULL), GOTRY_STATUS_NULL_ARGUMENT);
    STATUS(gotry_history_get(NULL, 0, &entry), GOTRY_STATUS_NULL_ARGUMENT);
    STATUS(gotry_history_len(NULL, &count), GOTRY_STATUS_NULL_ARGUMENT);
    STATUS(gotry_history_len(history, NULL), GOTRY_STATUS_NULL_ARGUMENT);
    gotry_history_free(history);
    /* All keys: NULL key. An empty key is a key like any other, with no log. */
    STATUS(gotry_store_history(store, NULL, 99, &history, &err), GOTRY_STATUS_OK);
    STATUS(gotry_history_len(history, &count), GOTRY_STATUS_OK);
    CHECK(count == 10);
    gotry_history_free(history);
    STATUS(gotry_store_history(store, S(""), &history, &err), GOTRY_STATUS_OK);
    STATUS(gotry_history_len(history, &count), GOTRY_STATUS_OK);
    CHECK(count == 0);
    gotry_history_free(history);
    FAILS_RANGE(gotry_store_history(store, S("\xff"), &history, &err));
    FAILS_NULL(gotry_store_history(store, NULL, 0, NULL, &err));
    FAILS_NULL(gotry_store_history(NULL, NULL, 0, &history, &err));

    /* Listing, ordered by key, by prefix. */
    GotryRecordList *list = NULL;
    STATUS(gotry_store_list(store, S(""), &list, &err), GOTRY_STATUS_OK);
    STATUS(gotry_record_list_len(list, &count), GOTRY_STATUS_OK);
    CHECK(count == 4);
    STATUS(gotry_record_list_get(list, 0, &view), GOTRY_STATUS_OK);
    CHECK(LENT_IS(view.key, view.key_len, "emoji"));
    STATUS(gotry_record_list_get(list, 1, &view), GOTRY_STATUS_OK);
    CHECK(LENT_IS(view.key, view.key_len, "k") && view.epoch == 3);
    STATUS(gotry_record_list_get(list, 4, &view), GOTRY_STATUS_INVALID_ARGUMENT);
    STATUS(gotry_record_list_get(list, 0, NULL), GOTRY_STATUS_NULL_ARGUMENT);
    STATUS(gotry_record_list_get(NULL, 0, &view), GOTRY_STATUS_NULL_ARGUMENT);
    STATUS(gotry_record_list_len(NULL, &count), GOTRY_STATUS_NULL_ARGUMENT);
    STATUS(gotry_record_list_len(list, NULL), GOTRY_STATUS_NULL_ARGUMENT);
    gotry_record_list_free(list);
    STATUS(gotry_store_list(store, S("n"), &list, &err), GOTRY_STATUS_OK);
    STATUS(gotry_record_list_len(list, &count), GOTRY_STATUS_OK);
    CHECK(count == 1);
    gotry_record_list_free(list);
    FAILS_NULL(gotry_store_list(store, NULL, 0, &list, &err));
    FAILS_NULL(gotry_store_list(store, S(""), NULL, &err));
    FAILS_RANGE(gotry_store_list(store, S("\xfe"), &list, &err));

    /* NULL anywhere a pointer is required. */
    FAILS_NULL(gotry_store_read(NULL, S("k"), &record, &err));
    FAILS_NULL(gotry_store_read(store, NULL, 1, &record, &err));
    FAILS_NULL(gotry_store_read(store, S("k"), NULL, &err));
    FAILS_NULL(gotry_store_acquire(NULL, S("k"), S("o"), 1000, &record, &ttl, &err));
    FAILS_NULL(gotry_store_acquire(store, S("k"), NULL, 1, 1000, &record, &ttl, &err));
    FAILS_NULL(gotry_store_acquire(store, S("k"), S("o"), 1000, NULL, &ttl, &err));
    FAILS_NULL(gotry_store_acquire(store, S("k"), S("o"), 1000, &record, NULL, &err));
    FAILS_NULL(gotry_store_renew(store, NULL, 0, S("o"), 1, 1000, &record, &ttl, &err));
    FAILS_NULL(gotry_store_renew(store, S("k"), S("o"), 1, 1000, &record, NULL, &err));
    FAILS_NULL(gotry_store_release(store, S("k"), S("o"), 1, NULL, &err));
    FAILS_NULL(gotry_store_release(NULL, S("k"), S("o"), 1, &record, &err));
    FAILS_NULL(gotry_store_mark_forgotten(store, S("k"), NULL, 0, 1, &record, &err));
    FAILS_NULL(gotry_store_now_ms(NULL, &now, &err));
    FAILS_NULL(gotry_store_now_ms(store, NULL, &err));
    STATUS(gotry_record_view(NULL, &view), GOTRY_STATUS_NULL_ARGUMENT);
    FAILS_NULL(gotry_store_open(NULL, 0, NULL, &store, &err));
    FAILS_NULL(gotry_store_open(path, strlen(path), NULL, NULL, &err));
    FAILS_NULL(gotry_store_close(NULL, &err));

    /* Use after close: a status, never a crash; closing twice is harmless. */
    STATUS(gotry_store_close(store, &err), GOTRY_STATUS_OK);
    FAILS(gotry_store_read(store, S("k"), &record, &err), GOTRY_STATUS_LEASE_STORE_UNAVAILABLE,
          "GOTRY_TENANT_LEASE_STORE_UNAVAILABLE");
    FAILS(gotry_store_acquire(store, S("z"), S("o"), 1000, &record, &ttl, &err),
          GOTRY_STATUS_LEASE_STORE_UNAVAILABLE, "GOTRY_TENANT_LEASE_STORE_UNAVAILABLE");
    FAILS(gotry_store_history(store, NULL, 0, &history, &err), GOTRY_STATUS_LEASE_STORE_UNAVAILABLE,
          "GOTRY_TENANT_LEASE_STORE_UNAVAILABLE");
    FAILS(gotry_store_list(store, S(""), &list, &err), GOTRY_STATUS_LEASE_STORE_UNAVAILABLE,
          "GOTRY_TENANT_LEASE_STORE_UNAVAILABLE");
    STATUS(gotry_store_close(store, &err), GOTRY_STATUS_OK);
    gotry_store_free(store);
    gotry_store_free(NULL);

    /* The data outlived the connection: a fresh open (by URL, system clock) sees it. */
    char url[1100];
    snprintf(url, sizeof url, "sqlite://%s", path);
    STATUS(gotry_store_open_url(url, strlen(url), &store, &err), GOTRY_STATUS_OK);
    STATUS(gotry_store_read(store, S("k"), &record, &err), GOTRY_STATUS_OK);
    CHECK(record != NULL && record_view_of(record).epoch == 3);
    gotry_record_free(record);
    STATUS(gotry_store_now_ms(store, &now, &err), GOTRY_STATUS_OK);
    CHECK(now > 1600000000000LL);
    gotry_store_free(store);
    FAILS_RANGE(gotry_store_open_url(S("redis://localhost"), &store, &err));
    FAILS_RANGE(gotry_store_open_url(S("nope"), &store, &err));
    FAILS_RANGE(gotry_store_open_url(S("sqlite://"), &store, &err));
    FAILS_RANGE(gotry_store_open_url(S("sqlite:/tmp/a\0b.db"), &store, &err));
    FAILS_NULL(gotry_store_open_url(NULL, 0, &store, &err));
    FAILS_NULL(gotry_store_open_url(S("sqlite:x.db"), NULL, &err));

    /* A file that is not SQLite: a storage error with SQLite's own code name. */
    char junk[1024];
    snprintf(junk, sizeof junk, "%s/not-a-database.db", dir);
    FILE *file = fopen(junk, "w");
    CHECK(file != NULL);
    if (file) {
        for (int i = 0; i < 200; i++) fputs("this is not a database, only text. ", file);
        fclose(file);
    }
    FAILS(gotry_store_open(junk, strlen(junk), NULL, &store, &err), GOTRY_STATUS_STORAGE_ERROR, "SQLITE_NOTADB");
    /* A parent "folder" that is a file: the file system's errno name, as Node gives it. */
    char under_file[1100];
    snprintf(under_file, sizeof under_file, "%s/sub/leases.db", junk);
    FAILS(gotry_store_open(under_file, strlen(under_file), NULL, &store, &err), GOTRY_STATUS_STORAGE_ERROR,
          "ENOTDIR");
    /* A path with a NUL, or not UTF-8, is refused before SQLite sees it. */
    FAILS_RANGE(gotry_store_open(S("/tmp/a\0b"), NULL, &store, &err));
    FAILS_RANGE(gotry_store_open(S("/tmp/\xff.db"), NULL, &store, &err));
    gotry_manual_clock_free(clock);
}

static GotryLeaseRef lease_ref(const char *key, size_t key_len, int64_t epoch) {
    GotryLeaseRef ref;
    ref.key = key;
    ref.key_len = key_len;
    ref.epoch = epoch;
    return ref;
}

static void test_renew_batch(const char *dir) {
    GotryError *err = NULL;
    GotryManualClock *clock = NULL;
    GotryStore *store = NULL;
    GotryRecord *record = NULL;
    GotryRenewBatch *batch = NULL;
    int64_t ttl = 0;
    char path[1024];
    snprintf(path, sizeof path, "%s/batch.db", dir);
    STATUS(gotry_manual_clock_new(10000, &clock), GOTRY_STATUS_OK);
    STATUS(gotry_store_open(path, strlen(path), clock, &store, &err), GOTRY_STATUS_OK);
    STATUS(gotry_store_acquire(store, S("expired"), S("me"), 100, &record, &ttl, &err), GOTRY_STATUS_OK);
    gotry_record_free(record);
    STATUS(gotry_manual_clock_set(clock, 10100), GOTRY_STATUS_OK);
    STATUS(gotry_store_acquire(store, S("held"), S("me"), 1000, &record, &ttl, &err), GOTRY_STATUS_OK);
    gotry_record_free(record);
    STATUS(gotry_store_acquire(store, S("theirs"), S("them"), 1000, &record, &ttl, &err), GOTRY_STATUS_OK);
    gotry_record_free(record);
    STATUS(gotry_manual_clock_set(clock, 10110), GOTRY_STATUS_OK);

    /* Each lease is answered on its own; one bad key does not sink the others. */
    GotryLeaseRef leases[8];
    leases[0] = lease_ref(S("held"), 1);
    leases[1] = lease_ref(S("expired"), 1);
    leases[2] = lease_ref(S("theirs"), 1);
    leases[3] = lease_ref(S("held"), 0);
    leases[4] = lease_ref(S(""), 1);
    leases[5] = lease_ref(S("never"), 1);
    leases[6] = lease_ref(S("held\xff"), 1);
    leases[7] = lease_ref("held", SIZE_MAX, 1);
    static const GotryStatus expected[8] = {
        GOTRY_STATUS_OK,               /* held by me */
        GOTRY_STATUS_LEASE_LOST,       /* mine, expired */
        GOTRY_STATUS_LEASE_LOST,       /* theirs */
        GOTRY_STATUS_INVALID_ARGUMENT, /* epoch 0 */
        GOTRY_STATUS_INVALID_ARGUMENT, /* empty key */
        GOTRY_STATUS_LEASE_LOST,       /* never acquired */
        GOTRY_STATUS_INVALID_ARGUMENT, /* not UTF-8 */
        GOTRY_STATUS_INVALID_ARGUMENT, /* a length no key can have */
    };
    STATUS(gotry_store_renew_batch(store, S("me"), 2000, leases, 8, &batch, &err), GOTRY_STATUS_OK);
    size_t count = 0;
    STATUS(gotry_renew_batch_len(batch, &count), GOTRY_STATUS_OK);
    CHECK(count == 8);
    for (size_t i = 0; i < 8 && i < count; i++) {
        GotryStatus answer = GOTRY_STATUS_INTERNAL_ERROR;
        STATUS(gotry_renew_batch_status(batch, i, &answer), GOTRY_STATUS_OK);
        CHECK(answer == expected[i]);
        GotryRecordView view;
        const GotryError *refusal = NULL;
        if (answer == GOTRY_STATUS_OK) {
            STATUS(gotry_renew_batch_grant(batch, i, &view, &ttl), GOTRY_STATUS_OK);
            CHECK(LENT_IS(view.key, view.key_len, "held") && view.epoch == 1 && view.lease_until_ms == 12110);
            CHECK(ttl == 2000);
            STATUS(gotry_renew_batch_error(batch, i, &refusal), GOTRY_STATUS_NO_VALUE);
        } else {
            STATUS(gotry_renew_batch_grant(batch, i, &view, &ttl), GOTRY_STATUS_NO_VALUE);
            STATUS(gotry_renew_batch_error(batch, i, &refusal), GOTRY_STATUS_OK);
            const char *code = NULL;
            CHECK(gotry_error_status(refusal) == answer);
            STATUS(gotry_error_code(refusal, &code), GOTRY_STATUS_OK);
            CHECK(strcmp(code, answer == GOTRY_STATUS_LEASE_LOST ? "GOTRY_TENANT_LEASE_LOST" : "ERR_OUT_OF_RANGE") ==
                  0);
        }
    }
    GotryStatus answer;
    GotryRecordView view;
    const GotryError *refusal = NULL;
    STATUS(gotry_renew_batch_status(batch, 8, &answer), GOTRY_STATUS_INVALID_ARGUMENT);
    STATUS(gotry_renew_batch_grant(batch, 8, &view, &ttl), GOTRY_STATUS_INVALID_ARGUMENT);
    STATUS(gotry_renew_batch_error(batch, 8, &refusal), GOTRY_STATUS_INVALID_ARGUMENT);
    STATUS(gotry_renew_batch_len(NULL, &count), GOTRY_STATUS_NULL_ARGUMENT);
    STATUS(gotry_renew_batch_len(batch, NULL), GOTRY_STATUS_NULL_ARGUMENT);
    STATUS(gotry_renew_batch_status(NULL, 0, &answer), GOTRY_STATUS_NULL_ARGUMENT);
    STATUS(gotry_renew_batch_status(batch, 0, NULL), GOTRY_STATUS_NULL_ARGUMENT);
    STATUS(gotry_renew_batch_grant(batch, 0, NULL, &ttl), GOTRY_STATUS_NULL_ARGUMENT);
    STATUS(gotry_renew_batch_grant(batch, 0, &view, NULL), GOTRY_STATUS_NULL_ARGUMENT);
    STATUS(gotry_renew_batch_grant(NULL, 0, &view, &ttl), GOTRY_STATUS_NULL_ARGUMENT);
    STATUS(gotry_renew_batch_error(batch, 1, NULL), GOTRY_STATUS_NULL_ARGUMENT);
    STATUS(gotry_renew_batch_error(NULL, 1, &refusal), GOTRY_STATUS_NULL_ARGUMENT);
    gotry_renew_batch_free(batch);
    gotry_renew_batch_free(NULL);

    /* One durable renewal was granted, so one was logged; the others' rows are untouched. */
    GotryHistory *history = NULL;
    STATUS(gotry_store_history(store, NULL, 0, &history, &err), GOTRY_STATUS_OK);
    STATUS(gotry_history_len(history, &count), GOTRY_STATUS_OK);
    CHECK(count == 4);
    GotryHistoryEntry entry;
    STATUS(gotry_history_get(history, 3, &entry), GOTRY_STATUS_OK);
    CHECK(entry.op == GOTRY_LEASE_OP_RENEW && LENT_IS(entry.key, entry.key_len, "held") && entry.at_ms == 10110);
    gotry_history_free(history);
    STATUS(gotry_store_read(store, S("theirs"), &record, &err), GOTRY_STATUS_OK);
    CHECK(record_view_of(record).lease_until_ms == 11100);
    gotry_record_free(record);

    /* An empty batch is an answer with no entries. */
    batch = NULL;
    STATUS(gotry_store_renew_batch(store, S("me"), 1000, leases, 0, &batch, &err), GOTRY_STATUS_OK);
    STATUS(gotry_renew_batch_len(batch, &count), GOTRY_STATUS_OK);
    CHECK(count == 0);
    gotry_renew_batch_free(batch);

    /* Failures of the whole call leave *out_batch alone. */
    batch = NULL;
    FAILS_RANGE(gotry_store_renew_batch(store, S("me"), 99, leases, 1, &batch, &err));
    FAILS_RANGE(gotry_store_renew_batch(store, S(""), 1000, leases, 1, &batch, &err));
    FAILS_RANGE(gotry_store_renew_batch(store, S("m\xe9"), 1000, leases, 1, &batch, &err));
    FAILS_RANGE(gotry_store_renew_batch(store, S("me"), 1000, leases, SIZE_MAX, &batch, &err));
    FAILS_NULL(gotry_store_renew_batch(NULL, S("me"), 1000, leases, 1, &batch, &err));
    FAILS_NULL(gotry_store_renew_batch(store, NULL, 2, 1000, leases, 1, &batch, &err));
    FAILS_NULL(gotry_store_renew_batch(store, S("me"), 1000, NULL, 0, &batch, &err));
    FAILS_NULL(gotry_store_renew_batch(store, S("me"), 1000, leases, 1, NULL, &err));
    leases[1] = lease_ref(NULL, 4, 1);
    FAILS_NULL(gotry_store_renew_batch(store, S("me"), 1000, leases, 2, &batch, &err));
    CHECK(batch == NULL);
    STATUS(gotry_store_close(store, &err), GOTRY_STATUS_OK);
    FAILS(gotry_store_renew_batch(store, S("me"), 1000, leases, 1, &batch, &err),
          GOTRY_STATUS_LEASE_STORE_UNAVAILABLE, "GOTRY_TENANT_LEASE_STORE_UNAVAILABLE");
    gotry_store_free(store);
    gotry_manual_clock_free(clock);
}

/* The same store calls on a database server (MySQL/MariaDB or PostgreSQL), reached by URL. */
static void test_server(const char *url) {
    bool postgres = strncmp(url, "postgres", 8) == 0;
    GotryError *err = NULL;
    GotryStore *store = NULL;
    GotryRecord *record = NULL;
    int64_t ttl = 0;
    STATUS(gotry_store_open_url(url, strlen(url), &store, &err), GOTRY_STATUS_OK);
    if (store == NULL) {
        gotry_error_free(err);
        return;
    }
    STATUS(gotry_store_acquire(store, S("k"), S("a"), 10000, &record, &ttl, &err), GOTRY_STATUS_OK);
    CHECK(record_view_of(record).epoch == 1 && ttl == 10000);
    gotry_record_free(record);
    STATUS(gotry_store_acquire(store, S("k"), S("b"), 10000, &record, &ttl, &err), GOTRY_STATUS_LEASE_HELD);
    GotryRecordView view;
    STATUS(gotry_error_record(err, &view), GOTRY_STATUS_OK);
    CHECK(LENT_IS(view.owner, view.owner_len, "a") && view.epoch == 1);
    ERROR_IS(GOTRY_STATUS_LEASE_HELD, "GOTRY_TENANT_LEASE_HELD");
    STATUS(gotry_store_renew(store, S("k"), S("a"), 1, 10000, &record, &ttl, &err), GOTRY_STATUS_OK);
    gotry_record_free(record);
    GotryLeaseRef leases[2];
    leases[0] = lease_ref(S("k"), 1);
    leases[1] = lease_ref(S("never"), 1);
    GotryRenewBatch *batch = NULL;
    GotryStatus answers[2] = {GOTRY_STATUS_INTERNAL_ERROR, GOTRY_STATUS_INTERNAL_ERROR};
    STATUS(gotry_store_renew_batch(store, S("a"), 10000, leases, 2, &batch, &err), GOTRY_STATUS_OK);
    STATUS(gotry_renew_batch_status(batch, 0, &answers[0]), GOTRY_STATUS_OK);
    STATUS(gotry_renew_batch_status(batch, 1, &answers[1]), GOTRY_STATUS_OK);
    CHECK(answers[0] == GOTRY_STATUS_OK && answers[1] == GOTRY_STATUS_LEASE_LOST);
    gotry_renew_batch_free(batch);
    STATUS(gotry_store_mark_forgotten(store, S("k"), S("a"), 1, &record, &err), GOTRY_STATUS_OK);
    CHECK(record_view_of(record).forgotten_at_epoch == 1);
    gotry_record_free(record);
    STATUS(gotry_store_release(store, S("k"), S("a"), 1, &record, &err), GOTRY_STATUS_OK);
    gotry_record_free(record);
    STATUS(gotry_store_acquire(store, S("k"), S("b"), 10000, &record, &ttl, &err), GOTRY_STATUS_OK);
    CHECK(record_view_of(record).epoch == 2 && record_view_of(record).forgotten_at_epoch == 1);
    gotry_record_free(record);
    GotryHistory *history = NULL;
    size_t count = 0;
    STATUS(gotry_store_history(store, S("k"), &history, &err), GOTRY_STATUS_OK);
    STATUS(gotry_history_len(history, &count), GOTRY_STATUS_OK);
    static const GotryLeaseOp ops[6] = {GOTRY_LEASE_OP_ACQUIRE, GOTRY_LEASE_OP_RENEW,   GOTRY_LEASE_OP_RENEW,
                                        GOTRY_LEASE_OP_FORGET,  GOTRY_LEASE_OP_RELEASE, GOTRY_LEASE_OP_ACQUIRE};
    CHECK(count == 6);
    for (size_t i = 0; i < 6 && i < count; i++) {
        GotryHistoryEntry entry;
        CHECK(gotry_history_get(history, i, &entry) == GOTRY_STATUS_OK && entry.op == ops[i]);
    }
    gotry_history_free(history);
    GotryRecordList *list = NULL;
    STATUS(gotry_store_list(store, S(""), &list, &err), GOTRY_STATUS_OK);
    STATUS(gotry_record_list_len(list, &count), GOTRY_STATUS_OK);
    CHECK(count == 1);
    gotry_record_list_free(list);

    /* A holder and a keeper on the server's clock. */
    GotryLease *lease = NULL;
    STATUS(gotry_lease_acquire(store, S("t"), S("r"), 10000, 1000, NULL, &lease, &err), GOTRY_STATUS_OK);
    STATUS(gotry_lease_assert_held(lease, &err), GOTRY_STATUS_OK);
    STATUS(gotry_lease_renew(lease, &err), GOTRY_STATUS_OK);
    STATUS(gotry_lease_release(lease, &err), GOTRY_STATUS_OK);
    FENCED(gotry_lease_assert_held(lease, &err), GOTRY_FENCE_REASON_LEASE_RELEASED, "t", 1);
    gotry_lease_free(lease);
    GotryKeeperOptions options;
    STATUS(gotry_keeper_options_default(&options), GOTRY_STATUS_OK);
    options.without_thread = true;
    GotryKeeper *keeper = NULL;
    STATUS(gotry_keeper_start(store, S("r"), 10000, 1000, &options, NULL, NULL, NULL, &keeper, &err),
           GOTRY_STATUS_OK);
    STATUS(gotry_keeper_acquire(keeper, S("kk"), &lease, &err), GOTRY_STATUS_OK);
    GotryShutdownReport *shutdown = NULL;
    STATUS(gotry_keeper_shutdown(keeper, 5000, &shutdown), GOTRY_STATUS_OK);
    static const char *const released[1] = {"kk"};
    CHECK_SHUTDOWN(shutdown, released, 1, GOTRY_SHUTDOWN_OUTCOME_RELEASED, GOTRY_STATUS_OK);
    gotry_keeper_free(keeper);
    gotry_lease_free(lease);

    STATUS(gotry_store_close(store, &err), GOTRY_STATUS_OK);
    FAILS(gotry_store_read(store, S("k"), &record, &err), GOTRY_STATUS_LEASE_STORE_UNAVAILABLE,
          "GOTRY_TENANT_LEASE_STORE_UNAVAILABLE");
    gotry_store_free(store);
    store = NULL;
    /* An unknown option, and nothing listening, in the server's own scheme. */
    const char *bogus = postgres ? "postgres://postgres@127.0.0.1:5432/test?bogus=1"
                                 : "mysql://root@127.0.0.1:3306/test?bogus=1";
    const char *nobody = postgres ? "postgres://postgres@127.0.0.1:1/test?timeout_ms=200"
                                  : "mysql://root@127.0.0.1:1/test?timeout_ms=200";
    FAILS_RANGE(gotry_store_open_url(bogus, strlen(bogus), &store, &err));
    FAILS(gotry_store_open_url(nobody, strlen(nobody), &store, &err), GOTRY_STATUS_LEASE_STORE_UNAVAILABLE,
          "GOTRY_TENANT_LEASE_STORE_UNAVAILABLE");
    CHECK(store == NULL);
}

int main(int argc, char **argv) {
    if (argc != 2 && argc != 3) {
        fprintf(stderr, "usage: %s SCRATCH_DIR [MYSQL_OR_POSTGRES_URL]\n", argv[0]);
        return 2;
    }
    if (argc == 3) {
        test_server(argv[2]);
        printf("store_test (%s, %s): %d checks, %d failed\n", LANGUAGE,
               strncmp(argv[2], "postgres", 8) == 0 ? "PostgreSQL" : "MySQL", checks, failures);
        return failures == 0 ? 0 : 1;
    }
    test_store(argv[1]);
    test_renew_batch(argv[1]);
    printf("store_test (%s): %d checks, %d failed\n", LANGUAGE, checks, failures);
    return failures == 0 ? 0 : 1;
}
