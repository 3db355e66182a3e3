/*
 * Holders of a lease and the keeper of gotry_tenant_state.h, and their failure paths, from
 * C: the manual clock; a holder's write gate (its fence, renewal, expiry, release, loss, a
 * store closed under it, the system clocks); a keeper ticked on a manual clock (batched
 * renewals, fenced-then-resumed and lost leases and its events, a store gone, shutdown with
 * its report) and one on its own thread; a store and a lease shared by several threads.
 *
 * One of the suites of the C API by area, with ids_test.c and store_test.c; like them it
 * compiles as C11 and as C++17, and run.sh runs both under valgrind. The C++ build adds a
 * section that holds every handle in a std::unique_ptr with its _free function.
 *
 * Usage: lease_test SCRATCH_DIR   (an existing, empty, writable directory)
 * Link with -pthread.
 */
#define _POSIX_C_SOURCE 200809L

/* Every failure's error is proven whole: status, code and a message (see test_common.h). */
#define CHECK_WHOLE_ERRORS
#include "test_common.h"

#include <pthread.h>

#ifdef __cplusplus
#include <memory>
#include <string>
#endif

static void test_manual_clock(void) {
    GotryError *err = NULL;
    GotryManualClock *clock = NULL;
    int64_t now = 0;
    STATUS(gotry_manual_clock_new(1000, &clock), GOTRY_STATUS_OK);
    STATUS(gotry_manual_clock_get(clock, &now), GOTRY_STATUS_OK);
    CHECK(now == 1000);
    STATUS(gotry_manual_clock_advance(clock, 250, &now, &err), GOTRY_STATUS_OK);
    CHECK(now == 1250);
    STATUS(gotry_manual_clock_advance(clock, -1250, &now, NULL), GOTRY_STATUS_OK);
    CHECK(now == 0);
    STATUS(gotry_manual_clock_set(clock, 5), GOTRY_STATUS_OK);
    STATUS(gotry_manual_clock_get(clock, &now), GOTRY_STATUS_OK);
    CHECK(now == 5);
    /* Overflow is refused and leaves both the clock and the out-parameter alone. */
    now = -7;
    FAILS_RANGE(gotry_manual_clock_advance(clock, INT64_MAX, &now, &err));
    CHECK(now == -7);
    STATUS(gotry_manual_clock_get(clock, &now), GOTRY_STATUS_OK);
    CHECK(now == 5);
    STATUS(gotry_manual_clock_new(0, NULL), GOTRY_STATUS_NULL_ARGUMENT);
    STATUS(gotry_manual_clock_set(NULL, 1), GOTRY_STATUS_NULL_ARGUMENT);
    STATUS(gotry_manual_clock_get(NULL, &now), GOTRY_STATUS_NULL_ARGUMENT);
    STATUS(gotry_manual_clock_get(clock, NULL), GOTRY_STATUS_NULL_ARGUMENT);
    FAILS_NULL(gotry_manual_clock_advance(NULL, 1, &now, &err));
    FAILS_NULL(gotry_manual_clock_advance(clock, 1, NULL, &err));
    gotry_manual_clock_free(clock);
    gotry_manual_clock_free(NULL);
}

/* What a keeper told its callback. */
#define MAX_EVENTS 32
typedef struct Recorder {
    int count;
    GotryKeeperEventKind kinds[MAX_EVENTS];
    char keys[MAX_EVENTS][16];
    int64_t epochs[MAX_EVENTS];
    GotryStatus errors[MAX_EVENTS]; /* the lent error's status; OK when there is none */
    size_t leases[MAX_EVENTS];
    GotryKeeper *keeper;     /* set: the callback tries to tick it, which must be refused */
    GotryStatus tick_inside; /* what that try returned */
} Recorder;

static void record_event(void *user_data, const GotryKeeperEvent *event) {
    Recorder *recorder = (Recorder *)user_data;
    if (recorder->count >= MAX_EVENTS) return;
    int i = recorder->count++;
    recorder->kinds[i] = event->kind;
    snprintf(recorder->keys[i], sizeof recorder->keys[i], "%.*s", (int)event->key_len,
             event->key ? event->key : "");
    recorder->epochs[i] = event->epoch;
    recorder->errors[i] = event->error ? gotry_error_status(event->error) : GOTRY_STATUS_OK;
    recorder->leases[i] = event->leases;
    if (recorder->keeper != NULL) {
        GotryTickReport report;
        recorder->tick_inside = gotry_keeper_tick(recorder->keeper, &report, NULL);
        recorder->keeper = NULL;
    }
}

/* How many recorded events, from `from` on, are of `kind` (and about `key`, when given). */
static int events_of(const Recorder *recorder, int from, GotryKeeperEventKind kind, const char *key) {
    int n = 0;
    for (int i = from; i < recorder->count; i++)
        if (recorder->kinds[i] == kind && (key == NULL || strcmp(recorder->keys[i], key) == 0)) n++;
    return n;
}

