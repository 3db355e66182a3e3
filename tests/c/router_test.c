/*
 * The tenant router through the C door, under valgrind.
 *
 * Two routers ("replicas") share one SQLite lease store, whose wall clock is a manual clock,
 * and one durable store folder; each has its own state root. The host keeps every served
 * tenant's ledger open through the system's SQLite (-lsqlite3) from the open until the
 * tenant leaves, and gives the router its snapshot function, so every copy of a ledger it
 * holds is read through the host's own library (see snapshot_test.c for why): its ledger is in
 * rollback journal mode here, so that every copy asks the host's snapshot function (in WAL mode a
 * copy reads the file and its frames itself, which snapshot_test.c shows).
 *
 * Covered: the options and their defaults; capacity (REPLICA_AT_CAPACITY with its limit,
 * before the tenant's root is touched); LEASE_HELD from a second router, with the record to
 * forward to; a handoff that carries the acknowledged rows to the
 * next replica, its `draining` event told before its `closed`; DRAINING while a handoff waits for a call; DRAIN_TIMEOUT (key, in flight,
 * timeout) that leaves the tenant serving; a lost lease (the store's clock jumps past the
 * TTL): the `lost` event on the renewal thread, FENCED for new calls and for the call still
 * running, `closed` when that call ends; background copies and the status they leave (last
 * copy, writes since, lag, the last copy's error), each background copy as a `copied` event
 * and a failing snapshot as a `copy_failed` one, a handoff's and a strict call's copies told
 * by no event; strict durability (finish waits for the copy, and fails with it); close (handed
 * off, timed out, the keeper's report) then ROUTER_CLOSED; a free with a call still held
 * (no callback after it); the host's check of a restored root and a manual clock in the
 * options; a router without threads ticked on a manual clock (a copy due an interval after
 * the open and not before, told as `copied`, a lease lost once the clock passed its TTL, the
 * events on the ticking thread); the NULL and range checks of every call.
 *
 * The same file compiles as C11 and as C++17 (run.sh runs both); the C++ build adds a router
 * held in std::unique_ptr with a lambda as its event callback.
 *
 * Usage: router_test SCRATCH_DIR   (an existing, empty, writable directory)
 * Link with -lsqlite3 and -pthread.
 */
#define _POSIX_C_SOURCE 200809L

#include "host_sqlite.h"

#ifdef __cplusplus
#include <memory>
#endif

static const int64_t TTL_MS = 3000;
static const int64_t MARGIN_MS = 500;

/* ---- events ---- */

typedef struct {
    GotryRouterEventKind kind;
    char key[GOTRY_LEASE_KEY_BUFFER_LEN];
    int64_t epoch;
    GotryStatus error_status; /* GOTRY_STATUS_OK when the event carries no error */
    int32_t host_code;        /* the snapshot's value when the error is a host failure */
    uint64_t seq;             /* copied: the copy's sequence number */
    uint64_t bytes_uploaded;  /* copied: what it stored */
    int on_main_thread;
} SeenEvent;

enum { MAX_EVENTS = 64 };

typedef struct {
    pthread_mutex_t lock;
    pthread_cond_t told; /* signalled on each event recorded, for wait_event */
    pthread_t main_thread;
    SeenEvent events[MAX_EVENTS];
    int count;
    int bad;                      /* events whose fields break the header's promises */
    const GotryRouter *read_from; /* when set: the callback reads this router's status */
    int reads_ok;
} Recorder;

static void recorder_init(Recorder *recorder) {
    memset(recorder, 0, sizeof *recorder);
    pthread_mutex_init(&recorder->lock, NULL);
    /* On the monotonic clock, so that wait_event's bound is what now_ms measures. */
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&recorder->told, &attr);
    pthread_condattr_destroy(&attr);
    recorder->main_thread = pthread_self();
}

static void recorder_destroy(Recorder *recorder) {
    pthread_cond_destroy(&recorder->told);
    pthread_mutex_destroy(&recorder->lock);
}

static void record_event(void *user_data, const GotryRouterEvent *event) {
    Recorder *recorder = (Recorder *)user_data;
    int read_ok = 0;
    pthread_mutex_lock(&recorder->lock);
    const GotryRouter *read_from = recorder->read_from;
    pthread_mutex_unlock(&recorder->lock);
    if (read_from != NULL) {
        GotryTenantStatusList *list = NULL;
        read_ok = gotry_router_status(read_from, &list) == GOTRY_STATUS_OK;
        gotry_tenant_status_list_free(list);
    }
    pthread_mutex_lock(&recorder->lock);
    recorder->reads_ok += read_ok;
    int fine = event != NULL && event->key != NULL && event->key_len < GOTRY_LEASE_KEY_BUFFER_LEN &&
               event->key[event->key_len] == '\0' && event->epoch > 0 &&
               gotry_router_event_kind_name(event->kind) != NULL &&
               (event->kind == GOTRY_ROUTER_EVENT_KIND_COPY_FAILED) == (event->error != NULL) &&
               (event->kind == GOTRY_ROUTER_EVENT_KIND_COPIED) == (event->seq > 0) &&
               (event->kind == GOTRY_ROUTER_EVENT_KIND_COPIED || event->bytes_uploaded == 0);
    if (!fine) recorder->bad++;
    if (fine && recorder->count < MAX_EVENTS) {
        SeenEvent *seen = &recorder->events[recorder->count++];
        memset(seen, 0, sizeof *seen);
        seen->kind = event->kind;
        memcpy(seen->key, event->key, event->key_len);
        seen->epoch = event->epoch;
        seen->error_status = event->error ? gotry_error_status(event->error) : GOTRY_STATUS_OK;
        if (event->error) gotry_error_host_code(event->error, &seen->host_code);
        seen->seq = event->seq;
        seen->bytes_uploaded = event->bytes_uploaded;
        seen->on_main_thread = pthread_equal(pthread_self(), recorder->main_thread);
    }
    pthread_cond_broadcast(&recorder->told);
    pthread_mutex_unlock(&recorder->lock);
}

/* The first event of `kind` for `key` at or after index `from`, copied into *out; -1 when
 * none came within `timeout_ms`. It sleeps until the recorder is told an event: the bound
 * keeps a test that would hang from hanging, it is no time limit on the router. */
static int wait_event(Recorder *recorder, GotryRouterEventKind kind, const char *key, int from, long timeout_ms,
                      SeenEvent *out) {
    struct timespec deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_sec += timeout_ms / 1000;
    deadline.tv_nsec += (timeout_ms % 1000) * 1000000L;
    if (deadline.tv_nsec >= 1000000000L) {
        deadline.tv_sec += 1;
        deadline.tv_nsec -= 1000000000L;
    }
    int next = from;
    int found = -1;
    int timed_out = 0;
    pthread_mutex_lock(&recorder->lock);
    for (;;) {
        for (; next < recorder->count; next++) {
            if (recorder->events[next].kind == kind && strcmp(recorder->events[next].key, key) == 0) {
                found = next;
                if (out != NULL) *out = recorder->events[next];
                break;
            }
        }
        if (found >= 0 || timed_out) break;
        /* Woken by an event (the events looked at so far need no second look), or at the
         * deadline, after which the loop looks once more. */
        timed_out = pthread_cond_timedwait(&recorder->told, &recorder->lock, &deadline) == ETIMEDOUT;
    }
    pthread_mutex_unlock(&recorder->lock);
    return found;
}
/* Already there: delivered before the call that caused it returned. */
#define EVENT_NOW(recorder, kind, key, from, out) wait_event((recorder), (kind), (key), (from), 0, (out))

static int event_count(Recorder *recorder) {
    pthread_mutex_lock(&recorder->lock);
    int count = recorder->count;
    pthread_mutex_unlock(&recorder->lock);
    return count;
}

/* ---- the world: one lease store on a manual wall clock, one durable store ---- */

typedef struct {
    char dir[1000];
    GotryManualClock *wall;
    GotryStore *leases;
    GotryDurableStore *durable;
} World;

static void world_open(World *world, const char *base, const char *name) {
    GotryError *err = NULL;
    char path[1200];
    memset(world, 0, sizeof *world);
    snprintf(world->dir, sizeof world->dir, "%s/%s", base, name);
    CHECK(make_dirs(world->dir) == 0);
    STATUS(gotry_manual_clock_new(1000000, &world->wall), GOTRY_STATUS_OK);
    snprintf(path, sizeof path, "%s/leases.db", world->dir);
    STATUS(gotry_store_open(path, strlen(path), world->wall, &world->leases, &err), GOTRY_STATUS_OK);
    snprintf(path, sizeof path, "%s/durable", world->dir);
    STATUS(gotry_durable_store_open(path, strlen(path), &world->durable, &err), GOTRY_STATUS_OK);
    gotry_error_free(err);
}

static void world_close(World *world) {
    gotry_durable_store_free(world->durable);
    gotry_store_free(world->leases);
    gotry_manual_clock_free(world->wall);
}

static void state_root_of(const World *world, const char *replica, char *out, size_t capacity) {
    snprintf(out, capacity, "%s/%s", world->dir, replica);
}

static GotryRouter *start_router(World *world, const char *replica, size_t capacity, GotryDurability durability,
                                 Recorder *recorder, HostSnapshots *host) {
    GotryError *err = NULL;
    GotryRouterOptions options;
    GotryRouter *router = NULL;
    char state_root[1100];
    state_root_of(world, replica, state_root, sizeof state_root);
    STATUS(gotry_router_options_default(&options), GOTRY_STATUS_OK);
    options.capacity = capacity;
    options.copy_interval_ms = 50;
    options.durability = durability;
    if (recorder != NULL) {
        options.on_event = record_event;
        options.event_user_data = recorder;
    }
    if (host != NULL) {
        options.snapshot = host_snapshot;
        options.snapshot_user_data = host;
    }
    STATUS(gotry_router_start(world->leases, world->durable, state_root, strlen(state_root), replica, strlen(replica),
                              TTL_MS, MARGIN_MS, &options, &router, &err),
           GOTRY_STATUS_OK);
    gotry_error_free(err);
    return router;
}

