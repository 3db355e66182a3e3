/*
 * The shared router scenarios of tests/vectors/router-scenarios.json, replayed through the C
 * door as every door replays them (the file's comment says what world they assume). The
 * tables come from router_vectors_to_c.py. A call held in flight is a GotryRouterCall left
 * unfinished until its `end` step; a handoff (or a close) begun in the background runs on a
 * thread, and the step returns once the router's `draining` event for the tenant came.
 *
 * Usage: router_vectors_test SCRATCH_DIR   (an existing, empty, writable directory)
 * Link with -pthread.
 */
#define _POSIX_C_SOURCE 200809L

#include <pthread.h>

#include "test_common.h"

typedef struct {
    const char *tenant;
    const char *state;
    int64_t epoch;
    uint64_t in_flight;
    uint64_t writes_since_copy;
} RvRow;

typedef struct {
    const char *op;
    const char *replica;
    const char *tenant;
    const char *name; /* the call's, the handoff's or the close's */
    int64_t number;   /* capacity, timeout_ms or ms */
    const char *text; /* durability or line */
    const char *error; /* the expected code; NULL when the step must succeed */
    int64_t epoch;     /* the expected epoch of an open; -1 when none */
    const RvRow *rows;
    size_t row_count;
    const char *const *lines;
    size_t line_count;
    const char *const *handed_off;
    size_t handed_off_count;
    const char *const *timed_out;
    size_t timed_out_count;
} RvStep;

typedef struct {
    const char *name;
    const RvStep *steps;
    size_t count;
} RvScenario;

#include "router_vectors.inc"

enum { MAX_NAMED = 8 };

/* The `draining` events one router told, by key: a step that begins a drain in the
 * background returns once its drain was told, so the next step may assume it has begun. */
typedef struct {
    pthread_mutex_t lock;
    pthread_cond_t told;
    char keys[MAX_NAMED][GOTRY_LEASE_KEY_BUFFER_LEN];
    int counts[MAX_NAMED];
} Drains;

typedef struct {
    const char *name;
    GotryRouter *router;
    Drains drains;
} Replica;

typedef struct {
    const char *name;
    GotryRouterCall *call;
} HeldCall;

typedef struct {
    const char *name;
    const GotryRouter *router;
    char key[GOTRY_LEASE_KEY_BUFFER_LEN];
    uint64_t timeout_ms;
    pthread_t thread;
    GotryStatus status;
    char code[64];
} Handoff;

typedef struct {
    const char *name;
    GotryRouter *router;
    uint64_t timeout_ms;
    pthread_t thread;
    GotryStatus status;
    GotryCloseReport *report;
} Close;

typedef struct {
    char dir[1100];
    GotryManualClock *clock;
    GotryStore *leases;
    GotryDurableStore *durable;
    Replica replicas[MAX_NAMED];
    HeldCall calls[MAX_NAMED];
    Handoff handoffs[MAX_NAMED];
    Close closes[MAX_NAMED];
} Site;

static const char *scenario_name;
static size_t step_index;

static void mismatch(const char *what, const char *got, const char *want) {
    failures++;
    fprintf(stderr, "%s, step %zu: %s is %s, expected %s\n", scenario_name, step_index, what, got, want);
}

static void expect_text(const char *what, const char *got, const char *want) {
    checks++;
    if ((got == NULL) != (want == NULL) || (got != NULL && strcmp(got, want) != 0))
        mismatch(what, got ? got : "(none)", want ? want : "(none)");
}

static void expect_number(const char *what, long long got, long long want) {
    char a[32], b[32];
    snprintf(a, sizeof a, "%lld", got);
    snprintf(b, sizeof b, "%lld", want);
    expect_text(what, a, b);
}

/* The registry code of a failed call (NULL for success), and the error freed. */
static void expect_outcome(GotryStatus status, GotryError **err, const RvStep *step) {
    const char *code = NULL;
    if (status != GOTRY_STATUS_OK && *err != NULL) gotry_error_code(*err, &code);
    if (status != GOTRY_STATUS_OK && code == NULL) code = status_name(status);
    expect_text("the outcome", code, step->error);
    gotry_error_free(*err);
    *err = NULL;
}