static void test_keeper(const char *dir) {
    GotryError *err = NULL;
    GotryManualClock *clock = NULL;
    GotryStore *store = NULL;
    GotryKeeper *keeper = NULL;
    GotryLease *a = NULL;
    GotryLease *b = NULL;
    GotryLease *handle = NULL;
    GotryTickReport report;
    Recorder recorder;
    memset(&recorder, 0, sizeof recorder);
    char path[1024];
    snprintf(path, sizeof path, "%s/keeper.db", dir);
    STATUS(gotry_manual_clock_new(0, &clock), GOTRY_STATUS_OK);
    STATUS(gotry_store_open(path, strlen(path), clock, &store, &err), GOTRY_STATUS_OK);

    GotryKeeperOptions options;
    STATUS(gotry_keeper_options_default(&options), GOTRY_STATUS_OK);
    CHECK(options.renew_fraction > 0.333 && options.renew_fraction < 0.334 && options.max_batch == 1000 &&
          !options.without_thread);
    STATUS(gotry_keeper_options_default(NULL), GOTRY_STATUS_NULL_ARGUMENT);
    /* Refused settings: renewing after the fence, empty batches, TTL and margin out of range. */
    options.renew_fraction = 0.95;
    FAILS_RANGE(gotry_keeper_start(store, S("replica-k"), 3000, 300, &options, clock, record_event, &recorder,
                                   &keeper, &err));
    options.renew_fraction = 1.0 / 3.0;
    options.max_batch = 0;
    FAILS_RANGE(gotry_keeper_start(store, S("replica-k"), 3000, 300, &options, clock, NULL, NULL, &keeper, &err));
    options.max_batch = 1000;
    options.without_thread = true;
    FAILS_RANGE(gotry_keeper_start(store, S("replica-k"), 50, 0, &options, clock, NULL, NULL, &keeper, &err));
    FAILS_RANGE(gotry_keeper_start(store, S("replica-k"), 3000, 3000, &options, clock, NULL, NULL, &keeper, &err));
    FAILS_RANGE(gotry_keeper_start(store, S(""), 3000, 300, &options, clock, NULL, NULL, &keeper, &err));
    FAILS_RANGE(gotry_keeper_start(store, S("r\xff"), 3000, 300, &options, clock, NULL, NULL, &keeper, &err));
    FAILS_NULL(gotry_keeper_start(NULL, S("replica-k"), 3000, 300, &options, clock, NULL, NULL, &keeper, &err));
    FAILS_NULL(gotry_keeper_start(store, NULL, 1, 3000, 300, &options, clock, NULL, NULL, &keeper, &err));
    FAILS_NULL(gotry_keeper_start(store, S("replica-k"), 3000, 300, &options, clock, NULL, NULL, NULL, &err));
    CHECK(keeper == NULL);

    /* ttl 3000, margin 300, a renewal every 1000 ms, rounds only when ticked. */
    STATUS(gotry_keeper_start(store, S("replica-k"), 3000, 300, &options, clock, record_event, &recorder, &keeper,
                              &err),
           GOTRY_STATUS_OK);
    STATUS(gotry_keeper_acquire(keeper, S("ka"), &a, &err), GOTRY_STATUS_OK);
    STATUS(gotry_keeper_acquire(keeper, S("kb"), &b, &err), GOTRY_STATUS_OK);
    FAILS(gotry_keeper_acquire(keeper, S("ka"), &handle, &err), GOTRY_STATUS_LEASE_HELD, "GOTRY_TENANT_LEASE_HELD");
    FAILS_RANGE(gotry_keeper_acquire(keeper, S("k\xff"), &handle, &err));
    size_t count = 0;
    STATUS(gotry_keeper_len(keeper, &count), GOTRY_STATUS_OK);
    CHECK(count == 2);
    STATUS(gotry_keeper_get(keeper, S("ka"), &handle, &err), GOTRY_STATUS_OK);
    int64_t epoch = 0;
    CHECK(handle != NULL && gotry_lease_epoch(handle, &epoch) == GOTRY_STATUS_OK && epoch == 1);
    gotry_lease_free(handle); /* a handle's free does not stop the keeping */
    STATUS(gotry_keeper_get(keeper, S("nope"), &handle, &err), GOTRY_STATUS_OK);
    CHECK(handle == NULL);

    /* Nothing due yet. */
    STATUS(gotry_keeper_tick(keeper, &report, &err), GOTRY_STATUS_OK);
    CHECK(report.batches == 0 && report.renewed == 0 && report.has_next_due && report.next_due_ms == 1000.0);
    /* Both due: one batch renews both, and their fences move. */
    STATUS(gotry_manual_clock_set(clock, 1000), GOTRY_STATUS_OK);
    STATUS(gotry_keeper_tick(keeper, &report, &err), GOTRY_STATUS_OK);
    CHECK(report.batches == 1 && report.renewed == 2 && report.lost == 0 && report.failed == 0);
    CHECK(report.has_next_due && report.next_due_ms == 2000.0);
    double remaining = 0;
    STATUS(gotry_lease_remaining_ms(a, &remaining, &err), GOTRY_STATUS_OK);
    CHECK(remaining == 2700.0);
    CHECK(recorder.count == 0);

    /* Past the fences (3700) but before the store's expiry (4000): fenced locally, then the
     * batch resumes both; the callback's own tick is refused. */
    STATUS(gotry_manual_clock_set(clock, 3750), GOTRY_STATUS_OK);
    recorder.keeper = keeper;
    STATUS(gotry_keeper_tick(keeper, &report, &err), GOTRY_STATUS_OK);
    CHECK(report.renewed == 2);
    CHECK(recorder.count == 4 && events_of(&recorder, 0, GOTRY_KEEPER_EVENT_KIND_FENCED_LOCALLY, NULL) == 2 &&
          events_of(&recorder, 0, GOTRY_KEEPER_EVENT_KIND_RESUMED, NULL) == 2);
    CHECK(recorder.kinds[0] == GOTRY_KEEPER_EVENT_KIND_FENCED_LOCALLY &&
          recorder.kinds[3] == GOTRY_KEEPER_EVENT_KIND_RESUMED);
    CHECK(events_of(&recorder, 0, GOTRY_KEEPER_EVENT_KIND_RESUMED, "ka") == 1 && recorder.epochs[3] == 1 &&
          recorder.errors[3] == GOTRY_STATUS_OK && recorder.leases[3] == 0);
    CHECK(recorder.tick_inside == GOTRY_STATUS_INVALID_ARGUMENT);
    STATUS(gotry_lease_assert_held(a, &err), GOTRY_STATUS_OK);

    /* Both run out in the store (6750); another replica takes kb: both are lost. */
    STATUS(gotry_manual_clock_set(clock, 6800), GOTRY_STATUS_OK);
    GotryRecord *record = NULL;
    int64_t ttl = 0;
    STATUS(gotry_store_acquire(store, S("kb"), S("intruder"), 3000, &record, &ttl, &err), GOTRY_STATUS_OK);
    gotry_record_free(record);
    int before = recorder.count;
    STATUS(gotry_keeper_tick(keeper, &report, &err), GOTRY_STATUS_OK);
    CHECK(report.lost == 2 && report.renewed == 0);
    CHECK(events_of(&recorder, before, GOTRY_KEEPER_EVENT_KIND_LOST, "ka") == 1 &&
          events_of(&recorder, before, GOTRY_KEEPER_EVENT_KIND_LOST, "kb") == 1);
    for (int i = before; i < recorder.count; i++)
        if (recorder.kinds[i] == GOTRY_KEEPER_EVENT_KIND_LOST)
            CHECK(recorder.errors[i] == GOTRY_STATUS_LEASE_LOST && recorder.epochs[i] == 1);
    STATUS(gotry_keeper_len(keeper, &count), GOTRY_STATUS_OK);
    CHECK(count == 0);
    FENCED(gotry_lease_assert_held(a, &err), GOTRY_FENCE_REASON_LEASE_LOST, "ka", 1);
    gotry_lease_free(a);
    gotry_lease_free(b);

    /* Removed: released, and no longer kept. */
    STATUS(gotry_keeper_acquire(keeper, S("kc"), &a, &err), GOTRY_STATUS_OK);
    bool removed = false;
    STATUS(gotry_keeper_remove(keeper, S("kc"), &removed, &err), GOTRY_STATUS_OK);
    CHECK(removed);
    STATUS(gotry_keeper_remove(keeper, S("kc"), &removed, &err), GOTRY_STATUS_OK);
    CHECK(!removed);
    FENCED(gotry_lease_assert_held(a, &err), GOTRY_FENCE_REASON_LEASE_RELEASED, "kc", 1);
    gotry_lease_free(a);

    /* The store goes away: the round fails as a whole, and says so. */
    STATUS(gotry_keeper_acquire(keeper, S("kd"), &a, &err), GOTRY_STATUS_OK);
    STATUS(gotry_keeper_acquire(keeper, S("ke"), &b, &err), GOTRY_STATUS_OK);
    STATUS(gotry_manual_clock_set(clock, 7800), GOTRY_STATUS_OK);
    STATUS(gotry_store_close(store, &err), GOTRY_STATUS_OK);
    before = recorder.count;
    STATUS(gotry_keeper_tick(keeper, &report, &err), GOTRY_STATUS_OK);
    CHECK(report.batches == 1 && report.failed == 2 && report.renewed == 0);
    CHECK(recorder.count == before + 1 && recorder.kinds[before] == GOTRY_KEEPER_EVENT_KIND_RENEW_FAILED &&
          recorder.leases[before] == 2 && recorder.errors[before] == GOTRY_STATUS_LEASE_STORE_UNAVAILABLE &&
          recorder.keys[before][0] == '\0');
    /* Shutdown cannot tell the store: the gates close and the leases run out. */
    GotryShutdownReport *shutdown = NULL;
    STATUS(gotry_keeper_shutdown(keeper, 1000, &shutdown), GOTRY_STATUS_OK);
    static const char *const failed_keys[2] = {"kd", "ke"};
    CHECK_SHUTDOWN(shutdown, failed_keys, 2, GOTRY_SHUTDOWN_OUTCOME_FAILED, GOTRY_STATUS_LEASE_STORE_UNAVAILABLE);
    FENCED(gotry_lease_assert_held(a, &err), GOTRY_FENCE_REASON_LEASE_RELEASED, "kd", 1);
    /* Shut down: the handle answers, nothing more is kept, the callback is silent. */
    before = recorder.count;
    FAILS(gotry_keeper_tick(keeper, &report, &err), GOTRY_STATUS_LEASE_STORE_UNAVAILABLE,
          "GOTRY_TENANT_LEASE_STORE_UNAVAILABLE");
    FAILS(gotry_keeper_acquire(keeper, S("kf"), &handle, &err), GOTRY_STATUS_LEASE_STORE_UNAVAILABLE,
          "GOTRY_TENANT_LEASE_STORE_UNAVAILABLE");
    STATUS(gotry_keeper_shutdown(keeper, 1000, &shutdown), GOTRY_STATUS_OK);
    CHECK_SHUTDOWN(shutdown, NULL, 0, GOTRY_SHUTDOWN_OUTCOME_RELEASED, GOTRY_STATUS_OK);
    gotry_keeper_free(keeper);
    CHECK(recorder.count == before);
    gotry_lease_free(a);
    gotry_lease_free(b);
    gotry_store_free(store);

    /* A deadline already passed: nothing is released; a deadline ahead: everything is. */
    STATUS(gotry_store_open(path, strlen(path), clock, &store, &err), GOTRY_STATUS_OK);
    STATUS(gotry_keeper_start(store, S("replica-k"), 3000, 300, &options, clock, NULL, NULL, &keeper, &err),
           GOTRY_STATUS_OK);
    STATUS(gotry_keeper_acquire(keeper, S("kf"), &a, &err), GOTRY_STATUS_OK);
    STATUS(gotry_keeper_shutdown(keeper, 0, &shutdown), GOTRY_STATUS_OK);
    static const char *const timed_out_keys[1] = {"kf"};
    CHECK_SHUTDOWN(shutdown, timed_out_keys, 1, GOTRY_SHUTDOWN_OUTCOME_TIMED_OUT, GOTRY_STATUS_OK);
    STATUS(gotry_lease_assert_held(a, &err), GOTRY_STATUS_OK); /* not released: runs out */
    gotry_lease_free(a);
    gotry_keeper_free(keeper);
    STATUS(gotry_keeper_start(store, S("replica-k"), 3000, 300, &options, clock, NULL, NULL, &keeper, &err),
           GOTRY_STATUS_OK);
    STATUS(gotry_keeper_acquire(keeper, S("kh"), &a, &err), GOTRY_STATUS_OK);
    STATUS(gotry_keeper_acquire(keeper, S("kg"), &b, &err), GOTRY_STATUS_OK);
    STATUS(gotry_keeper_shutdown(keeper, 1000, &shutdown), GOTRY_STATUS_OK);
    static const char *const released_keys[2] = {"kg", "kh"};
    CHECK_SHUTDOWN(shutdown, released_keys, 2, GOTRY_SHUTDOWN_OUTCOME_RELEASED, GOTRY_STATUS_OK);
    FENCED(gotry_lease_assert_held(b, &err), GOTRY_FENCE_REASON_LEASE_RELEASED, "kg", 1);
    gotry_lease_free(a);
    gotry_lease_free(b);

    /* NULL anywhere a pointer is required. */
    bool flag = false;
    FAILS_NULL(gotry_keeper_acquire(NULL, S("k"), &a, &err));
    FAILS_NULL(gotry_keeper_acquire(keeper, NULL, 1, &a, &err));
    FAILS_NULL(gotry_keeper_acquire(keeper, S("k"), NULL, &err));
    FAILS_NULL(gotry_keeper_get(NULL, S("k"), &a, &err));
    FAILS_NULL(gotry_keeper_get(keeper, S("k"), NULL, &err));
    FAILS_NULL(gotry_keeper_remove(NULL, S("k"), &flag, &err));
    FAILS_NULL(gotry_keeper_remove(keeper, S("k"), NULL, &err));
    FAILS_NULL(gotry_keeper_tick(NULL, &report, &err));
    FAILS_NULL(gotry_keeper_tick(keeper, NULL, &err));
    STATUS(gotry_keeper_len(NULL, &count), GOTRY_STATUS_NULL_ARGUMENT);
    STATUS(gotry_keeper_len(keeper, NULL), GOTRY_STATUS_NULL_ARGUMENT);
    STATUS(gotry_keeper_shutdown(NULL, 0, &shutdown), GOTRY_STATUS_NULL_ARGUMENT);
    STATUS(gotry_keeper_shutdown(keeper, 0, NULL), GOTRY_STATUS_NULL_ARGUMENT);
    STATUS(gotry_shutdown_report_len(NULL, &count), GOTRY_STATUS_NULL_ARGUMENT);
    GotryShutdownEntry entry;
    STATUS(gotry_shutdown_report_get(NULL, 0, &entry), GOTRY_STATUS_NULL_ARGUMENT);
    gotry_keeper_free(keeper);
    gotry_keeper_free(NULL);
    gotry_shutdown_report_free(NULL);
    gotry_store_free(store);

    CHECK(strcmp(gotry_keeper_event_kind_name(GOTRY_KEEPER_EVENT_KIND_LOST), "lost") == 0);
    CHECK(strcmp(gotry_keeper_event_kind_name(GOTRY_KEEPER_EVENT_KIND_FENCED_LOCALLY), "fenced_locally") == 0);
    CHECK(strcmp(gotry_keeper_event_kind_name(GOTRY_KEEPER_EVENT_KIND_RESUMED), "resumed") == 0);
    CHECK(strcmp(gotry_keeper_event_kind_name(GOTRY_KEEPER_EVENT_KIND_RENEW_FAILED), "renew_failed") == 0);
    CHECK(gotry_keeper_event_kind_name(0) == NULL && gotry_keeper_event_kind_name(5) == NULL);
    gotry_manual_clock_free(clock);
}

