/*
 * The core's metrics through the C door: lease operations on a real SQLite store, and the
 * per-tenant series of a router started with options.tenant_metrics, read back as numbers
 * from the Prometheus text that gotry_metrics_text hands over. The registry is the
 * process's, so the test reads each series before and after and compares the differences.
 *
 * Usage: metrics_test SCRATCH_DIR   (an existing, empty, writable directory)
 */
#define _POSIX_C_SOURCE 200809L

#include "test_common.h"

/* The value of the sample named exactly `series` (name and labels), or 0 when absent. */
static double sample_value(const char *text, const char *series) {
    size_t n = strlen(series);
    for (const char *line = text; *line != '\0';) {
        const char *end = strchr(line, '\n');
        if (end == NULL) end = line + strlen(line);
        if ((size_t)(end - line) > n && strncmp(line, series, n) == 0 && line[n] == ' ')
            return strtod(line + n + 1, NULL);
        line = *end == '\n' ? end + 1 : end;
    }
    return 0.0;
}

/* Reads the text and the value of each series into `out`. */
static void read_series(const char *const *series, size_t count, double *out) {
    GotryError *err = NULL;
    char *text = NULL;
    size_t len = 0;
    STATUS(gotry_metrics_text(&text, &len, &err), GOTRY_STATUS_OK);
    gotry_error_free(err);
    CHECK(text != NULL && strlen(text) == len);
    for (size_t i = 0; i < count; i++) out[i] = text ? sample_value(text, series[i]) : -1.0;
    gotry_metrics_text_free(text);
}

#define ACQUIRE "gotry_tenant_lease_operations_total{store=\"sqlite\",op=\"acquire\",outcome=\""
#define DURATION "gotry_tenant_store_operation_duration_seconds"

static void lease_operations_are_counted(const char *dir) {
    static const char *const series[] = {
        ACQUIRE "granted\"}",
        ACQUIRE "held\"}",
        ACQUIRE "invalid\"}",
        DURATION "_count{store=\"sqlite\",op=\"acquire\"}",
        DURATION "_bucket{store=\"sqlite\",op=\"acquire\",le=\"+Inf\"}",
    };
    enum { N = sizeof series / sizeof series[0] };
    double before[N], after[N];
    char path[1200];
    snprintf(path, sizeof path, "%s/leases.db", dir);
    GotryError *err = NULL;
    GotryStore *store = NULL;
    STATUS(gotry_store_open(path, strlen(path), NULL, &store, &err), GOTRY_STATUS_OK);
    read_series(series, N, before);

    GotryRecord *record = NULL;
    int64_t ttl = 0;
    STATUS(gotry_store_acquire(store, S("acme/metrics"), S("c-1"), 5000, &record, &ttl, &err), GOTRY_STATUS_OK);
    gotry_record_free(record);
    record = NULL;
    FAILS(gotry_store_acquire(store, S("acme/metrics"), S("c-2"), 5000, &record, &ttl, &err),
          GOTRY_STATUS_LEASE_HELD, "GOTRY_TENANT_LEASE_HELD");
    FAILS(gotry_store_acquire(store, S("acme/metrics"), S("c-2"), 5, &record, &ttl, &err),
          GOTRY_STATUS_INVALID_ARGUMENT, "ERR_OUT_OF_RANGE");
    CHECK(record == NULL);

    read_series(series, N, after);
    /* One granted, one held, one refused TTL; all three timed. */
    const double want[N] = {1, 1, 1, 3, 3};
    for (size_t i = 0; i < N; i++) {
        if (after[i] - before[i] != want[i])
            fprintf(stderr, "%s moved by %g, expected %g\n", series[i], after[i] - before[i], want[i]);
        CHECK(after[i] - before[i] == want[i]);
    }
    gotry_store_free(store);
}

static void text_media_type_and_null_checks(void) {
    GotryError *err = NULL;
    char *text = NULL;
    size_t len = 0;
    STATUS(gotry_metrics_text(&text, &len, &err), GOTRY_STATUS_OK);
    CHECK(text != NULL && strstr(text, "# TYPE gotry_tenant_fences_total counter\n") != NULL);
    CHECK(text != NULL && len > 0 && text[len - 1] == '\n');
    gotry_metrics_text_free(text);
    gotry_metrics_text_free(NULL);
    FAILS_NULL(gotry_metrics_text(NULL, &len, &err));
    FAILS_NULL(gotry_metrics_text(&text, NULL, &err));
    const char *media = gotry_metrics_content_type();
    CHECK(media != NULL && strcmp(media, "text/plain; version=0.0.4; charset=utf-8") == 0);
}

/* The whole text, to free with gotry_metrics_text_free. */
static char *metrics_text(void) {
    GotryError *err = NULL;
    char *text = NULL;
    size_t len = 0;
    STATUS(gotry_metrics_text(&text, &len, &err), GOTRY_STATUS_OK);
    gotry_error_free(err);
    return text;
}

#define TENANT "t-0123456789abcdef0123456789abcdef"
#define TENANT_LABELS "replica=\"replica-c\",tenant=\"acme/" TENANT "\""

/* A router with no thread of its own on a manual clock, with or without per-tenant series,
 * serving TENANT. */