static GotryTenantView view_of(const GotryTenantHandle *handle) {
    GotryTenantView view;
    memset(&view, 0, sizeof view);
    CHECK(gotry_tenant_handle_view(handle, &view) == GOTRY_STATUS_OK);
    return view;
}

static GotryTenantHandle *open_tenant(GotryRouter *router, const Tenant *tenant, int line) {
    GotryError *err = NULL;
    GotryTenantHandle *handle = NULL;
    check_status_at(gotry_router_open(router, S(ORG), tenant->tenant, strlen(tenant->tenant), &handle, &err),
                    GOTRY_STATUS_OK, &err, "gotry_router_open", __FILE__, line);
    gotry_error_free(err);
    return handle;
}
#define OPEN(router, tenant) open_tenant((router), (tenant), __LINE__)

static GotryRouterCall *begin_call(GotryRouter *router, const Tenant *tenant, int line) {
    GotryError *err = NULL;
    GotryRouterCall *call = NULL;
    check_status_at(gotry_router_begin(router, tenant->key, strlen(tenant->key), &call, &err), GOTRY_STATUS_OK, &err,
                    "gotry_router_begin", __FILE__, line);
    gotry_error_free(err);
    return call;
}
#define BEGIN(router, tenant) begin_call((router), (tenant), __LINE__)

static void finish_call(GotryRouterCall *call, GotryStatus want, int line) {
    GotryError *err = NULL;
    check_status_at(gotry_router_call_finish(call, &err), want, &err, "gotry_router_call_finish", __FILE__, line);
    gotry_error_free(err);
}
#define FINISH(call, want) finish_call((call), (want), __LINE__)

/* A call that writes `text` into the host's ledger of the tenant, checking the write gate
 * through the call's own handle before and after, as the write path does. */
static void write_call(GotryRouter *router, const Tenant *tenant, HostLedger *ledger, const char *text,
                       GotryStatus want, int line) {
    GotryRouterCall *call = begin_call(router, tenant, line);
    const GotryTenantHandle *handle = NULL;
    GotryLease *lease = NULL;
    CHECK(gotry_router_call_handle(call, &handle) == GOTRY_STATUS_OK && handle != NULL);
    CHECK(gotry_tenant_handle_lease(handle, &lease) == GOTRY_STATUS_OK);
    CHECK(gotry_lease_assert_held(lease, NULL) == GOTRY_STATUS_OK);
    GotryTenantView view = view_of(handle);
    CHECK(view.key_len == strlen(tenant->key) && memcmp(view.key, tenant->key, view.key_len) == 0);
    CHECK(strncmp(ledger->path, view.root, view.root_len) == 0);
    CHECK(host_insert(ledger->db, text) == 0);
    gotry_lease_free(lease);
    finish_call(call, want, line);
}
#define WRITE(router, tenant, ledger, text) write_call((router), (tenant), (ledger), (text), GOTRY_STATUS_OK, __LINE__)

/* What the router's status says of one tenant, copied out of the list. */
typedef struct {
    int found;
    size_t tenants;
    GotryTenantState state;
    int64_t epoch;
    uint64_t in_flight;
    bool has_last_copy;
    GotryCopyId last_copy;
    uint64_t writes_since_copy;
    uint64_t lag_ms;
    int has_error;
    char error[512];
} TenantSeen;

static TenantSeen tenant_status(const GotryRouter *router, const Tenant *tenant) {
    TenantSeen seen;
    GotryTenantStatusList *list = NULL;
    memset(&seen, 0, sizeof seen);
    CHECK(gotry_router_status(router, &list) == GOTRY_STATUS_OK);
    CHECK(gotry_tenant_status_list_len(list, &seen.tenants) == GOTRY_STATUS_OK);
    char previous[GOTRY_LEASE_KEY_BUFFER_LEN] = "";
    for (size_t i = 0; i < seen.tenants; i++) {
        GotryTenantStatusView view;
        CHECK(gotry_tenant_status_list_get(list, i, &view) == GOTRY_STATUS_OK);
        CHECK(view.key[view.key_len] == '\0' && strcmp(previous, view.key) < 0); /* ordered by key */
        snprintf(previous, sizeof previous, "%s", view.key);
        CHECK((view.last_copy_error == NULL) == (view.last_copy_error_len == 0));
        if (view.key_len != strlen(tenant->key) || memcmp(view.key, tenant->key, view.key_len) != 0) continue;
        seen.found = 1;
        seen.state = view.state;
        seen.epoch = view.epoch;
        seen.in_flight = view.in_flight;
        seen.has_last_copy = view.has_last_copy;
        seen.last_copy = view.last_copy;
        seen.writes_since_copy = view.writes_since_copy;
        seen.lag_ms = view.lag_ms;
        seen.has_error = view.last_copy_error != NULL;
        if (view.last_copy_error != NULL)
            snprintf(seen.error, sizeof seen.error, "%.*s", (int)view.last_copy_error_len, view.last_copy_error);
    }
    gotry_tenant_status_list_free(list);
    return seen;
}

static void close_router(GotryRouter *router, size_t handed_off) {
    GotryCloseReport *report = NULL;
    size_t len = 99;
    CHECK(gotry_router_close(router, 5000, &report) == GOTRY_STATUS_OK);
    CHECK(gotry_close_report_len(report, &len) == GOTRY_STATUS_OK && len == handed_off);
    for (size_t i = 0; i < len; i++) {
        GotryCloseEntry entry;
        CHECK(gotry_close_report_get(report, i, &entry) == GOTRY_STATUS_OK);
        CHECK(entry.outcome == GOTRY_CLOSE_OUTCOME_HANDED_OFF && entry.error == NULL);
    }
    gotry_close_report_free(report);
    gotry_router_free(router);
}

/* ---- scenarios ---- */

/* One tick and its report's view; the report is freed unless `out_report` takes it. */
static GotryRouterTickView tick_view(GotryRouter *router, GotryRouterTickReport **out_report) {
    GotryError *err = NULL;
    GotryRouterTickReport *report = NULL;
    GotryRouterTickView view;
    memset(&view, 0, sizeof view);
    STATUS(gotry_router_tick(router, &report, &err), GOTRY_STATUS_OK);
    STATUS(gotry_router_tick_report_view(report, &view), GOTRY_STATUS_OK);
    if (out_report != NULL)
        *out_report = report;
    else
        gotry_router_tick_report_free(report);
    return view;
}

static void options_and_names(void) {
    GotryError *err = NULL;
    GotryRouterOptions options;
    memset(&options, 0, sizeof options);
    STATUS(gotry_router_options_default(&options), GOTRY_STATUS_OK);
    CHECK(options.capacity >= 1 && options.copy_interval_ms == 30000 &&
          options.durability == GOTRY_DURABILITY_ASYNC && options.clock == NULL && options.verify == NULL &&
          options.snapshot == NULL && options.on_event == NULL && options.verify_user_data == NULL &&
          options.snapshot_user_data == NULL && options.event_user_data == NULL);
    STATUS(gotry_router_options_default(NULL), GOTRY_STATUS_NULL_ARGUMENT);
    CHECK(strcmp(gotry_router_event_kind_name(GOTRY_ROUTER_EVENT_KIND_LOST), "lost") == 0);
    CHECK(strcmp(gotry_router_event_kind_name(GOTRY_ROUTER_EVENT_KIND_CLOSED), "closed") == 0);
    CHECK(strcmp(gotry_router_event_kind_name(GOTRY_ROUTER_EVENT_KIND_COPY_FAILED), "copy_failed") == 0);
    CHECK(strcmp(gotry_router_event_kind_name(GOTRY_ROUTER_EVENT_KIND_DRAINING), "draining") == 0);
    CHECK(strcmp(gotry_router_event_kind_name(GOTRY_ROUTER_EVENT_KIND_COPIED), "copied") == 0);
    CHECK(gotry_router_event_kind_name(0) == NULL && gotry_router_event_kind_name(6) == NULL);
    CHECK(strcmp(gotry_tenant_state_name(GOTRY_TENANT_STATE_OPENING), "opening") == 0);
    CHECK(strcmp(gotry_tenant_state_name(GOTRY_TENANT_STATE_SERVING), "serving") == 0);
    CHECK(strcmp(gotry_tenant_state_name(GOTRY_TENANT_STATE_DRAINING), "draining") == 0);
    CHECK(strcmp(gotry_tenant_state_name(GOTRY_TENANT_STATE_LOST), "lost") == 0);
    CHECK(strcmp(gotry_tenant_state_name(GOTRY_TENANT_STATE_CLOSED), "closed") == 0);
    CHECK(gotry_tenant_state_name(0) == NULL && gotry_tenant_state_name(6) == NULL);
}