/* A keeper on its own thread and the system clocks renews without being asked. */
static void test_keeper_thread(const char *dir) {
    GotryStore *store = NULL;
    GotryKeeper *keeper = NULL;
    GotryLease *lease = NULL;
    char path[1024];
    snprintf(path, sizeof path, "%s/keeper-thread.db", dir);
    STATUS(gotry_store_open(path, strlen(path), NULL, &store, NULL), GOTRY_STATUS_OK);
    /* A renewal every 100 ms; NULL options are the defaults (with a thread). */
    STATUS(gotry_keeper_start(store, S("replica-t"), 300, 50, NULL, NULL, NULL, NULL, &keeper, NULL),
           GOTRY_STATUS_OK);
    STATUS(gotry_keeper_acquire(keeper, S("kt"), &lease, NULL), GOTRY_STATUS_OK);
    /* Wait for three renewals in the log; the cap only keeps a broken keeper from hanging
     * the run, it is not what the test measures. */
    size_t renewals = 0;
    for (int waited_ms = 0; renewals < 3 && waited_ms < 60000; waited_ms += 20) {
        struct timespec pause = {0, 20 * 1000000L};
        nanosleep(&pause, NULL);
        GotryHistory *history = NULL;
        size_t len = 0;
        renewals = 0;
        if (gotry_store_history(store, S("kt"), &history, NULL) == GOTRY_STATUS_OK &&
            gotry_history_len(history, &len) == GOTRY_STATUS_OK) {
            for (size_t i = 0; i < len; i++) {
                GotryHistoryEntry entry;
                if (gotry_history_get(history, i, &entry) == GOTRY_STATUS_OK && entry.op == GOTRY_LEASE_OP_RENEW)
                    renewals++;
            }
        }
        gotry_history_free(history);
    }
    CHECK(renewals >= 3);
    GotryShutdownReport *report = NULL;
    STATUS(gotry_keeper_shutdown(keeper, 5000, &report), GOTRY_STATUS_OK);
    static const char *const released[1] = {"kt"};
    CHECK_SHUTDOWN(report, released, 1, GOTRY_SHUTDOWN_OUTCOME_RELEASED, GOTRY_STATUS_OK);
    gotry_keeper_free(keeper);
    gotry_lease_free(lease);
    gotry_store_free(store);
}