static GotryRouter *start_router(const char *dir, const char *replica, GotryManualClock *clock, bool tenant_metrics,
                                 GotryStore **out_leases, GotryDurableStore **out_durable) {
    char path[1200];
    GotryError *err = NULL;
    snprintf(path, sizeof path, "%s/%s-leases.db", dir, replica);
    STATUS(gotry_store_open(path, strlen(path), NULL, out_leases, &err), GOTRY_STATUS_OK);
    snprintf(path, sizeof path, "%s/%s-durable", dir, replica);
    STATUS(gotry_durable_store_open(path, strlen(path), out_durable, &err), GOTRY_STATUS_OK);
    GotryRouterOptions options;
    options.tenant_metrics = true;
    STATUS(gotry_router_options_default(&options), GOTRY_STATUS_OK);
    CHECK(!options.tenant_metrics); /* off by default */
    options.tenant_metrics = tenant_metrics;
    options.clock = clock;
    options.without_thread = true;
    options.copy_interval_ms = 3600000;
    snprintf(path, sizeof path, "%s/%s-state", dir, replica);
    GotryRouter *router = NULL;
    STATUS(gotry_router_start(*out_leases, *out_durable, path, strlen(path), replica, strlen(replica), 3000, 500,
                              &options, &router, &err),
           GOTRY_STATUS_OK);
    GotryTenantHandle *handle = NULL;
    STATUS(gotry_router_open(router, S("acme"), S(TENANT), &handle, &err), GOTRY_STATUS_OK);
    gotry_tenant_handle_free(handle);
    return router;
}

static void stop_router(GotryRouter *router, GotryStore *leases, GotryDurableStore *durable) {
    GotryError *err = NULL;
    GotryCloseReport *report = NULL;
    STATUS(gotry_router_close(router, 1000, &report), GOTRY_STATUS_OK);
    gotry_close_report_free(report);
    gotry_router_free(router);
    gotry_durable_store_free(durable);
    gotry_store_free(leases);
}

/* A router started with options.tenant_metrics: its tenant's series, read back from the text,
 * until a handoff takes the tenant out of the router. */
static void tenant_series_until_the_tenant_leaves(const char *dir) {
    GotryError *err = NULL;
    GotryManualClock *clock = NULL;
    STATUS(gotry_manual_clock_new(0, &clock), GOTRY_STATUS_OK);
    GotryStore *leases = NULL;
    GotryDurableStore *durable = NULL;
    GotryRouter *router = start_router(dir, "replica-c", clock, true, &leases, &durable);
    const char *key = "acme/" TENANT;
    /* One acknowledged call, one still in flight. */
    GotryRouterCall *call = NULL;
    STATUS(gotry_router_begin(router, key, strlen(key), &call, &err), GOTRY_STATUS_OK);
    STATUS(gotry_router_call_finish(call, &err), GOTRY_STATUS_OK);
    call = NULL;
    STATUS(gotry_router_begin(router, key, strlen(key), &call, &err), GOTRY_STATUS_OK);
    int64_t now = 0;
    STATUS(gotry_manual_clock_advance(clock, 1500, &now, &err), GOTRY_STATUS_OK);
    CHECK(now == 1500);

    static const char *const series[] = {
        "gotry_tenant_router_tenant_state{" TENANT_LABELS ",state=\"serving\"}",
        "gotry_tenant_router_tenant_calls_in_flight{" TENANT_LABELS "}",
        "gotry_tenant_router_tenant_copy_lag_writes{" TENANT_LABELS "}",
        "gotry_tenant_router_tenant_copy_lag_seconds{" TENANT_LABELS "}",
    };
    enum { N = sizeof series / sizeof series[0] };
    double seen[N];
    read_series(series, N, seen);
    const double want[N] = {1, 1, 1, 1.5};
    for (size_t i = 0; i < N; i++) {
        if (seen[i] != want[i]) fprintf(stderr, "%s is %g, expected %g\n", series[i], seen[i], want[i]);
        CHECK(seen[i] == want[i]);
    }
    STATUS(gotry_router_call_finish(call, &err), GOTRY_STATUS_OK);
    STATUS(gotry_router_handoff(router, key, strlen(key), 1000, &err), GOTRY_STATUS_OK);
    char *text = metrics_text();
    CHECK(text != NULL && strstr(text, "tenant=\"") == NULL);
    CHECK(text != NULL && strstr(text, "# TYPE gotry_tenant_router_tenant_state gauge\n") != NULL);
    gotry_metrics_text_free(text);
    stop_router(router, leases, durable);
    gotry_manual_clock_free(clock);
}

/* Without the option, no series names the tenant the router serves. */
static void no_tenant_label_without_the_option(const char *dir) {
    GotryError *err = NULL;
    GotryManualClock *clock = NULL;
    STATUS(gotry_manual_clock_new(0, &clock), GOTRY_STATUS_OK);
    GotryStore *leases = NULL;
    GotryDurableStore *durable = NULL;
    GotryRouter *router = start_router(dir, "replica-plain", clock, false, &leases, &durable);
    char *text = metrics_text();
    CHECK(text != NULL && sample_value(text, "gotry_tenant_router_tenants{state=\"serving\"}") >= 1);
    CHECK(text != NULL && strstr(text, "tenant=\"") == NULL && strstr(text, TENANT) == NULL);
    gotry_metrics_text_free(text);
    stop_router(router, leases, durable);
    gotry_manual_clock_free(clock);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s SCRATCH_DIR\n", argv[0]);
        return 2;
    }
    lease_operations_are_counted(argv[1]);
    text_media_type_and_null_checks();
    tenant_series_until_the_tenant_leaves(argv[1]);
    no_tenant_label_without_the_option(argv[1]);
    printf("metrics_test: %d checks, %d failed\n", checks, failures);
    return failures == 0 ? 0 : 1;
}