static void arguments(World *world) {
    GotryError *err = NULL;
    GotryRouter *router = NULL;
    GotryRouterOptions options;
    char root[1100];
    state_root_of(world, "replica-args", root, sizeof root);
    STATUS(gotry_router_options_default(&options), GOTRY_STATUS_OK);
    FAILS_NULL(gotry_router_start(NULL, world->durable, root, strlen(root), S("r"), TTL_MS, MARGIN_MS, &options,
                                  &router, &err));
    FAILS_NULL(gotry_router_start(world->leases, NULL, root, strlen(root), S("r"), TTL_MS, MARGIN_MS, &options,
                                  &router, &err));
    FAILS_NULL(gotry_router_start(world->leases, world->durable, NULL, 0, S("r"), TTL_MS, MARGIN_MS, &options,
                                  &router, &err));
    FAILS_NULL(gotry_router_start(world->leases, world->durable, root, strlen(root), NULL, 1, TTL_MS, MARGIN_MS,
                                  &options, &router, &err));
    FAILS_NULL(gotry_router_start(world->leases, world->durable, root, strlen(root), S("r"), TTL_MS, MARGIN_MS,
                                  &options, NULL, &err));
    FAILS_RANGE(gotry_router_start(world->leases, world->durable, S("a\0b"), S("r"), TTL_MS, MARGIN_MS, &options,
                                   &router, &err));
    FAILS_RANGE(gotry_router_start(world->leases, world->durable, root, strlen(root), S("r\xff"), TTL_MS, MARGIN_MS,
                                   &options, &router, &err));
    FAILS_RANGE(gotry_router_start(world->leases, world->durable, root, strlen(root), S("r"), 50, 0, &options,
                                   &router, &err));
    FAILS_RANGE(gotry_router_start(world->leases, world->durable, root, strlen(root), S("r"), TTL_MS, TTL_MS,
                                   &options, &router, &err));
    options.capacity = 0;
    FAILS_RANGE(gotry_router_start(world->leases, world->durable, root, strlen(root), S("r"), TTL_MS, MARGIN_MS,
                                   &options, &router, &err));
    options.capacity = 4;
    options.durability = (GotryDurability)7;
    FAILS_RANGE(gotry_router_start(world->leases, world->durable, root, strlen(root), S("r"), TTL_MS, MARGIN_MS,
                                   &options, &router, &err));
    CHECK(router == NULL);
    /* NULL options: the defaults. */
    STATUS(gotry_router_start(world->leases, world->durable, root, strlen(root), S("replica-args"), TTL_MS,
                              MARGIN_MS, NULL, &router, &err),
           GOTRY_STATUS_OK);
    size_t capacity = 0;
    STATUS(gotry_router_capacity(router, &capacity), GOTRY_STATUS_OK);
    CHECK(capacity >= 1);
    STATUS(gotry_router_capacity(NULL, &capacity), GOTRY_STATUS_NULL_ARGUMENT);
    STATUS(gotry_router_capacity(router, NULL), GOTRY_STATUS_NULL_ARGUMENT);

    const Tenant tenant = tenant_named("router-test/args");
    GotryTenantHandle *handle = NULL;
    GotryRouterCall *call = NULL;
    FAILS_NULL(gotry_router_open(NULL, S(ORG), tenant.tenant, strlen(tenant.tenant), &handle, &err));
    FAILS_NULL(gotry_router_open(router, NULL, 4, tenant.tenant, strlen(tenant.tenant), &handle, &err));
    FAILS_NULL(gotry_router_open(router, S(ORG), NULL, 34, &handle, &err));
    FAILS_NULL(gotry_router_open(router, S(ORG), tenant.tenant, strlen(tenant.tenant), NULL, &err));
    FAILS(gotry_router_open(router, S("Acme"), tenant.tenant, strlen(tenant.tenant), &handle, &err),
          GOTRY_STATUS_ID_INVALID, "GOTRY_TENANT_ID_INVALID");
    FAILS(gotry_router_open(router, S("acm\xff"), tenant.tenant, strlen(tenant.tenant), &handle, &err),
          GOTRY_STATUS_ID_INVALID, "GOTRY_TENANT_ID_INVALID");
    FAILS(gotry_router_open(router, S(ORG), S("t-0"), &handle, &err), GOTRY_STATUS_ID_INVALID,
          "GOTRY_TENANT_ID_INVALID");
    CHECK(handle == NULL);
    FAILS_NULL(gotry_router_begin(NULL, tenant.key, strlen(tenant.key), &call, &err));
    FAILS_NULL(gotry_router_begin(router, NULL, 1, &call, &err));
    FAILS_NULL(gotry_router_begin(router, tenant.key, strlen(tenant.key), NULL, &err));
    FAILS_RANGE(gotry_router_begin(router, S("k\xff"), &call, &err));
    FAILS(gotry_router_begin(router, tenant.key, strlen(tenant.key), &call, &err), GOTRY_STATUS_LEASE_LOST,
          "GOTRY_TENANT_LEASE_LOST");
    CHECK(call == NULL);
    FAILS_NULL(gotry_router_handoff(NULL, tenant.key, strlen(tenant.key), 10, &err));
    FAILS_NULL(gotry_router_handoff(router, NULL, 1, 10, &err));
    FAILS_RANGE(gotry_router_handoff(router, S("k\xff"), 10, &err));
    FAILS(gotry_router_handoff(router, tenant.key, strlen(tenant.key), 10, &err), GOTRY_STATUS_LEASE_LOST,
          "GOTRY_TENANT_LEASE_LOST");
    FAILS_NULL(gotry_router_call_finish(NULL, &err));
    gotry_router_call_free(NULL);
    const GotryTenantHandle *lent = NULL;
    STATUS(gotry_router_call_handle(NULL, &lent), GOTRY_STATUS_NULL_ARGUMENT);

    handle = OPEN(router, &tenant);
    GotryTenantView view;
    GotryLease *lease = NULL;
    STATUS(gotry_tenant_handle_view(NULL, &view), GOTRY_STATUS_NULL_ARGUMENT);
    STATUS(gotry_tenant_handle_view(handle, NULL), GOTRY_STATUS_NULL_ARGUMENT);
    STATUS(gotry_tenant_handle_lease(NULL, &lease), GOTRY_STATUS_NULL_ARGUMENT);
    STATUS(gotry_tenant_handle_lease(handle, NULL), GOTRY_STATUS_NULL_ARGUMENT);
    call = BEGIN(router, &tenant);
    STATUS(gotry_router_call_handle(call, NULL), GOTRY_STATUS_NULL_ARGUMENT);
    gotry_router_call_free(call);
    gotry_tenant_handle_free(handle);
    gotry_tenant_handle_free(NULL);

    GotryTenantStatusList *list = NULL;
    GotryTenantStatusView status_view;
    size_t len = 0;
    STATUS(gotry_router_status(NULL, &list), GOTRY_STATUS_NULL_ARGUMENT);
    STATUS(gotry_router_status(router, NULL), GOTRY_STATUS_NULL_ARGUMENT);
    STATUS(gotry_router_status(router, &list), GOTRY_STATUS_OK);
    STATUS(gotry_tenant_status_list_len(NULL, &len), GOTRY_STATUS_NULL_ARGUMENT);
    STATUS(gotry_tenant_status_list_len(list, NULL), GOTRY_STATUS_NULL_ARGUMENT);
    STATUS(gotry_tenant_status_list_len(list, &len), GOTRY_STATUS_OK);
    CHECK(len == 1);
    STATUS(gotry_tenant_status_list_get(list, 1, &status_view), GOTRY_STATUS_INVALID_ARGUMENT);
    STATUS(gotry_tenant_status_list_get(NULL, 0, &status_view), GOTRY_STATUS_NULL_ARGUMENT);
    STATUS(gotry_tenant_status_list_get(list, 0, NULL), GOTRY_STATUS_NULL_ARGUMENT);
    STATUS(gotry_tenant_status_list_get(list, 0, &status_view), GOTRY_STATUS_OK);
    CHECK(status_view.state == GOTRY_TENANT_STATE_SERVING && status_view.epoch == 1 && status_view.in_flight == 0 &&
          !status_view.has_last_copy && status_view.last_copy.epoch == 0 && status_view.last_copy_error == NULL);
    gotry_tenant_status_list_free(list);
    gotry_tenant_status_list_free(NULL);

    GotryCloseReport *report = NULL;
    GotryCloseEntry entry;
    const GotryShutdownReport *keeper = NULL;
    STATUS(gotry_router_close(NULL, 10, &report), GOTRY_STATUS_NULL_ARGUMENT);
    STATUS(gotry_router_close(router, 10, NULL), GOTRY_STATUS_NULL_ARGUMENT);
    STATUS(gotry_router_close(router, 5000, &report), GOTRY_STATUS_OK);
    STATUS(gotry_close_report_len(NULL, &len), GOTRY_STATUS_NULL_ARGUMENT);
    STATUS(gotry_close_report_len(report, NULL), GOTRY_STATUS_NULL_ARGUMENT);
    STATUS(gotry_close_report_get(NULL, 0, &entry), GOTRY_STATUS_NULL_ARGUMENT);
    STATUS(gotry_close_report_get(report, 0, NULL), GOTRY_STATUS_NULL_ARGUMENT);
    STATUS(gotry_close_report_get(report, 1, &entry), GOTRY_STATUS_INVALID_ARGUMENT);
    STATUS(gotry_close_report_keeper(NULL, &keeper), GOTRY_STATUS_NULL_ARGUMENT);
    STATUS(gotry_close_report_keeper(report, NULL), GOTRY_STATUS_NULL_ARGUMENT);
    gotry_close_report_free(report);
    gotry_close_report_free(NULL);
    gotry_router_free(router);
    gotry_router_free(NULL);
}