static void test_lease(const char *dir) {
    GotryError *err = NULL;
    GotryManualClock *clock = NULL;
    GotryStore *store = NULL;
    GotryLease *lease = NULL;
    GotryLease *other = NULL;
    GotryRecord *record = NULL;
    char path[1024];
    snprintf(path, sizeof path, "%s/tenant-leases.db", dir);
    STATUS(gotry_manual_clock_new(50000, &clock), GOTRY_STATUS_OK);
    /* One manual clock serves as the store's wall clock and the holders' monotonic clock. */
    STATUS(gotry_store_open(path, strlen(path), clock, &store, &err), GOTRY_STATUS_OK);

    STATUS(gotry_lease_acquire(store, S("acme/t-1"), S("replica-a"), 1000, 100, clock, &lease, &err),
           GOTRY_STATUS_OK);
    int64_t epoch = 0;
    int64_t floor = -1;
    double remaining = 0;
    bool held = false;
    const char *text = NULL;
    size_t text_len = 0;
    STATUS(gotry_lease_epoch(lease, &epoch), GOTRY_STATUS_OK);
    CHECK(epoch == 1);
    STATUS(gotry_lease_forgotten_at_epoch(lease, &floor), GOTRY_STATUS_OK);
    CHECK(floor == 0);
    STATUS(gotry_lease_key(lease, &text, &text_len), GOTRY_STATUS_OK);
    CHECK(LENT_IS(text, text_len, "acme/t-1"));
    STATUS(gotry_lease_replica_id(lease, &text, &text_len), GOTRY_STATUS_OK);
    CHECK(LENT_IS(text, text_len, "replica-a"));
    STATUS(gotry_lease_remaining_ms(lease, &remaining, &err), GOTRY_STATUS_OK);
    CHECK(remaining == 900.0);
    STATUS(gotry_lease_is_held(lease, &held), GOTRY_STATUS_OK);
    CHECK(held);
    STATUS(gotry_lease_assert_held(lease, &err), GOTRY_STATUS_OK);
    CHECK(err == NULL);

    /* A second holder is refused with the first one's record. */
    STATUS(gotry_lease_acquire(store, S("acme/t-1"), S("replica-b"), 1000, 100, clock, &other, &err),
           GOTRY_STATUS_LEASE_HELD);
    GotryRecordView view;
    STATUS(gotry_error_record(err, &view), GOTRY_STATUS_OK);
    CHECK(LENT_IS(view.owner, view.owner_len, "replica-a") && view.epoch == 1 && view.lease_until_ms == 51000);
    ERROR_IS(GOTRY_STATUS_LEASE_HELD, "GOTRY_TENANT_LEASE_HELD");
    CHECK(other == NULL);
    FAILS_RANGE(gotry_lease_acquire(store, S("acme/t-2"), S("r"), 1000, 1000, clock, &other, &err));
    FAILS_RANGE(gotry_lease_acquire(store, S("acme/t-2"), S("r"), 1000, -1, clock, &other, &err));
    FAILS_RANGE(gotry_lease_acquire(store, S("acme/t-2"), S("r"), 50, 0, clock, &other, &err));
    FAILS_RANGE(gotry_lease_acquire(store, S("acme/t-2"), S("r\xff"), 1000, 0, clock, &other, &err));
    FAILS_RANGE(gotry_lease_acquire(store, S(""), S("r"), 1000, 0, clock, &other, &err));
    FAILS_NULL(gotry_lease_acquire(NULL, S("acme/t-2"), S("r"), 1000, 0, clock, &other, &err));
    FAILS_NULL(gotry_lease_acquire(store, NULL, 8, S("r"), 1000, 0, clock, &other, &err));
    FAILS_NULL(gotry_lease_acquire(store, S("acme/t-2"), NULL, 1, 1000, 0, clock, &other, &err));
    FAILS_NULL(gotry_lease_acquire(store, S("acme/t-2"), S("r"), 1000, 0, clock, NULL, &err));

    /* Renewal moves the fence to (time sent + ttl - margin). */
    STATUS(gotry_manual_clock_advance(clock, 850, NULL, NULL), GOTRY_STATUS_NULL_ARGUMENT);
    STATUS(gotry_manual_clock_set(clock, 50850), GOTRY_STATUS_OK);
    STATUS(gotry_lease_remaining_ms(lease, &remaining, NULL), GOTRY_STATUS_OK);
    CHECK(remaining == 50.0);
    STATUS(gotry_lease_renew(lease, &err), GOTRY_STATUS_OK);
    STATUS(gotry_lease_remaining_ms(lease, &remaining, NULL), GOTRY_STATUS_OK);
    CHECK(remaining == 900.0);

    /* The local fence passes before the store's expiry: the gate closes... */
    STATUS(gotry_manual_clock_set(clock, 51750), GOTRY_STATUS_OK);
    FENCED(gotry_lease_assert_held(lease, &err), GOTRY_FENCE_REASON_LEASE_EXPIRED_LOCALLY, "acme/t-1", 1);
    STATUS(gotry_lease_is_held(lease, &held), GOTRY_STATUS_OK);
    CHECK(!held);
    STATUS(gotry_lease_remaining_ms(lease, &remaining, NULL), GOTRY_STATUS_OK);
    CHECK(remaining == 0.0);
    FENCED(gotry_lease_mark_forgotten(lease, &record, &err), GOTRY_FENCE_REASON_LEASE_EXPIRED_LOCALLY, "acme/t-1", 1);
    /* ...and a renewal the store still grants (same epoch: nobody held it between) resumes it. */
    STATUS(gotry_lease_renew(lease, &err), GOTRY_STATUS_OK);
    STATUS(gotry_lease_assert_held(lease, &err), GOTRY_STATUS_OK);
    STATUS(gotry_lease_mark_forgotten(lease, &record, &err), GOTRY_STATUS_OK);
    CHECK(record_view_of(record).forgotten_at_epoch == 1 && record_view_of(record).epoch == 1);
    gotry_record_free(record);

    /* Release: the gate closes first, the store lets the next holder in at once. */
    STATUS(gotry_lease_release(lease, &err), GOTRY_STATUS_OK);
    FENCED(gotry_lease_assert_held(lease, &err), GOTRY_FENCE_REASON_LEASE_RELEASED, "acme/t-1", 1);
    FENCED(gotry_lease_renew(lease, &err), GOTRY_FENCE_REASON_LEASE_RELEASED, "acme/t-1", 1);
    STATUS(gotry_lease_release(lease, &err), GOTRY_STATUS_OK);
    STATUS(gotry_lease_acquire(store, S("acme/t-1"), S("replica-b"), 1000, 100, clock, &other, &err),
           GOTRY_STATUS_OK);
    STATUS(gotry_lease_epoch(other, &epoch), GOTRY_STATUS_OK);
    CHECK(epoch == 2);
    STATUS(gotry_lease_forgotten_at_epoch(other, &floor), GOTRY_STATUS_OK);
    CHECK(floor == 1);
    gotry_lease_free(lease);
    lease = other;
    other = NULL;

    /* Lost: the store's lease runs out and someone else takes the tenant. */
    int64_t now = 0;
    STATUS(gotry_manual_clock_advance(clock, 1000, &now, &err), GOTRY_STATUS_OK);
    CHECK(now == 52750);
    STATUS(gotry_lease_acquire(store, S("acme/t-1"), S("replica-c"), 1000, 100, clock, &other, &err),
           GOTRY_STATUS_OK);
    FAILS(gotry_lease_renew(lease, &err), GOTRY_STATUS_LEASE_LOST, "GOTRY_TENANT_LEASE_LOST");
    FENCED(gotry_lease_assert_held(lease, &err), GOTRY_FENCE_REASON_LEASE_LOST, "acme/t-1", 2);
    FENCED(gotry_lease_renew(lease, &err), GOTRY_FENCE_REASON_LEASE_LOST, "acme/t-1", 2);
    STATUS(gotry_lease_release(lease, &err), GOTRY_STATUS_OK); /* after a loss: nothing to do */
    gotry_lease_free(lease);
    lease = other;
    other = NULL;

    /* The lease keeps the connection after the store handle is freed... */
    gotry_store_free(store);
    STATUS(gotry_lease_renew(lease, &err), GOTRY_STATUS_OK);
    /* ...and the tenure ends with the store unreachable: release reports it, the gate is closed. */
    GotryStore *second = NULL;
    STATUS(gotry_store_open(path, strlen(path), clock, &second, &err), GOTRY_STATUS_OK);
    STATUS(gotry_lease_acquire(second, S("acme/t-9"), S("replica-a"), 1000, 0, clock, &other, &err),
           GOTRY_STATUS_OK);
    STATUS(gotry_store_close(second, &err), GOTRY_STATUS_OK);
    FAILS(gotry_lease_renew(other, &err), GOTRY_STATUS_LEASE_STORE_UNAVAILABLE,
          "GOTRY_TENANT_LEASE_STORE_UNAVAILABLE");
    STATUS(gotry_lease_assert_held(other, &err), GOTRY_STATUS_OK); /* the fence still stands */
    FAILS(gotry_lease_release(other, &err), GOTRY_STATUS_LEASE_STORE_UNAVAILABLE,
          "GOTRY_TENANT_LEASE_STORE_UNAVAILABLE");
    FENCED(gotry_lease_assert_held(other, &err), GOTRY_FENCE_REASON_LEASE_RELEASED, "acme/t-9", 1);
    gotry_lease_free(other);
    gotry_store_free(second);
    STATUS(gotry_lease_release(lease, &err), GOTRY_STATUS_OK);
    gotry_lease_free(lease);

    /* System clocks by default (NULL clock for both). */
    GotryStore *system_store = NULL;
    STATUS(gotry_store_open(path, strlen(path), NULL, &system_store, &err), GOTRY_STATUS_OK);
    STATUS(gotry_lease_acquire(system_store, S("acme/t-sys"), S("replica-a"), 60000, 1000, NULL, &lease, &err),
           GOTRY_STATUS_OK);
    STATUS(gotry_lease_remaining_ms(lease, &remaining, &err), GOTRY_STATUS_OK);
    CHECK(remaining > 0.0 && remaining <= 59000.0);
    STATUS(gotry_lease_assert_held(lease, &err), GOTRY_STATUS_OK);
    STATUS(gotry_lease_renew(lease, &err), GOTRY_STATUS_OK);
    STATUS(gotry_lease_release(lease, &err), GOTRY_STATUS_OK);
    gotry_lease_free(lease);
    gotry_store_free(system_store);

    /* NULL receivers and out-parameters. */
    FAILS_NULL(gotry_lease_assert_held(NULL, &err));
    FAILS_NULL(gotry_lease_renew(NULL, &err));
    FAILS_NULL(gotry_lease_release(NULL, &err));
    FAILS_NULL(gotry_lease_mark_forgotten(NULL, &record, &err));
    FAILS_NULL(gotry_lease_remaining_ms(NULL, &remaining, &err));
    STATUS(gotry_lease_is_held(NULL, &held), GOTRY_STATUS_NULL_ARGUMENT);
    STATUS(gotry_lease_epoch(NULL, &epoch), GOTRY_STATUS_NULL_ARGUMENT);
    STATUS(gotry_lease_forgotten_at_epoch(NULL, &floor), GOTRY_STATUS_NULL_ARGUMENT);
    STATUS(gotry_lease_key(NULL, &text, &text_len), GOTRY_STATUS_NULL_ARGUMENT);
    STATUS(gotry_lease_replica_id(NULL, &text, &text_len), GOTRY_STATUS_NULL_ARGUMENT);
    gotry_lease_free(NULL);
    gotry_manual_clock_free(clock);
}