static GotryRouter *router_of(Site *site, const char *name) {
    for (int i = 0; i < MAX_NAMED; i++)
        if (site->replicas[i].name != NULL && strcmp(site->replicas[i].name, name) == 0) return site->replicas[i].router;
    fprintf(stderr, "%s: no replica %s\n", scenario_name, name);
    exit(2);
}

static Drains *drains_of(Site *site, const char *name) {
    for (int i = 0; i < MAX_NAMED; i++)
        if (site->replicas[i].name != NULL && strcmp(site->replicas[i].name, name) == 0) return &site->replicas[i].drains;
    fprintf(stderr, "%s: no replica %s\n", scenario_name, name);
    exit(2);
}

static void key_of(const char *tenant, char *out) {
    CHECK(gotry_lease_key_for(S(RV_ORGANIZATION), tenant, strlen(tenant), out, GOTRY_LEASE_KEY_BUFFER_LEN, NULL) ==
          GOTRY_STATUS_OK);
}

static void root_of(Site *site, const char *replica, const char *tenant, char *out, size_t capacity) {
    char state_root[1200];
    size_t len = 0;
    snprintf(state_root, sizeof state_root, "%s/%s", site->dir, replica);
    CHECK(gotry_tenant_root_for(state_root, strlen(state_root), S(RV_ORGANIZATION), tenant, strlen(tenant), out,
                                capacity, &len, NULL) == GOTRY_STATUS_OK);
}

static void append_line(const GotryTenantHandle *handle, const char *line) {
    GotryTenantView view;
    char path[2048];
    CHECK(gotry_tenant_handle_view(handle, &view) == GOTRY_STATUS_OK);
    snprintf(path, sizeof path, "%.*s", (int)view.root_len, view.root);
    CHECK(make_dirs(path) == 0);
    snprintf(path, sizeof path, "%.*s/lines.txt", (int)view.root_len, view.root);
    FILE *file = fopen(path, "a");
    CHECK(file != NULL);
    if (file != NULL) {
        fprintf(file, "%s\n", line);
        fclose(file);
    }
}

static void *run_handoff(void *arg) {
    Handoff *handoff = (Handoff *)arg;
    GotryError *err = NULL;
    handoff->status = gotry_router_handoff(handoff->router, handoff->key, strlen(handoff->key), handoff->timeout_ms, &err);
    const char *code = NULL;
    if (err != NULL && gotry_error_code(err, &code) == GOTRY_STATUS_OK)
        snprintf(handoff->code, sizeof handoff->code, "%s", code);
    gotry_error_free(err);
    return NULL;
}

static void *run_close(void *arg) {
    Close *closing = (Close *)arg;
    closing->status = gotry_router_close(closing->router, closing->timeout_ms, &closing->report);
    return NULL;
}

/* Ready to be told; before the router that tells it starts. */
static void drains_init(Drains *drains) {
    pthread_condattr_t attr;
    memset(drains, 0, sizeof *drains);
    CHECK(pthread_mutex_init(&drains->lock, NULL) == 0);
    CHECK(pthread_condattr_init(&attr) == 0 && pthread_condattr_setclock(&attr, CLOCK_MONOTONIC) == 0);
    CHECK(pthread_cond_init(&drains->told, &attr) == 0);
    pthread_condattr_destroy(&attr);
}

/* After the router that told it was freed. */
static void drains_destroy(Drains *drains) {
    pthread_cond_destroy(&drains->told);
    pthread_mutex_destroy(&drains->lock);
}

/* The slot of `key`, taken if it has none yet; called with the lock held. */
static int drains_slot(Drains *drains, const char *key, size_t key_len) {
    for (int i = 0; i < MAX_NAMED; i++) {
        if (drains->keys[i][0] == '\0') memcpy(drains->keys[i], key, key_len);
        if (strlen(drains->keys[i]) == key_len && memcmp(drains->keys[i], key, key_len) == 0) return i;
    }
    fprintf(stderr, "%s: more than %d tenants drained\n", scenario_name, MAX_NAMED);
    exit(2);
}

static void record_drain(void *user_data, const GotryRouterEvent *event) {
    Drains *drains = (Drains *)user_data;
    if (event->kind != GOTRY_ROUTER_EVENT_KIND_DRAINING) return;
    pthread_mutex_lock(&drains->lock);
    drains->counts[drains_slot(drains, event->key, event->key_len)]++;
    pthread_cond_broadcast(&drains->told);
    pthread_mutex_unlock(&drains->lock);
}