static void capacity_and_lease_held(World *world) {
    GotryError *err = NULL;
    const Tenant t1 = tenant_named("router-test/capacity/1");
    const Tenant t2 = tenant_named("router-test/capacity/2");
    const Tenant t3 = tenant_named("router-test/capacity/3");
    GotryRouter *a = start_router(world, "replica-a", 2, GOTRY_DURABILITY_ASYNC, NULL, NULL);
    GotryRouter *b = start_router(world, "replica-b", 2, GOTRY_DURABILITY_ASYNC, NULL, NULL);
    size_t capacity = 0;
    STATUS(gotry_router_capacity(a, &capacity), GOTRY_STATUS_OK);
    CHECK(capacity == 2);

    GotryTenantHandle *h1 = OPEN(a, &t1);
    GotryTenantHandle *h2 = OPEN(a, &t2);
    GotryTenantView v1 = view_of(h1);
    CHECK(v1.epoch == 1 && !v1.restored && v1.restored_from.epoch == 0 && v1.restored_from.seq == 0);
    CHECK(v1.key_len == strlen(t1.key) && strcmp(v1.key, t1.key) == 0 && v1.root[v1.root_len] == '\0');
    CHECK(exists(v1.root)); /* an empty start: the root is an empty folder */
    /* Opening a served tenant again: the same tenure. */
    GotryTenantHandle *again = OPEN(a, &t1);
    CHECK(view_of(again).epoch == 1 && strcmp(view_of(again).root, v1.root) == 0);
    gotry_tenant_handle_free(again);

    /* Full: refused before the lease or any file of the tenant is touched. */
    GotryTenantHandle *h3 = NULL;
    char root3[2048];
    char state_root[1100];
    state_root_of(world, "replica-a", state_root, sizeof state_root);
    tenant_root(state_root, &t3, root3, sizeof root3);
    STATUS(gotry_router_open(a, S(ORG), t3.tenant, strlen(t3.tenant), &h3, &err), GOTRY_STATUS_REPLICA_AT_CAPACITY);
    uint64_t limit = 0;
    STATUS(gotry_error_limit(err, &limit), GOTRY_STATUS_OK);
    CHECK(limit == 2);
    ERROR_IS(GOTRY_STATUS_REPLICA_AT_CAPACITY, "GOTRY_TENANT_REPLICA_AT_CAPACITY");
    CHECK(h3 == NULL && !exists(root3));
    GotryRecord *record = NULL;
    STATUS(gotry_store_read(world->leases, t3.key, strlen(t3.key), &record, &err), GOTRY_STATUS_OK);
    CHECK(record == NULL);

    /* Another replica: LEASE_HELD, with the record of the holder to forward to. */
    STATUS(gotry_router_open(b, S(ORG), t1.tenant, strlen(t1.tenant), &h3, &err), GOTRY_STATUS_LEASE_HELD);
    GotryRecordView holder;
    STATUS(gotry_error_record(err, &holder), GOTRY_STATUS_OK);
    CHECK(holder.owner_len == 9 && memcmp(holder.owner, "replica-a", 9) == 0 && holder.epoch == 1 &&
          holder.key_len == strlen(t1.key) && memcmp(holder.key, t1.key, holder.key_len) == 0);
    ERROR_IS(GOTRY_STATUS_LEASE_HELD, "GOTRY_TENANT_LEASE_HELD");
    CHECK(h3 == NULL && tenant_status(b, &t1).tenants == 0);
    /* B serves t3 meanwhile. */
    h3 = OPEN(b, &t3);
    CHECK(view_of(h3).epoch == 1);

    gotry_tenant_handle_free(h1);
    gotry_tenant_handle_free(h2);
    gotry_tenant_handle_free(h3);
    close_router(a, 2);
    close_router(b, 1);
}

static void handoff_carries_data(World *world) {
    GotryError *err = NULL;
    const Tenant tenant = tenant_named("router-test/handoff");
    Recorder events_a;
    HostSnapshots host;
    recorder_init(&events_a);
    snapshots_init(&host);
    GotryRouter *a = start_router(world, "replica-a", 4, GOTRY_DURABILITY_ASYNC, &events_a, &host);
    GotryRouter *b = start_router(world, "replica-b", 4, GOTRY_DURABILITY_ASYNC, NULL, NULL);

    GotryTenantHandle *handle = OPEN(a, &tenant);
    GotryTenantView view = view_of(handle);
    HostLedger ledger;
    CHECK(host_open(&ledger, view.root, HOST_ROLLBACK) == 0);
    snapshots_hold(&host, &ledger);
    WRITE(a, &tenant, &ledger, "one");
    WRITE(a, &tenant, &ledger, "two");
    CHECK(file_size(ledger.path) >= 0);

    int before = event_count(&events_a);
    STATUS(gotry_router_handoff(a, tenant.key, strlen(tenant.key), 5000, &err), GOTRY_STATUS_OK);
    SeenEvent closed, drained;
    int closed_at = EVENT_NOW(&events_a, GOTRY_ROUTER_EVENT_KIND_CLOSED, tenant.key, before, &closed);
    CHECK(closed_at >= 0);
    CHECK(closed.epoch == 1 && closed.on_main_thread && closed.error_status == GOTRY_STATUS_OK);
    /* The drain was told when it began, on the thread that handed off, before the release. */
    int drained_at = EVENT_NOW(&events_a, GOTRY_ROUTER_EVENT_KIND_DRAINING, tenant.key, before, &drained);
    CHECK(drained_at >= 0 && drained_at < closed_at && drained.epoch == 1 && drained.on_main_thread);
    /* Every copy of the ledger the host holds went through its snapshot function. */
    CHECK(snapshots_calls(&host) >= 1 && host.bad_args == 0);
    /* The tenant left: the host closes its files, A no longer serves it. */
    snapshots_release(&host, &ledger);
    host_close(&ledger);
    CHECK(tenant_status(a, &tenant).tenants == 0);
    GotryRouterCall *call = NULL;
    FAILS(gotry_router_begin(a, tenant.key, strlen(tenant.key), &call, &err), GOTRY_STATUS_LEASE_LOST,
          "GOTRY_TENANT_LEASE_LOST");
    /* The handle outlives the tenure; its gate says the lease was released. */
    GotryLease *lease = NULL;
    STATUS(gotry_tenant_handle_lease(handle, &lease), GOTRY_STATUS_OK);
    FAILS(gotry_lease_assert_held(lease, &err), GOTRY_STATUS_FENCED, "GOTRY_TENANT_FENCED");
    gotry_lease_free(lease);

    /* B restores what A acknowledged, the rows in A's WAL included. */
    GotryTenantHandle *moved = OPEN(b, &tenant);
    GotryTenantView moved_view = view_of(moved);
    CHECK(moved_view.epoch == 2 && moved_view.restored && moved_view.restored_from.epoch == 1 &&
          moved_view.restored_from.seq >= 1);
    CHECK(strcmp(moved_view.root, view.root) != 0);
    char path[2400];
    char rows[256];
    snprintf(path, sizeof path, "%s/gotry-state/gotry-state.db", moved_view.root);
    ledger_rows(path, rows, sizeof rows);
    CHECK(strcmp(rows, "one,two") == 0);
    TenantSeen seen = tenant_status(b, &tenant);
    CHECK(seen.found && seen.state == GOTRY_TENANT_STATE_SERVING && seen.epoch == 2 && seen.has_last_copy &&
          seen.last_copy.epoch == 1);
    CHECK(events_a.bad == 0);

    gotry_tenant_handle_free(handle);
    gotry_tenant_handle_free(moved);
    close_router(a, 0);
    close_router(b, 1);
    snapshots_destroy(&host);
    recorder_destroy(&events_a);
}

typedef struct {
    GotryRouter *router;
    const char *key;
    uint64_t timeout_ms;
    GotryStatus status;
} HandoffJob;

static void *run_handoff(void *arg) {
    HandoffJob *job = (HandoffJob *)arg;
    job->status = gotry_router_handoff(job->router, job->key, strlen(job->key), job->timeout_ms, NULL);
    return NULL;
}