/* One of several threads sharing a store and a lease, as the header says they may. */
typedef struct Worker {
    GotryStore *store;
    GotryLease *lease;
    int index;
    int failures; /* counted here: the global counters are not shared between threads */
} Worker;

#define WORKERS 4
#define ROUNDS 10

static void *work(void *arg) {
    Worker *worker = (Worker *)arg;
    char key[32];
    snprintf(key, sizeof key, "thread-%d", worker->index);
    for (int round = 1; round <= ROUNDS; round++) {
        GotryRecord *record = NULL;
        GotryRecordView view;
        int64_t ttl = 0;
        worker->failures += gotry_lease_assert_held(worker->lease, NULL) != GOTRY_STATUS_OK;
        worker->failures += gotry_lease_renew(worker->lease, NULL) != GOTRY_STATUS_OK;
        worker->failures += gotry_store_acquire(worker->store, key, strlen(key), S("worker"), 60000, &record, &ttl,
                                                NULL) != GOTRY_STATUS_OK;
        worker->failures += gotry_record_view(record, &view) != GOTRY_STATUS_OK || view.epoch != round;
        gotry_record_free(record);
        record = NULL;
        worker->failures += gotry_store_release(worker->store, key, strlen(key), S("worker"), round, &record,
                                                NULL) != GOTRY_STATUS_OK;
        gotry_record_free(record);
    }
    return NULL;
}