static int drains_told(Drains *drains, const char *key) {
    pthread_mutex_lock(&drains->lock);
    int told = drains->counts[drains_slot(drains, key, strlen(key))];
    pthread_mutex_unlock(&drains->lock);
    return told;
}

/* Returns once a drain of `key` is told beyond the `before` told already. The bound is no
 * time limit on the router: it keeps a replay that would hang from hanging. */
static void until_told(Drains *drains, const char *key, int before) {
    struct timespec deadline;
    int waited = 0;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_sec += 30;
    pthread_mutex_lock(&drains->lock);
    int slot = drains_slot(drains, key, strlen(key));
    while (drains->counts[slot] <= before && waited == 0) waited = pthread_cond_timedwait(&drains->told, &drains->lock, &deadline);
    int told = drains->counts[slot] > before;
    pthread_mutex_unlock(&drains->lock);
    if (!told) mismatch("the draining event", "not told within 30 s", "told");
}

/* Compares a close report with the step's lists, and frees it. */
static void expect_close_report(GotryCloseReport *report, const RvStep *s) {
    size_t len = 0, handed = 0, timed = 0;
    CHECK(gotry_close_report_len(report, &len) == GOTRY_STATUS_OK);
    for (size_t i = 0; i < len; i++) {
        GotryCloseEntry entry;
        CHECK(gotry_close_report_get(report, i, &entry) == GOTRY_STATUS_OK);
        char got[GOTRY_LEASE_KEY_BUFFER_LEN];
        snprintf(got, sizeof got, "%.*s", (int)entry.key_len, entry.key);
        if (entry.outcome == GOTRY_CLOSE_OUTCOME_HANDED_OFF) {
            expect_text("a tenant handed off", got, handed < s->handed_off_count ? s->handed_off[handed] : NULL);
            handed++;
        } else if (entry.outcome == GOTRY_CLOSE_OUTCOME_TIMED_OUT) {
            expect_text("a tenant timed out", got, timed < s->timed_out_count ? s->timed_out[timed] : NULL);
            timed++;
        } else {
            mismatch("a close entry", got, "handed off or timed out");
        }
    }
    expect_number("tenants handed off", (long long)handed, (long long)s->handed_off_count);
    expect_number("tenants timed out", (long long)timed, (long long)s->timed_out_count);
    gotry_close_report_free(report);
}