static void draining_and_drain_timeout(World *world) {
    GotryError *err = NULL;
    const Tenant t2 = tenant_named("router-test/draining");
    const Tenant t3 = tenant_named("router-test/drain-timeout");
    Recorder events;
    recorder_init(&events);
    GotryRouter *a = start_router(world, "replica-a", 4, GOTRY_DURABILITY_ASYNC, &events, NULL);

    /* A handoff waits for the call in flight; meanwhile new calls and opens are refused. */
    GotryTenantHandle *h2 = OPEN(a, &t2);
    GotryRouterCall *running = BEGIN(a, &t2);
    HandoffJob job;
    job.router = a;
    job.key = t2.key;
    job.timeout_ms = 20000;
    job.status = GOTRY_STATUS_INTERNAL_ERROR;
    pthread_t handing_off;
    CHECK(pthread_create(&handing_off, NULL, run_handoff, &job) == 0);
    CHECK(wait_event(&events, GOTRY_ROUTER_EVENT_KIND_DRAINING, t2.key, 0, 20000, NULL) >= 0);
    CHECK(tenant_status(a, &t2).state == GOTRY_TENANT_STATE_DRAINING); /* told once it drains */
    GotryRouterCall *call = NULL;
    STATUS(gotry_router_begin(a, t2.key, strlen(t2.key), &call, &err), GOTRY_STATUS_DRAINING);
    const char *key = NULL;
    size_t key_len = 0;
    STATUS(gotry_error_key(err, &key, &key_len), GOTRY_STATUS_OK);
    CHECK(key_len == strlen(t2.key) && memcmp(key, t2.key, key_len) == 0);
    ERROR_IS(GOTRY_STATUS_DRAINING, "GOTRY_TENANT_DRAINING");
    GotryTenantHandle *refused = NULL;
    FAILS(gotry_router_open(a, S(ORG), t2.tenant, strlen(t2.tenant), &refused, &err), GOTRY_STATUS_DRAINING,
          "GOTRY_TENANT_DRAINING");
    FAILS(gotry_router_handoff(a, t2.key, strlen(t2.key), 10, &err), GOTRY_STATUS_DRAINING,
          "GOTRY_TENANT_DRAINING");
    CHECK(call == NULL && refused == NULL);
    TenantSeen seen = tenant_status(a, &t2);
    CHECK(seen.in_flight == 1);
    int before = event_count(&events);
    FINISH(running, GOTRY_STATUS_OK); /* the lease is still held: the call is acknowledged */
    CHECK(pthread_join(handing_off, NULL) == 0);
    CHECK(job.status == GOTRY_STATUS_OK);
    SeenEvent closed;
    CHECK(EVENT_NOW(&events, GOTRY_ROUTER_EVENT_KIND_CLOSED, t2.key, before, &closed) >= 0);
    CHECK(closed.epoch == 1 && !closed.on_main_thread); /* on the thread that handed off */
    CHECK(tenant_status(a, &t2).tenants == 0);

    /* A drain that times out leaves the tenant serving, nothing copied or released. */
    GotryTenantHandle *h3 = OPEN(a, &t3);
    running = BEGIN(a, &t3);
    STATUS(gotry_router_handoff(a, t3.key, strlen(t3.key), 100, &err), GOTRY_STATUS_DRAIN_TIMEOUT);
    uint64_t in_flight = 0;
    uint64_t timeout_ms = 0;
    STATUS(gotry_error_in_flight(err, &in_flight), GOTRY_STATUS_OK);
    STATUS(gotry_error_timeout_ms(err, &timeout_ms), GOTRY_STATUS_OK);
    STATUS(gotry_error_key(err, &key, &key_len), GOTRY_STATUS_OK);
    CHECK(in_flight == 1 && timeout_ms == 100 && key_len == strlen(t3.key) && memcmp(key, t3.key, key_len) == 0);
    ERROR_IS(GOTRY_STATUS_DRAIN_TIMEOUT, "GOTRY_TENANT_DRAIN_TIMEOUT");
    seen = tenant_status(a, &t3);
    CHECK(seen.found && seen.state == GOTRY_TENANT_STATE_SERVING && seen.in_flight == 1 && !seen.has_last_copy);
    GotryRecord *record = NULL;
    GotryRecordView record_view;
    STATUS(gotry_store_read(world->leases, t3.key, strlen(t3.key), &record, &err), GOTRY_STATUS_OK);
    STATUS(gotry_record_view(record, &record_view), GOTRY_STATUS_OK);
    CHECK(record_view.owner_len == 9 && memcmp(record_view.owner, "replica-a", 9) == 0 && record_view.epoch == 1);
    gotry_record_free(record);
    /* Still serving: a new call runs; abandoned, it stops counting. */
    call = BEGIN(a, &t3);
    CHECK(tenant_status(a, &t3).in_flight == 2);
    gotry_router_call_free(call);
    CHECK(tenant_status(a, &t3).in_flight == 1);
    FINISH(running, GOTRY_STATUS_OK);
    STATUS(gotry_router_handoff(a, t3.key, strlen(t3.key), 5000, &err), GOTRY_STATUS_OK);
    CHECK(EVENT_NOW(&events, GOTRY_ROUTER_EVENT_KIND_CLOSED, t3.key, 0, NULL) >= 0);
    CHECK(events.bad == 0);

    gotry_tenant_handle_free(h2);
    gotry_tenant_handle_free(h3);
    close_router(a, 0);
    recorder_destroy(&events);
}

static void lost_lease(World *world) {
    GotryError *err = NULL;
    const Tenant t1 = tenant_named("router-test/lost/busy");
    const Tenant t2 = tenant_named("router-test/lost/idle");
    Recorder events;
    recorder_init(&events);
    GotryRouter *a = start_router(world, "replica-a", 4, GOTRY_DURABILITY_ASYNC, &events, NULL);
    GotryTenantHandle *h1 = OPEN(a, &t1);
    GotryTenantHandle *h2 = OPEN(a, &t2);
    pthread_mutex_lock(&events.lock);
    events.read_from = a; /* the callback may read the router's status */
    pthread_mutex_unlock(&events.lock);
    GotryRouterCall *running = BEGIN(a, &t1);

    /* The store's clock passes the TTL: the next renewal is refused. */
    int64_t now = 0;
    STATUS(gotry_manual_clock_advance(world->wall, TTL_MS + 1000, &now, &err), GOTRY_STATUS_OK);
    SeenEvent lost;
    CHECK(wait_event(&events, GOTRY_ROUTER_EVENT_KIND_LOST, t1.key, 0, 20000, &lost) >= 0);
    CHECK(lost.epoch == 1 && !lost.on_main_thread && lost.error_status == GOTRY_STATUS_OK);
    /* The idle tenant is lost and closed at once, on the renewal thread. */
    SeenEvent closed;
    CHECK(wait_event(&events, GOTRY_ROUTER_EVENT_KIND_LOST, t2.key, 0, 20000, NULL) >= 0);
    CHECK(wait_event(&events, GOTRY_ROUTER_EVENT_KIND_CLOSED, t2.key, 0, 20000, &closed) >= 0);
    CHECK(closed.epoch == 1 && !closed.on_main_thread);
    CHECK(EVENT_NOW(&events, GOTRY_ROUTER_EVENT_KIND_CLOSED, t1.key, 0, NULL) < 0);

    TenantSeen seen = tenant_status(a, &t1);
    CHECK(seen.found && seen.state == GOTRY_TENANT_STATE_LOST && seen.in_flight == 1 && seen.epoch == 1);
    GotryRouterCall *call = NULL;
    STATUS(gotry_router_begin(a, t1.key, strlen(t1.key), &call, &err), GOTRY_STATUS_FENCED);
    GotryFenceReason reason = GOTRY_FENCE_REASON_LEASE_RELEASED;
    STATUS(gotry_error_fence_reason(err, &reason), GOTRY_STATUS_OK);
    CHECK(reason == GOTRY_FENCE_REASON_LEASE_LOST);
    ERROR_IS(GOTRY_STATUS_FENCED, "GOTRY_TENANT_FENCED");
    GotryTenantHandle *refused = NULL;
    FAILS(gotry_router_open(a, S(ORG), t1.tenant, strlen(t1.tenant), &refused, &err), GOTRY_STATUS_FENCED,
          "GOTRY_TENANT_FENCED");
    FAILS(gotry_router_handoff(a, t1.key, strlen(t1.key), 10, &err), GOTRY_STATUS_FENCED, "GOTRY_TENANT_FENCED");
    /* The call still running cannot be acknowledged; its end closes the tenant, here. */
    int before = event_count(&events);
    FINISH(running, GOTRY_STATUS_CALL_IN_DOUBT);
    CHECK(EVENT_NOW(&events, GOTRY_ROUTER_EVENT_KIND_CLOSED, t1.key, before, &closed) >= 0);
    CHECK(closed.epoch == 1 && closed.on_main_thread);
    CHECK(tenant_status(a, &t1).tenants == 0);
    CHECK(events.reads_ok >= 3 && events.bad == 0);

    /* The next replica takes both at the next epoch. */
    GotryRouter *b = start_router(world, "replica-b", 4, GOTRY_DURABILITY_ASYNC, NULL, NULL);
    GotryTenantHandle *m1 = OPEN(b, &t1);
    GotryTenantHandle *m2 = OPEN(b, &t2);
    CHECK(view_of(m1).epoch == 2 && view_of(m2).epoch == 2);

    pthread_mutex_lock(&events.lock);
    events.read_from = NULL;
    pthread_mutex_unlock(&events.lock);
    gotry_tenant_handle_free(h1);
    gotry_tenant_handle_free(h2);
    gotry_tenant_handle_free(m1);
    gotry_tenant_handle_free(m2);
    close_router(a, 0);
    close_router(b, 2);
    recorder_destroy(&events);
}