static void test_threads(const char *dir) {
    GotryStore *store = NULL;
    GotryLease *lease = NULL;
    char path[1024];
    snprintf(path, sizeof path, "%s/threads.db", dir);
    STATUS(gotry_store_open(path, strlen(path), NULL, &store, NULL), GOTRY_STATUS_OK);
    STATUS(gotry_lease_acquire(store, S("acme/t-shared"), S("replica-a"), 60000, 1000, NULL, &lease, NULL),
           GOTRY_STATUS_OK);
    Worker workers[WORKERS];
    pthread_t threads[WORKERS];
    for (int i = 0; i < WORKERS; i++) {
        workers[i].store = store;
        workers[i].lease = lease;
        workers[i].index = i;
        workers[i].failures = 0;
        CHECK(pthread_create(&threads[i], NULL, work, &workers[i]) == 0);
    }
    for (int i = 0; i < WORKERS; i++) {
        CHECK(pthread_join(threads[i], NULL) == 0);
        CHECK(workers[i].failures == 0);
    }
    /* Every grant of every thread is in the log: one acquire and the renewals of the lease,
     * an acquire and a release per round per thread. */
    GotryHistory *history = NULL;
    size_t count = 0;
    STATUS(gotry_store_history(store, NULL, 0, &history, NULL), GOTRY_STATUS_OK);
    STATUS(gotry_history_len(history, &count), GOTRY_STATUS_OK);
    CHECK(count == 1 + WORKERS * ROUNDS + WORKERS * ROUNDS * 2);
    gotry_history_free(history);
    STATUS(gotry_lease_release(lease, NULL), GOTRY_STATUS_OK);
    gotry_lease_free(lease);
    gotry_store_free(store);
}

