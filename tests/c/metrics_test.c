/*
 * The core's metrics through the C door: lease operations on a real SQLite store, read back
 * as numbers from the Prometheus text that gotry_metrics_text hands over. The registry is the
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

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s SCRATCH_DIR\n", argv[0]);
        return 2;
    }
    lease_operations_are_counted(argv[1]);
    text_media_type_and_null_checks();
    printf("metrics_test: %d checks, %d failed\n", checks, failures);
    return failures == 0 ? 0 : 1;
}