static void copies_and_status(World *world) {
    GotryError *err = NULL;
    const Tenant tenant = tenant_named("router-test/copies");
    const Tenant strict_tenant = tenant_named("router-test/strict");
    Recorder events;
    HostSnapshots host;
    recorder_init(&events);
    snapshots_init(&host);

    /* Async: the copier copies a tenant that was written to; the status shows it. */
    GotryRouter *a = start_router(world, "replica-a", 4, GOTRY_DURABILITY_ASYNC, &events, &host);
    GotryTenantHandle *handle = OPEN(a, &tenant);
    HostLedger ledger;
    CHECK(host_open(&ledger, view_of(handle).root, HOST_ROLLBACK) == 0);
    snapshots_hold(&host, &ledger);
    TenantSeen seen = tenant_status(a, &tenant);
    CHECK(seen.tenants == 1 && seen.state == GOTRY_TENANT_STATE_SERVING && seen.epoch == 1 && seen.in_flight == 0 &&
          !seen.has_last_copy && seen.writes_since_copy == 0 && !seen.has_error);
    WRITE(a, &tenant, &ledger, "a");
    /* Told on the copier's thread once the copy is written, after the status took it. */
    SeenEvent copied;
    int copied_at = wait_event(&events, GOTRY_ROUTER_EVENT_KIND_COPIED, tenant.key, 0, 20000, &copied);
    CHECK(copied_at >= 0 && copied.epoch == 1 && copied.seq == 1 && copied.bytes_uploaded > 0 &&
          copied.error_status == GOTRY_STATUS_OK && !copied.on_main_thread);
    seen = tenant_status(a, &tenant);
    CHECK(seen.has_last_copy && seen.last_copy.epoch == 1 && seen.last_copy.seq == 1 &&
          seen.writes_since_copy == 0 && !seen.has_error);
    CHECK(snapshots_calls(&host) >= 1 && host.on_main_thread == 0 && host.bad_args == 0); /* the copier's thread */

    /* A snapshot that fails: a copy_failed event with the host's value, the error in the status. */
    snapshots_fail(&host, SQLITE_IOERR);
    WRITE(a, &tenant, &ledger, "b");
    SeenEvent failed;
    int failed_at = wait_event(&events, GOTRY_ROUTER_EVENT_KIND_COPY_FAILED, tenant.key, 0, 20000, &failed);
    CHECK(failed_at > copied_at);
    CHECK(failed.epoch == 1 && failed.error_status == GOTRY_STATUS_HOST_CALLBACK_FAILED &&
          failed.host_code == SQLITE_IOERR && !failed.on_main_thread);
    /* The status took the error before the event was told. */
    seen = tenant_status(a, &tenant);
    CHECK(seen.has_error && strncmp(seen.error, "HOST_CALLBACK", 13) == 0 && seen.writes_since_copy >= 1);
    snapshots_fail(&host, 0);
    CHECK(wait_event(&events, GOTRY_ROUTER_EVENT_KIND_COPIED, tenant.key, failed_at, 20000, &copied) >= 0);
    CHECK(copied.epoch == 1 && copied.seq > 1 && !copied.on_main_thread);
    seen = tenant_status(a, &tenant);
    CHECK(seen.last_copy.seq == copied.seq && seen.writes_since_copy == 0 && !seen.has_error);

    /* The final copy of the handoff goes through the snapshot as well; the handoff's answer
     * tells it, no event does. */
    int calls = snapshots_calls(&host);
    int before_handoff = event_count(&events);
    STATUS(gotry_router_handoff(a, tenant.key, strlen(tenant.key), 5000, &err), GOTRY_STATUS_OK);
    CHECK(snapshots_calls(&host) > calls);
    CHECK(EVENT_NOW(&events, GOTRY_ROUTER_EVENT_KIND_COPIED, tenant.key, before_handoff, NULL) < 0);
    snapshots_release(&host, &ledger);
    host_close(&ledger);
    gotry_tenant_handle_free(handle);
    close_router(a, 0);

    /* Strict: the call's finish waits for its copy, on the finishing thread, and fails with it. */
    GotryRouter *s = start_router(world, "replica-s", 4, GOTRY_DURABILITY_STRICT, &events, &host);
    handle = OPEN(s, &strict_tenant);
    CHECK(host_open(&ledger, view_of(handle).root, HOST_ROLLBACK) == 0);
    snapshots_hold(&host, &ledger);
    int on_main = host.on_main_thread;
    WRITE(s, &strict_tenant, &ledger, "x");
    seen = tenant_status(s, &strict_tenant);
    CHECK(seen.has_last_copy && seen.last_copy.epoch == 1 && seen.writes_since_copy == 0 && !seen.has_error);
    CHECK(host.on_main_thread == on_main + 1);
    snapshots_fail(&host, SQLITE_FULL);
    GotryRouterCall *call = BEGIN(s, &strict_tenant);
    CHECK(host_insert(ledger.db, "y") == 0);
    /* The handler ran: in doubt, with the snapshot function's return value readable. */
    STATUS(gotry_router_call_finish(call, &err), GOTRY_STATUS_CALL_IN_DOUBT);
    int32_t code = 0;
    STATUS(gotry_error_host_code(err, &code), GOTRY_STATUS_OK);
    CHECK(code == SQLITE_FULL);
    ERROR_IS(GOTRY_STATUS_CALL_IN_DOUBT, "GOTRY_TENANT_CALL_IN_DOUBT");
    seen = tenant_status(s, &strict_tenant);
    CHECK(seen.has_error && seen.in_flight == 0);
    snapshots_fail(&host, 0);
    WRITE(s, &strict_tenant, &ledger, "z");
    CHECK(!tenant_status(s, &strict_tenant).has_error);
    /* Each strict call's answer told of its copy: no event did. */
    CHECK(EVENT_NOW(&events, GOTRY_ROUTER_EVENT_KIND_COPIED, strict_tenant.key, 0, NULL) < 0);
    /* Close hands it off through the snapshot too. */
    calls = snapshots_calls(&host);
    GotryCloseReport *report = NULL;
    STATUS(gotry_router_close(s, 5000, &report), GOTRY_STATUS_OK);
    size_t len = 0;
    GotryCloseEntry entry;
    CHECK(gotry_close_report_len(report, &len) == GOTRY_STATUS_OK && len == 1);
    CHECK(gotry_close_report_get(report, 0, &entry) == GOTRY_STATUS_OK &&
          entry.outcome == GOTRY_CLOSE_OUTCOME_HANDED_OFF && entry.key_len == strlen(strict_tenant.key));
    gotry_close_report_free(report);
    CHECK(snapshots_calls(&host) > calls && host.bad_args == 0);
    snapshots_release(&host, &ledger);
    host_close(&ledger);
    gotry_router_free(s);

    /* The next replica has every acknowledged row and none of the refused call's. */
    GotryRouter *b = start_router(world, "replica-b", 4, GOTRY_DURABILITY_ASYNC, NULL, NULL);
    GotryTenantHandle *moved = OPEN(b, &strict_tenant);
    char path[2400];
    char rows[256];
    snprintf(path, sizeof path, "%s/gotry-state/gotry-state.db", view_of(moved).root);
    ledger_rows(path, rows, sizeof rows);
    CHECK(strcmp(rows, "x,y,z") == 0); /* y is in the ledger: its call was not acknowledged, not undone */
    gotry_tenant_handle_free(moved);
    gotry_tenant_handle_free(handle);
    close_router(b, 1);
    CHECK(events.bad == 0);
    snapshots_destroy(&host);
    recorder_destroy(&events);
}

static void close_then_closed(World *world) {
    GotryError *err = NULL;
    const Tenant t1 = tenant_named("router-test/close/idle");
    const Tenant t2 = tenant_named("router-test/close/busy");
    const Tenant t3 = tenant_named("router-test/close/late");
    Recorder events;
    recorder_init(&events);
    GotryRouter *a = start_router(world, "replica-a", 4, GOTRY_DURABILITY_ASYNC, &events, NULL);
    GotryTenantHandle *h1 = OPEN(a, &t1);
    GotryTenantHandle *h2 = OPEN(a, &t2);
    GotryRouterCall *running = BEGIN(a, &t2);

    GotryCloseReport *report = NULL;
    STATUS(gotry_router_close(a, 200, &report), GOTRY_STATUS_OK);
    size_t len = 0;
    GotryCloseEntry entry;
    STATUS(gotry_close_report_len(report, &len), GOTRY_STATUS_OK);
    CHECK(len == 2);
    STATUS(gotry_close_report_get(report, 0, &entry), GOTRY_STATUS_OK);
    CHECK(entry.outcome == GOTRY_CLOSE_OUTCOME_HANDED_OFF && entry.error == NULL &&
          entry.key_len == strlen(t1.key) && memcmp(entry.key, t1.key, entry.key_len) == 0);
    STATUS(gotry_close_report_get(report, 1, &entry), GOTRY_STATUS_OK);
    CHECK(entry.outcome == GOTRY_CLOSE_OUTCOME_TIMED_OUT && entry.error == NULL &&
          entry.key_len == strlen(t2.key) && memcmp(entry.key, t2.key, entry.key_len) == 0);
    /* The keeper's shutdown released the lease of the tenant that timed out. */
    const GotryShutdownReport *keeper = NULL;
    GotryShutdownEntry released;
    STATUS(gotry_close_report_keeper(report, &keeper), GOTRY_STATUS_OK);
    STATUS(gotry_shutdown_report_len(keeper, &len), GOTRY_STATUS_OK);
    CHECK(len == 1);
    STATUS(gotry_shutdown_report_get(keeper, 0, &released), GOTRY_STATUS_OK);
    CHECK(released.outcome == GOTRY_SHUTDOWN_OUTCOME_RELEASED && released.key_len == strlen(t2.key));
    gotry_close_report_free(report);
    CHECK(EVENT_NOW(&events, GOTRY_ROUTER_EVENT_KIND_CLOSED, t1.key, 0, NULL) >= 0);

    /* Closed: every open and every new call is refused, and the running call cannot be
     * acknowledged. */
    GotryTenantHandle *refused = NULL;
    FAILS(gotry_router_open(a, S(ORG), t3.tenant, strlen(t3.tenant), &refused, &err), GOTRY_STATUS_ROUTER_CLOSED,
          "GOTRY_TENANT_ROUTER_CLOSED");
    FAILS(gotry_router_open(a, S(ORG), t1.tenant, strlen(t1.tenant), &refused, &err), GOTRY_STATUS_ROUTER_CLOSED,
          "GOTRY_TENANT_ROUTER_CLOSED");
    CHECK(refused == NULL);
    GotryRouterCall *call = NULL;
    FAILS(gotry_router_begin(a, t2.key, strlen(t2.key), &call, &err), GOTRY_STATUS_ROUTER_CLOSED,
          "GOTRY_TENANT_ROUTER_CLOSED");
    /* The tenant that timed out is closed (its lease released by the keeper's shutdown):
     * its running call ran and cannot be acknowledged (in doubt), then it leaves. */
    TenantSeen seen = tenant_status(a, &t2);
    CHECK(seen.found && seen.in_flight == 1);
    FINISH(running, GOTRY_STATUS_CALL_IN_DOUBT);
    seen = tenant_status(a, &t2);
    CHECK(!seen.found);
    STATUS(gotry_router_close(a, 200, &report), GOTRY_STATUS_OK);
    STATUS(gotry_close_report_len(report, &len), GOTRY_STATUS_OK);
    CHECK(len == 0);
    STATUS(gotry_close_report_keeper(report, &keeper), GOTRY_STATUS_OK);
    STATUS(gotry_shutdown_report_len(keeper, &len), GOTRY_STATUS_OK);
    CHECK(len == 0);
    gotry_close_report_free(report);
    CHECK(events.bad == 0);
    gotry_tenant_handle_free(h1);
    gotry_tenant_handle_free(h2);
    gotry_router_free(a);
    recorder_destroy(&events);
}