#ifdef __cplusplus
/* What a C++ host writes: every handle owned by a unique_ptr whose deleter is its _free. */
struct ErrorFree {
    void operator()(GotryError *e) const { gotry_error_free(e); }
};
struct StoreFree {
    void operator()(GotryStore *s) const { gotry_store_free(s); }
};
struct LeaseFree {
    void operator()(GotryLease *l) const { gotry_lease_free(l); }
};
struct RecordFree {
    void operator()(GotryRecord *r) const { gotry_record_free(r); }
};

static void test_cpp_ownership(const char *dir) {
    std::string path = std::string(dir) + "/raii.db";
    GotryStore *raw_store = nullptr;
    GotryError *raw_error = nullptr;
    STATUS(gotry_store_open(path.data(), path.size(), nullptr, &raw_store, &raw_error), GOTRY_STATUS_OK);
    std::unique_ptr<GotryStore, StoreFree> store(raw_store);
    GotryLease *raw_lease = nullptr;
    STATUS(gotry_lease_acquire(store.get(), S("acme/t-raii"), S("cpp"), 5000, 0, nullptr, &raw_lease, nullptr),
           GOTRY_STATUS_OK);
    std::unique_ptr<GotryLease, LeaseFree> lease(raw_lease);
    GotryStatus refused =
        gotry_lease_acquire(store.get(), S("acme/t-raii"), S("other"), 5000, 0, nullptr, &raw_lease, &raw_error);
    std::unique_ptr<GotryError, ErrorFree> error(raw_error);
    CHECK(refused == GOTRY_STATUS_LEASE_HELD && error != nullptr && raw_lease == lease.get());
    GotryRecord *raw_record = nullptr;
    STATUS(gotry_lease_mark_forgotten(lease.get(), &raw_record, nullptr), GOTRY_STATUS_OK);
    std::unique_ptr<GotryRecord, RecordFree> record(raw_record);
    CHECK(record_view_of(record.get()).forgotten_at_epoch == 1);
    STATUS(gotry_lease_release(lease.get(), nullptr), GOTRY_STATUS_OK);
}
#endif

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s SCRATCH_DIR\n", argv[0]);
        return 2;
    }
    test_manual_clock();
    test_keeper(argv[1]);
    test_keeper_thread(argv[1]);
    test_lease(argv[1]);
    test_threads(argv[1]);
#ifdef __cplusplus
    test_cpp_ownership(argv[1]);
#endif
    printf("lease_test (%s): %d checks, %d failed\n", LANGUAGE, checks, failures);
    return failures == 0 ? 0 : 1;
}