static void step(Site *site, const RvStep *s) {
    GotryError *err = NULL;
    char key[GOTRY_LEASE_KEY_BUFFER_LEN] = "";
    if (s->tenant != NULL) key_of(s->tenant, key);
    if (strcmp(s->op, "start") == 0) {
        GotryRouterOptions options;
        char state_root[1200];
        int slot = 0;
        while (site->replicas[slot].name != NULL) slot++;
        snprintf(state_root, sizeof state_root, "%s/%s", site->dir, s->replica);
        CHECK(gotry_router_options_default(&options) == GOTRY_STATUS_OK);
        options.capacity = (size_t)s->number;
        options.copy_interval_ms = RV_COPY_INTERVAL_MS;
        options.durability = strcmp(s->text, "strict") == 0 ? GOTRY_DURABILITY_STRICT : GOTRY_DURABILITY_ASYNC;
        options.clock = site->clock;
        drains_init(&site->replicas[slot].drains);
        options.on_event = record_drain;
        options.event_user_data = &site->replicas[slot].drains;
        site->replicas[slot].name = s->replica;
        STATUS(gotry_router_start(site->leases, site->durable, state_root, strlen(state_root), s->replica,
                                  strlen(s->replica), RV_TTL_MS, RV_MARGIN_MS, &options, &site->replicas[slot].router,
                                  &err),
               GOTRY_STATUS_OK);
        gotry_error_free(err);
    } else if (strcmp(s->op, "open") == 0) {
        GotryTenantHandle *handle = NULL;
        GotryStatus status =
            gotry_router_open(router_of(site, s->replica), S(RV_ORGANIZATION), s->tenant, strlen(s->tenant), &handle, &err);
        if (status == GOTRY_STATUS_OK) {
            GotryTenantView view;
            CHECK(gotry_tenant_handle_view(handle, &view) == GOTRY_STATUS_OK);
            expect_number("the epoch", view.epoch, s->epoch);
        }
        expect_outcome(status, &err, s);
        gotry_tenant_handle_free(handle);
    } else if (strcmp(s->op, "run") == 0 || strcmp(s->op, "begin") == 0) {
        GotryRouterCall *call = NULL;
        GotryStatus status = gotry_router_begin(router_of(site, s->replica), key, strlen(key), &call, &err);
        if (status == GOTRY_STATUS_OK) {
            const GotryTenantHandle *handle = NULL;
            CHECK(gotry_router_call_handle(call, &handle) == GOTRY_STATUS_OK);
            append_line(handle, s->text != NULL ? s->text : s->name);
            if (strcmp(s->op, "run") == 0) {
                status = gotry_router_call_finish(call, &err);
            } else {
                int slot = 0;
                while (site->calls[slot].name != NULL) slot++;
                site->calls[slot].name = s->name;
                site->calls[slot].call = call;
            }
        }
        expect_outcome(status, &err, s);
    } else if (strcmp(s->op, "end") == 0) {
        for (int i = 0; i < MAX_NAMED; i++) {
            if (site->calls[i].name != NULL && strcmp(site->calls[i].name, s->name) == 0) {
                GotryStatus status = gotry_router_call_finish(site->calls[i].call, &err);
                expect_outcome(status, &err, s);
                site->calls[i].name = NULL;
                site->calls[i].call = NULL;
            }
        }
    } else if (strcmp(s->op, "handoff") == 0) {
        GotryStatus status = gotry_router_handoff(router_of(site, s->replica), key, strlen(key), (uint64_t)s->number, &err);
        expect_outcome(status, &err, s);
    } else if (strcmp(s->op, "handoff_start") == 0) {
        int slot = 0;
        while (site->handoffs[slot].name != NULL) slot++;
        Handoff *handoff = &site->handoffs[slot];
        handoff->name = s->name;
        handoff->router = router_of(site, s->replica);
        memcpy(handoff->key, key, sizeof key);
        handoff->timeout_ms = (uint64_t)s->number;
        Drains *drains = drains_of(site, s->replica);
        int before = drains_told(drains, key);
        CHECK(pthread_create(&handoff->thread, NULL, run_handoff, handoff) == 0);
        until_told(drains, key, before);
    } else if (strcmp(s->op, "handoff_wait") == 0) {
        for (int i = 0; i < MAX_NAMED; i++) {
            Handoff *handoff = &site->handoffs[i];
            if (handoff->name != NULL && strcmp(handoff->name, s->name) == 0) {
                CHECK(pthread_join(handoff->thread, NULL) == 0);
                expect_text("the handoff's outcome", handoff->status == GOTRY_STATUS_OK ? NULL : handoff->code, s->error);
                handoff->name = NULL;
            }
        }
    } else if (strcmp(s->op, "close") == 0) {
        GotryCloseReport *report = NULL;
        CHECK(gotry_router_close(router_of(site, s->replica), (uint64_t)s->number, &report) == GOTRY_STATUS_OK);
        expect_close_report(report, s);
    } else if (strcmp(s->op, "close_start") == 0) {
        int slot = 0;
        while (site->closes[slot].name != NULL) slot++;
        Close *closing = &site->closes[slot];
        closing->name = s->name;
        closing->router = router_of(site, s->replica);
        closing->timeout_ms = (uint64_t)s->number;
        closing->report = NULL;
        Drains *drains = drains_of(site, s->replica);
        int before = drains_told(drains, key);
        CHECK(pthread_create(&closing->thread, NULL, run_close, closing) == 0);
        until_told(drains, key, before);
    } else if (strcmp(s->op, "close_wait") == 0) {
        for (int i = 0; i < MAX_NAMED; i++) {
            Close *closing = &site->closes[i];
            if (closing->name != NULL && strcmp(closing->name, s->name) == 0) {
                CHECK(pthread_join(closing->thread, NULL) == 0);
                CHECK(closing->status == GOTRY_STATUS_OK);
                expect_close_report(closing->report, s);
                closing->name = NULL;
            }
        }
    } else if (strcmp(s->op, "status") == 0) {
        GotryTenantStatusList *list = NULL;
        size_t len = 0;
        CHECK(gotry_router_status(router_of(site, s->replica), &list) == GOTRY_STATUS_OK);
        CHECK(gotry_tenant_status_list_len(list, &len) == GOTRY_STATUS_OK);
        expect_number("tenants listed", (long long)len, (long long)s->row_count);
        for (size_t i = 0; i < len && i < s->row_count; i++) {
            GotryTenantStatusView view;
            const RvRow *row = &s->rows[i];
            char want[GOTRY_LEASE_KEY_BUFFER_LEN], got[GOTRY_LEASE_KEY_BUFFER_LEN];
            CHECK(gotry_tenant_status_list_get(list, i, &view) == GOTRY_STATUS_OK);
            key_of(row->tenant, want);
            snprintf(got, sizeof got, "%.*s", (int)view.key_len, view.key);
            expect_text("a tenant's key", got, want);
            expect_text("a tenant's state", gotry_tenant_state_name(view.state), row->state);
            expect_number("a tenant's epoch", view.epoch, row->epoch);
            expect_number("a tenant's calls in flight", (long long)view.in_flight, (long long)row->in_flight);
            expect_number("a tenant's writes since its copy", (long long)view.writes_since_copy,
                          (long long)row->writes_since_copy);
        }
        gotry_tenant_status_list_free(list);
    } else if (strcmp(s->op, "lines") == 0) {
        char path[2048];
        root_of(site, s->replica, s->tenant, path, sizeof path - 16);
        strcat(path, "/lines.txt");
        FILE *file = fopen(path, "r");
        char line[256];
        size_t n = 0;
        while (file != NULL && fgets(line, sizeof line, file) != NULL) {
            line[strcspn(line, "\n")] = '\0';
            expect_text("a line", line, n < s->line_count ? s->lines[n] : NULL);
            n++;
        }
        if (file != NULL) fclose(file);
        expect_number("lines", (long long)n, (long long)s->line_count);
    } else if (strcmp(s->op, "advance") == 0) {
        int64_t now = 0;
        STATUS(gotry_manual_clock_advance(site->clock, s->number, &now, &err), GOTRY_STATUS_OK);
        gotry_error_free(err);
    } else {
        fprintf(stderr, "%s: a step this replayer does not know: %s\n", scenario_name, s->op);
        exit(2);
    }
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s SCRATCH_DIR\n", argv[0]);
        return 2;
    }
    size_t replayed = 0;
    for (size_t n = 0; n < RV_SCENARIO_COUNT; n++) {
        const RvScenario *scenario = &RV_SCENARIOS[n];
        GotryError *err = NULL;
        Site site;
        char path[1300];
        memset(&site, 0, sizeof site);
        scenario_name = scenario->name;
        snprintf(site.dir, sizeof site.dir, "%s/scenario-%zu", argv[1], n);
        CHECK(make_dirs(site.dir) == 0);
        STATUS(gotry_manual_clock_new(RV_START_MS, &site.clock), GOTRY_STATUS_OK);
        snprintf(path, sizeof path, "%s/leases.db", site.dir);
        STATUS(gotry_store_open(path, strlen(path), site.clock, &site.leases, &err), GOTRY_STATUS_OK);
        snprintf(path, sizeof path, "%s/durable", site.dir);
        STATUS(gotry_durable_store_open(path, strlen(path), &site.durable, &err), GOTRY_STATUS_OK);
        gotry_error_free(err);
        for (step_index = 0; step_index < scenario->count; step_index++) step(&site, &scenario->steps[step_index]);
        for (int i = 0; i < MAX_NAMED; i++) {
            if (site.replicas[i].router == NULL) continue;
            GotryCloseReport *report = NULL;
            gotry_router_close(site.replicas[i].router, 10000, &report);
            gotry_close_report_free(report);
            gotry_router_free(site.replicas[i].router);
            drains_destroy(&site.replicas[i].drains);
        }
        gotry_durable_store_free(site.durable);
        gotry_store_free(site.leases);
        gotry_manual_clock_free(site.clock);
        replayed++;
        printf("replayed: %s\n", scenario->name);
    }
    CHECK(replayed == RV_SCENARIO_COUNT && replayed >= 10);
    printf("%zu router scenarios, %d checks, %d failed\n", replayed, checks, failures);
    return failures == 0 ? 0 : 1;
}