static void free_with_a_call_held(World *world) {
    GotryError *err = NULL;
    const Tenant tenant = tenant_named("router-test/free");
    Recorder events;
    HostSnapshots host;
    recorder_init(&events);
    snapshots_init(&host);
    GotryRouter *s = start_router(world, "replica-f", 4, GOTRY_DURABILITY_STRICT, &events, &host);
    GotryTenantHandle *handle = OPEN(s, &tenant);
    HostLedger ledger;
    CHECK(host_open(&ledger, view_of(handle).root, HOST_ROLLBACK) == 0);
    snapshots_hold(&host, &ledger);
    GotryRouterCall *running = BEGIN(s, &tenant);
    CHECK(host_insert(ledger.db, "after-free") == 0);
    gotry_router_free(s);
    /* The call outlives its router; its copy may not call the host's snapshot any more. */
    int calls = snapshots_calls(&host);
    int seen = event_count(&events);
    /* The handler ran, so the call is in doubt; its cause is the refused host callback. */
    STATUS(gotry_router_call_finish(running, &err), GOTRY_STATUS_CALL_IN_DOUBT);
    int32_t code = 0;
    STATUS(gotry_error_host_code(err, &code), GOTRY_STATUS_NO_VALUE);
    CHECK(message_has(err, "freed") && message_has(err, "HOST_CALLBACK"));
    ERROR_IS(GOTRY_STATUS_CALL_IN_DOUBT, "GOTRY_TENANT_CALL_IN_DOUBT");
    CHECK(snapshots_calls(&host) == calls && event_count(&events) == seen);
    CHECK(view_of(handle).epoch == 1);
    snapshots_release(&host, &ledger);
    host_close(&ledger);
    gotry_tenant_handle_free(handle);
    snapshots_destroy(&host);
    recorder_destroy(&events);
}

/* The host's check of a restored root: counts its calls, refuses every copy when told to. */
typedef struct {
    int calls;
    int on_main_thread;
    int refuse;
    pthread_t main_thread;
} Verify;

static bool verify_root(void *user_data, const char *root, size_t root_len) {
    Verify *verify = (Verify *)user_data;
    verify->calls++;
    verify->on_main_thread += pthread_equal(pthread_self(), verify->main_thread);
    char path[2400];
    snprintf(path, sizeof path, "%.*s/gotry-state/gotry-state.db", (int)root_len, root);
    return !verify->refuse && root[root_len] == '\0' && exists(path);
}

/* A router without threads on the store's manual clock: nothing is copied or renewed but by
 * a tick, a written tenant is copied by the first tick an interval after its open, and a
 * lease the clock let run out is lost at the next tick, its events told on this thread. */
static void ticks_on_a_manual_clock(World *world) {
    GotryError *err = NULL;
    const Tenant tenant = tenant_named("router-test/tick");
    Recorder events;
    recorder_init(&events);
    GotryRouterOptions options;
    STATUS(gotry_router_options_default(&options), GOTRY_STATUS_OK);
    CHECK(!options.without_thread);
    options.capacity = 4;
    options.copy_interval_ms = 1000;
    options.clock = world->wall;
    options.on_event = record_event;
    options.event_user_data = &events;
    options.without_thread = true;
    char state_root[1100];
    state_root_of(world, "replica-tick", state_root, sizeof state_root);
    GotryRouter *router = NULL;
    STATUS(gotry_router_start(world->leases, world->durable, state_root, strlen(state_root), S("replica-tick"), TTL_MS,
                              MARGIN_MS, &options, &router, &err),
           GOTRY_STATUS_OK);
    int64_t opened_at = 0, now = 0;
    STATUS(gotry_manual_clock_get(world->wall, &opened_at), GOTRY_STATUS_OK);
    GotryTenantHandle *handle = OPEN(router, &tenant);
    GotryRouterCall *call = BEGIN(router, &tenant);
    const GotryTenantHandle *in_call = NULL;
    CHECK(gotry_router_call_handle(call, &in_call) == GOTRY_STATUS_OK);
    GotryTenantView root = view_of(in_call);
    char path[1300];
    snprintf(path, sizeof path, "%.*s/notes.txt", (int)root.root_len, root.root);
    FILE *file = fopen(path, "w");
    CHECK(file != NULL);
    if (file != NULL) {
        fputs("one\n", file);
        fclose(file);
    }
    FINISH(call, GOTRY_STATUS_OK);

    GotryRouterTickView view = tick_view(router, NULL);
    CHECK(view.len == 0 && view.keeper.batches == 0 && view.has_next_due &&
          view.next_due_ms == (double)(opened_at + 1000));
    STATUS(gotry_manual_clock_advance(world->wall, 999, &now, &err), GOTRY_STATUS_OK);
    CHECK(tick_view(router, NULL).len == 0);
    CHECK(tenant_status(router, &tenant).writes_since_copy == 1);
    STATUS(gotry_manual_clock_advance(world->wall, 1, &now, &err), GOTRY_STATUS_OK);
    GotryRouterTickReport *report = NULL;
    view = tick_view(router, &report);
    CHECK(view.len == 1 && view.keeper.renewed == 1 && view.keeper.lost == 0);
    GotryRouterTickEntry entry;
    STATUS(gotry_router_tick_report_get(report, 0, &entry), GOTRY_STATUS_OK);
    CHECK(entry.outcome == GOTRY_ROUTER_TICK_OUTCOME_COPIED && entry.key_len == strlen(tenant.key) &&
          memcmp(entry.key, tenant.key, entry.key_len) == 0 && entry.key[entry.key_len] == '\0');
    STATUS(gotry_router_tick_report_get(report, 1, &entry), GOTRY_STATUS_INVALID_ARGUMENT);
    STATUS(gotry_router_tick_report_get(NULL, 0, &entry), GOTRY_STATUS_NULL_ARGUMENT);
    STATUS(gotry_router_tick_report_get(report, 0, NULL), GOTRY_STATUS_NULL_ARGUMENT);
    STATUS(gotry_router_tick_report_view(NULL, &view), GOTRY_STATUS_NULL_ARGUMENT);
    STATUS(gotry_router_tick_report_view(report, NULL), GOTRY_STATUS_NULL_ARGUMENT);
    gotry_router_tick_report_free(report);
    report = NULL;
    gotry_router_tick_report_free(NULL);
    TenantSeen seen = tenant_status(router, &tenant);
    CHECK(seen.has_last_copy && seen.writes_since_copy == 0 && seen.lag_ms == 0);
    /* The copy was told on the ticking thread, before the tick returned. */
    SeenEvent copied;
    CHECK(EVENT_NOW(&events, GOTRY_ROUTER_EVENT_KIND_COPIED, tenant.key, 0, &copied) == 0);
    CHECK(event_count(&events) == 1 && copied.on_main_thread && copied.seq == seen.last_copy.seq);

    /* No tick for a TTL: the store lets the lease run out, and the next tick finds it lost. */
    STATUS(gotry_manual_clock_advance(world->wall, TTL_MS + 1, &now, &err), GOTRY_STATUS_OK);
    CHECK(event_count(&events) == 1);
    view = tick_view(router, NULL);
    CHECK(view.keeper.lost == 1 && view.keeper.renewed == 0 && view.len == 0 && !view.has_next_due);
    SeenEvent seen_event;
    CHECK(EVENT_NOW(&events, GOTRY_ROUTER_EVENT_KIND_LOST, tenant.key, 0, &seen_event) >= 0);
    CHECK(seen_event.on_main_thread);
    CHECK(EVENT_NOW(&events, GOTRY_ROUTER_EVENT_KIND_CLOSED, tenant.key, 0, &seen_event) >= 0);
    CHECK(seen_event.on_main_thread && events.bad == 0);
    CHECK(tenant_status(router, &tenant).tenants == 0);

    FAILS_NULL(gotry_router_tick(NULL, &report, &err));
    FAILS_NULL(gotry_router_tick(router, NULL, &err));
    GotryCloseReport *closed = NULL;
    STATUS(gotry_router_close(router, 0, &closed), GOTRY_STATUS_OK);
    gotry_close_report_free(closed);
    FAILS(gotry_router_tick(router, &report, &err), GOTRY_STATUS_ROUTER_CLOSED, "GOTRY_TENANT_ROUTER_CLOSED");
    CHECK(report == NULL);
    gotry_tenant_handle_free(handle);
    gotry_router_free(router);
    recorder_destroy(&events);
}

static void verify_and_clock(World *world) {
    GotryError *err = NULL;
    const Tenant tenant = tenant_named("router-test/verify");
    HostSnapshots host;
    snapshots_init(&host);
    GotryRouter *a = start_router(world, "replica-a", 4, GOTRY_DURABILITY_STRICT, NULL, &host);
    GotryTenantHandle *handle = OPEN(a, &tenant);
    HostLedger ledger;
    CHECK(host_open(&ledger, view_of(handle).root, HOST_ROLLBACK) == 0);
    snapshots_hold(&host, &ledger);
    WRITE(a, &tenant, &ledger, "kept");
    STATUS(gotry_router_handoff(a, tenant.key, strlen(tenant.key), 5000, &err), GOTRY_STATUS_OK);
    snapshots_release(&host, &ledger);
    host_close(&ledger);
    gotry_tenant_handle_free(handle);
    close_router(a, 0);

    /* B's check refuses every copy: RESTORE_INVALID, each copy skipped as `fold`, and the
     * lease given back at once. B's holders' clock is a manual one, freed after the start. */
    Verify verify;
    memset(&verify, 0, sizeof verify);
    verify.refuse = 1;
    verify.main_thread = pthread_self();
    GotryManualClock *clock = NULL;
    STATUS(gotry_manual_clock_new(0, &clock), GOTRY_STATUS_OK);
    GotryRouterOptions options;
    STATUS(gotry_router_options_default(&options), GOTRY_STATUS_OK);
    options.verify = verify_root;
    options.verify_user_data = &verify;
    options.clock = clock;
    char state_root[1100];
    state_root_of(world, "replica-b", state_root, sizeof state_root);
    GotryRouter *b = NULL;
    STATUS(gotry_router_start(world->leases, world->durable, state_root, strlen(state_root), S("replica-b"), TTL_MS,
                              MARGIN_MS, &options, &b, &err),
           GOTRY_STATUS_OK);
    gotry_manual_clock_free(clock);
    GotryTenantHandle *refused = NULL;
    STATUS(gotry_router_open(b, S(ORG), tenant.tenant, strlen(tenant.tenant), &refused, &err),
           GOTRY_STATUS_RESTORE_INVALID);
    size_t skipped = 0;
    GotrySkippedCopy copy;
    STATUS(gotry_error_skipped_count(err, &skipped), GOTRY_STATUS_OK);
    CHECK(skipped >= 1);
    STATUS(gotry_error_skipped(err, 0, &copy), GOTRY_STATUS_OK);
    CHECK(copy.epoch == 1 && copy.reason == GOTRY_SKIP_REASON_FOLD);
    ERROR_IS(GOTRY_STATUS_RESTORE_INVALID, "GOTRY_TENANT_RESTORE_INVALID");
    CHECK(refused == NULL && verify.calls == (int)skipped && verify.on_main_thread == verify.calls);
    CHECK(tenant_status(b, &tenant).tenants == 0);
    GotryRecord *record = NULL;
    GotryRecordView record_view;
    STATUS(gotry_store_read(world->leases, tenant.key, strlen(tenant.key), &record, &err), GOTRY_STATUS_OK);
    STATUS(gotry_record_view(record, &record_view), GOTRY_STATUS_OK);
    CHECK(record_view.epoch == 2 && record_view.owner_len == 9 && memcmp(record_view.owner, "replica-b", 9) == 0);
    CHECK(record_view.lease_until_ms <= 1000000); /* released: expired at once */
    gotry_record_free(record);

    /* Accepted, it restores; the lease's fence is on B's manual clock, which has not moved. */
    verify.refuse = 0;
    GotryTenantHandle *moved = OPEN(b, &tenant);
    CHECK(view_of(moved).epoch == 3 && view_of(moved).restored && view_of(moved).restored_from.epoch == 1);
    CHECK(verify.calls == (int)skipped + 1);
    GotryLease *lease = NULL;
    double remaining = 0;
    STATUS(gotry_tenant_handle_lease(moved, &lease), GOTRY_STATUS_OK);
    STATUS(gotry_lease_remaining_ms(lease, &remaining, &err), GOTRY_STATUS_OK);
    CHECK(remaining == (double)(TTL_MS - MARGIN_MS));
    gotry_lease_free(lease);
    char path[2400];
    char rows[256];
    snprintf(path, sizeof path, "%s/gotry-state/gotry-state.db", view_of(moved).root);
    ledger_rows(path, rows, sizeof rows);
    CHECK(strcmp(rows, "kept") == 0);
    gotry_tenant_handle_free(moved);
    close_router(b, 1);
    snapshots_destroy(&host);
}

#ifdef __cplusplus
/* The same door from C++: every handle owned by a std::unique_ptr, a lambda as the callback. */
static void from_cpp(World *world) {
    struct Free {
        void operator()(GotryRouter *router) const { gotry_router_free(router); }
        void operator()(GotryTenantHandle *handle) const { gotry_tenant_handle_free(handle); }
        void operator()(GotryRouterCall *call) const { gotry_router_call_free(call); }
        void operator()(GotryCloseReport *report) const { gotry_close_report_free(report); }
    };
    static int closed;
    closed = 0;
    GotryRouterOptions options;
    CHECK(gotry_router_options_default(&options) == GOTRY_STATUS_OK);
    options.capacity = 2;
    options.on_event = [](void *user_data, const GotryRouterEvent *event) {
        if (event->kind == GOTRY_ROUTER_EVENT_KIND_CLOSED) ++*static_cast<int *>(user_data);
    };
    options.event_user_data = &closed;
    char state_root[1100];
    state_root_of(world, "replica-cpp", state_root, sizeof state_root);
    GotryRouter *raw = nullptr;
    CHECK(gotry_router_start(world->leases, world->durable, state_root, strlen(state_root), S("replica-cpp"), TTL_MS,
                             MARGIN_MS, &options, &raw, nullptr) == GOTRY_STATUS_OK);
    std::unique_ptr<GotryRouter, Free> router(raw);
    const Tenant tenant = tenant_named("router-test/cpp");
    GotryTenantHandle *raw_handle = nullptr;
    CHECK(gotry_router_open(router.get(), S(ORG), tenant.tenant, strlen(tenant.tenant), &raw_handle, nullptr) ==
          GOTRY_STATUS_OK);
    std::unique_ptr<GotryTenantHandle, Free> handle(raw_handle);
    GotryRouterCall *raw_call = nullptr;
    CHECK(gotry_router_begin(router.get(), tenant.key, strlen(tenant.key), &raw_call, nullptr) == GOTRY_STATUS_OK);
    std::unique_ptr<GotryRouterCall, Free> call(raw_call);
    CHECK(gotry_router_call_finish(call.release(), nullptr) == GOTRY_STATUS_OK);
    {
        /* Abandoned by its owner going out of scope. */
        GotryRouterCall *abandoned = nullptr;
        CHECK(gotry_router_begin(router.get(), tenant.key, strlen(tenant.key), &abandoned, nullptr) ==
              GOTRY_STATUS_OK);
        std::unique_ptr<GotryRouterCall, Free> owned(abandoned);
    }
    GotryCloseReport *raw_report = nullptr;
    CHECK(gotry_router_close(router.get(), 5000, &raw_report) == GOTRY_STATUS_OK);
    std::unique_ptr<GotryCloseReport, Free> report(raw_report);
    size_t len = 0;
    CHECK(gotry_close_report_len(report.get(), &len) == GOTRY_STATUS_OK && len == 1);
    CHECK(closed == 1);
}
#endif

static void in_subdir(const char *base, const char *name, void (*scenario)(World *)) {
    World world;
    world_open(&world, base, name);
    scenario(&world);
    world_close(&world);
}

/* A strict router writes a copy per acknowledged write and keeps `keep_copies` of each
 * tenant: the store holds a bounded number of them. The default is the core's, never 0. */
static void keeps_a_bounded_number_of_copies(World *world) {
    GotryError *err = NULL;
    const Tenant tenant = tenant_named("router-test/keep");
    GotryRouterOptions options;
    STATUS(gotry_router_options_default(&options), GOTRY_STATUS_OK);
    CHECK(options.keep_copies > 0);
    HostSnapshots host;
    snapshots_init(&host);
    options.durability = GOTRY_DURABILITY_STRICT;
    options.keep_copies = 2;
    options.snapshot = host_snapshot;
    options.snapshot_user_data = &host;
    char state_root[1100];
    state_root_of(world, "replica-k", state_root, sizeof state_root);
    GotryRouter *router = NULL;
    STATUS(gotry_router_start(world->leases, world->durable, state_root, strlen(state_root), S("replica-k"), TTL_MS,
                              MARGIN_MS, &options, &router, &err),
           GOTRY_STATUS_OK);
    GotryTenantHandle *handle = OPEN(router, &tenant);
    HostLedger ledger;
    CHECK(host_open(&ledger, view_of(handle).root, HOST_ROLLBACK) == 0);
    snapshots_hold(&host, &ledger);
    GotryEpochCopies *copies = NULL;
    STATUS(gotry_epoch_copies_new(world->durable, &copies), GOTRY_STATUS_OK);
    size_t most = 0;
    for (int n = 0; n < 9; n++) {
        WRITE(router, &tenant, &ledger, "row");
        GotryCopyList *list = NULL;
        size_t len = 0, complete = 0;
        STATUS(gotry_epoch_copies_list(copies, tenant.key, strlen(tenant.key), &list, &err), GOTRY_STATUS_OK);
        STATUS(gotry_copy_list_len(list, &len), GOTRY_STATUS_OK);
        for (size_t i = 0; i < len; i++) {
            GotryCopyListing listing;
            STATUS(gotry_copy_list_get(list, i, &listing), GOTRY_STATUS_OK);
            complete += listing.complete ? 1 : 0;
        }
        gotry_copy_list_free(list);
        most = complete > most ? complete : most;
    }
    /* Two after a collection, two more until the next. */
    CHECK(most >= 2 && most <= 4);
    gotry_epoch_copies_free(copies);
    snapshots_release(&host, &ledger);
    host_close(&ledger);
    gotry_tenant_handle_free(handle);
    close_router(router, 1);
}

int main(int argc, char **argv) {
    if (argc != 2 || argv[1][0] != '/' || strlen(argv[1]) > 800) {
        fprintf(stderr, "usage: %s ABSOLUTE_SCRATCH_DIR\n", argv[0]);
        return 2;
    }
    options_and_names();
    in_subdir(argv[1], "arguments", arguments);
    in_subdir(argv[1], "capacity", capacity_and_lease_held);
    in_subdir(argv[1], "handoff", handoff_carries_data);
    in_subdir(argv[1], "draining", draining_and_drain_timeout);
    in_subdir(argv[1], "lost", lost_lease);
    in_subdir(argv[1], "copies", copies_and_status);
    in_subdir(argv[1], "close", close_then_closed);
    in_subdir(argv[1], "free", free_with_a_call_held);
    in_subdir(argv[1], "verify", verify_and_clock);
    in_subdir(argv[1], "tick", ticks_on_a_manual_clock);
    in_subdir(argv[1], "keep", keeps_a_bounded_number_of_copies);
#ifdef __cplusplus
    in_subdir(argv[1], "cpp", from_cpp);
#endif
    printf("router_test (%s): %d checks, %d failed\n", LANGUAGE, checks, failures);
    return failures == 0 ? 0 : 1;
}
