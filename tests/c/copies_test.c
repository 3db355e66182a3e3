/*
 * Epoch-scoped durable copies through the C door.
 *
 * The stale-writer scenario: A holds epoch 1 and writes copies of its tenant root (a real
 * SQLite ledger at gotry-state/gotry-state.db and a plain file); A stalls, so the store's
 * clock passes its TTL while A's own monotonic clock stands still and its write gate keeps
 * passing, as in a frozen process; B acquires epoch 2, restores A's last copy and writes its
 * own; A wakes and writes one more copy into epoch 1, which succeeds; C acquires epoch 3 and
 * restores B's copy, never A's late one; D, whose host check refuses B's copy, skips A's late
 * copy as superseded and restores A's last copy from before B's tenure. Then deletion, which
 * only the holder the lease store still names may do. Each holder has its own store handle
 * and copies handle, as separate processes would.
 *
 * Then, on the directory backend only: RESTORE_INVALID with every skipped copy and its reason
 * (a flipped byte in a stored file, a host check that refuses), COPY_CONFLICT (an object put
 * by hand in the holder's own epoch prefix), DURABLE_STORE_UNAVAILABLE with the errno name
 * (a file where the tenant's folder should be), and the NULL and range checks of every call.
 *
 * The ledgers are written and read by python3's sqlite3 module (the library's own SQLite is
 * not exported), so the content each restore installs is read back through SQLite.
 *
 * Usage: copies_test SCRATCH_DIR           (an existing, empty, writable directory)
 *        copies_test SCRATCH_DIR S3_URL    (the stale-writer scenario on that store, then an
 *                                         S3 endpoint that refuses connections)
 */
#define _POSIX_C_SOURCE 200809L

#include "test_common.h"

static const int64_t TTL_MS = 1000;
static const int64_t MARGIN_MS = 100;

/* ---- files ---- */

static int write_text(const char *path, const char *text) {
    FILE *file = fopen(path, "w");
    if (file == NULL) return -1;
    int ok = fputs(text, file) >= 0;
    return fclose(file) == 0 && ok ? 0 : -1;
}

/* A file of `size` bytes, each `fill`: larger than what rides inline in a manifest, so a copy
 * stores it as an object of its own, which a test can damage. */
static int write_filled(const char *path, int fill, size_t size) {
    FILE *file = fopen(path, "w");
    if (file == NULL) return -1;
    int ok = 1;
    for (size_t i = 0; i < size && ok; i++) ok = fputc(fill, file) != EOF;
    return fclose(file) == 0 && ok ? 0 : -1;
}

/* The whole of a small text file, or "" when it cannot be read. */
static void read_text(const char *path, char *out, size_t capacity) {
    out[0] = '\0';
    FILE *file = fopen(path, "r");
    if (file == NULL) return;
    size_t got = fread(out, 1, capacity - 1, file);
    out[got] = '\0';
    fclose(file);
}

static int flip_byte(const char *path, long offset) {
    FILE *file = fopen(path, "r+b");
    if (file == NULL) return -1;
    int byte = fseek(file, offset, SEEK_SET) == 0 ? fgetc(file) : EOF;
    int ok = byte != EOF && fseek(file, offset, SEEK_SET) == 0 && fputc(byte ^ 0xff, file) != EOF;
    return fclose(file) == 0 && ok ? 0 : -1;
}

/* ---- the SQLite ledger, through python3 ---- */

/* Paths go to the shell in single quotes: one holding a quote would not survive that. */
static int shell_safe(const char *text) { return strchr(text, '\'') == NULL; }

/* Makes <root>/gotry-state/gotry-state.db a ledger holding `value` (and nothing else), and
 * <root>/notes.txt the same text, which the host check reads. */
static int write_state(const char *root, const char *value) {
    char path[4200];
    char command[9000];
    snprintf(path, sizeof path, "%s/gotry-state", root);
    if (!shell_safe(root) || !shell_safe(value) || make_dirs(path) != 0) return -1;
    snprintf(command, sizeof command,
             "python3 -c 'import sqlite3, sys; db = sqlite3.connect(sys.argv[1]); "
             "db.execute(\"create table if not exists facts (v text not null)\"); "
             "db.execute(\"delete from facts\"); db.execute(\"insert into facts values (?)\", (sys.argv[2],)); "
             "db.commit(); db.close()' '%s/gotry-state.db' '%s'",
             path, value);
    if (system(command) != 0) return -1;
    snprintf(path, sizeof path, "%s/notes.txt", root);
    return write_text(path, value);
}

/* What the ledger under `root` holds, read through SQLite (read-only: a missing ledger is not
 * created), or "" when it cannot be read. */
static void read_ledger(const char *root, char *out, size_t capacity) {
    char command[9000];
    out[0] = '\0';
    if (!shell_safe(root)) return;
    snprintf(command, sizeof command,
             "python3 -c 'import sqlite3, sys; "
             "db = sqlite3.connect(\"file:\" + sys.argv[1] + \"?mode=ro\", uri=True); "
             "print(db.execute(\"select group_concat(v) from facts\").fetchone()[0])' "
             "'%s/gotry-state/gotry-state.db' 2>/dev/null",
             root);
    FILE *pipe = popen(command, "r");
    if (pipe == NULL) return;
    if (fgets(out, (int)capacity, pipe) == NULL) out[0] = '\0';
    out[strcspn(out, "\n")] = '\0';
    if (pclose(pipe) != 0) out[0] = '\0';
}

/* The ledger and the notes under `root` both hold `value`. */
static void check_state(const char *root, const char *value, int line) {
    char ledger[256];
    char notes[256];
    char path[4200];
    read_ledger(root, ledger, sizeof ledger);
    snprintf(path, sizeof path, "%s/notes.txt", root);
    read_text(path, notes, sizeof notes);
    checks++;
    if (strcmp(ledger, value) != 0 || strcmp(notes, value) != 0) {
        failures++;
        fprintf(stderr, "copies_test.c:%d: %s holds ledger '%s' and notes '%s', expected '%s'\n", line, root, ledger,
                notes, value);
    }
}
#define STATE_IS(root, value) check_state((root), (value), __LINE__)

/* ---- the host's check ---- */

/* Counts its calls, and refuses a copy whose notes say `refuse` ("*": every copy). */
typedef struct {
    int calls;
    int bad_paths;
    const char *refuse;
} FoldCheck;

static bool fold_check(void *user_data, const char *root, size_t root_len) {
    FoldCheck *check = (FoldCheck *)user_data;
    check->calls++;
    char path[4200];
    char notes[256];
    if (root == NULL || root[root_len] != '\0' || strlen(root) != root_len || root_len > 4000) {
        check->bad_paths++;
        return false;
    }
    snprintf(path, sizeof path, "%s/gotry-state/gotry-state.db", root);
    if (access(path, R_OK) != 0) check->bad_paths++;
    snprintf(path, sizeof path, "%s/notes.txt", root);
    read_text(path, notes, sizeof notes);
    if (check->refuse == NULL) return true;
    return strcmp(check->refuse, "*") != 0 && strcmp(notes, check->refuse) != 0;
}

/* ---- one tenant's names ---- */

/* A tenant no earlier run used: an S3 bucket keeps what earlier runs wrote. */
static Tenant fresh_tenant(const char *label) {
    char subject[256];
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    snprintf(subject, sizeof subject, "copies-test/%s/%ld/%lld.%09ld", label, (long)getpid(),
             (long long)now.tv_sec, now.tv_nsec);
    return tenant_named(subject);
}

/* Where the directory backend keeps object `name` of copy (epoch, seq). */
static void object_path(char *out, size_t capacity, const char *store_dir, const Tenant *tenant, int64_t epoch,
                        uint64_t seq, const char *name) {
    snprintf(out, capacity, "%s/orgs/%s/tenants/%s/epochs/%020lld/%020llu/%s", store_dir, ORG, tenant->tenant,
             (long long)epoch, (unsigned long long)seq, name);
}

/* ---- reading results ---- */

static GotryRestoreView view_of(const GotryRestoreReport *report) {
    GotryRestoreView view;
    memset(&view, 0, sizeof view);
    CHECK(gotry_restore_report_view(report, &view) == GOTRY_STATUS_OK);
    return view;
}

static int skipped_is(const GotryRestoreReport *report, size_t index, int64_t epoch, uint64_t seq,
                      GotrySkipReason reason) {
    GotrySkippedCopy skipped;
    memset(&skipped, 0, sizeof skipped);
    return gotry_restore_report_skipped(report, index, &skipped) == GOTRY_STATUS_OK && skipped.epoch == epoch &&
           skipped.seq == seq && skipped.reason == reason;
}

static int ids_are(const GotryCopyIdList *list, const GotryCopyId *want, size_t count) {
    size_t len = 0;
    if (gotry_copy_id_list_len(list, &len) != GOTRY_STATUS_OK || len != count) return 0;
    for (size_t i = 0; i < count; i++) {
        GotryCopyId id;
        if (gotry_copy_id_list_get(list, i, &id) != GOTRY_STATUS_OK || id.epoch != want[i].epoch ||
            id.seq != want[i].seq)
            return 0;
    }
    return 1;
}

static GotryCopyId copy_id(int64_t epoch, uint64_t seq) {
    GotryCopyId id;
    id.epoch = epoch;
    id.seq = seq;
    return id;
}

/* ---- the stale writer ---- */

/* One holder: its own monotonic clock, lease, durable store handle and copies handle. */
typedef struct {
    GotryManualClock *clock;
    GotryLease *lease;
    GotryDurableStore *durable;
    GotryEpochCopies *copies;
    char root[2048];
} Holder;

static void holder_start(Holder *holder, GotryStore *leases, const Tenant *tenant, const char *replica,
                         int64_t epoch, const char *url, const char *state_root) {
    GotryError *err = NULL;
    memset(holder, 0, sizeof *holder);
    STATUS(gotry_manual_clock_new(0, &holder->clock), GOTRY_STATUS_OK);
    STATUS(gotry_lease_acquire(leases, tenant->key, strlen(tenant->key), replica, strlen(replica), TTL_MS, MARGIN_MS,
                               holder->clock, &holder->lease, &err),
           GOTRY_STATUS_OK);
    int64_t got_epoch = 0;
    STATUS(gotry_lease_epoch(holder->lease, &got_epoch), GOTRY_STATUS_OK);
    CHECK(got_epoch == epoch);
    STATUS(gotry_durable_store_open_url(url, strlen(url), &holder->durable, &err), GOTRY_STATUS_OK);
    STATUS(gotry_epoch_copies_new(holder->durable, &holder->copies), GOTRY_STATUS_OK);
    /* The copies keep their own reference to the store. */
    gotry_durable_store_free(holder->durable);
    holder->durable = NULL;
    tenant_root(state_root, tenant, holder->root, sizeof holder->root);
    gotry_error_free(err);
}

static void holder_stop(Holder *holder) {
    gotry_epoch_copies_free(holder->copies);
    gotry_lease_free(holder->lease);
    gotry_manual_clock_free(holder->clock);
}

static GotryWrittenCopy write_copy(Holder *holder, GotryStatus want, int line) {
    GotryError *err = NULL;
    GotryWrittenCopy written;
    memset(&written, 0, sizeof written);
    check_status_at(gotry_epoch_copies_write_copy(holder->copies, holder->lease, holder->root,
                                                  strlen(holder->root), &written, &err),
                    want, &err, "gotry_epoch_copies_write_copy", __FILE__, line);
    gotry_error_free(err);
    return written;
}
#define WRITE_COPY(holder) write_copy((holder), GOTRY_STATUS_OK, __LINE__)

static GotryRestoreReport *restore(Holder *holder, FoldCheck *fold, int line) {
    GotryError *err = NULL;
    GotryRestoreReport *report = NULL;
    check_status_at(gotry_epoch_copies_restore(holder->copies, holder->lease, holder->root, strlen(holder->root),
                                               fold ? fold_check : NULL, fold, &report, &err),
                    GOTRY_STATUS_OK, &err, "gotry_epoch_copies_restore", __FILE__, line);
    gotry_error_free(err);
    return report;
}
#define RESTORE(holder, fold) restore((holder), (fold), __LINE__)

/*
 * `urls` are three spellings of one store (one per holder; the same one three times for S3),
 * `dir` the scratch folder of the lease store and the tenant roots.
 */
static void stale_writer(const char *dir, const char *const urls[3], const char *label) {
    GotryError *err = NULL;
    GotryManualClock *wall = NULL;
    GotryStore *leases = NULL;
    char path[4200];
    char state_a[1100];
    char state_b[1100];
    char state_c[1100];
    char state_d[1100];
    int64_t now = 0;
    const Tenant tenant = fresh_tenant(label);
    snprintf(path, sizeof path, "%s/leases.db", dir);
    snprintf(state_a, sizeof state_a, "%s/replica-a", dir);
    snprintf(state_b, sizeof state_b, "%s/replica-b", dir);
    snprintf(state_c, sizeof state_c, "%s/replica-c", dir);
    snprintf(state_d, sizeof state_d, "%s/replica-d", dir);
    STATUS(gotry_manual_clock_new(1000000, &wall), GOTRY_STATUS_OK);
    STATUS(gotry_store_open(path, strlen(path), wall, &leases, &err), GOTRY_STATUS_OK);

    /* A: epoch 1. Its tenure starts with a restore: nothing yet, an empty start. */
    Holder a;
    holder_start(&a, leases, &tenant, "replica-a", 1, urls[0], state_a);
    GotryRestoreReport *report = RESTORE(&a, NULL);
    GotryRestoreView view = view_of(report);
    CHECK(!view.restored && view.copy.epoch == 0 && view.copy.seq == 0 && view.skipped_len == 0 &&
          view.files == 0);
    gotry_restore_report_free(report);
    struct stat info;
    CHECK(stat(a.root, &info) == 0 && S_ISDIR(info.st_mode));
    CHECK(write_state(a.root, "A-1") == 0);
    GotryWrittenCopy written = WRITE_COPY(&a);
    CHECK(written.epoch == 1 && written.seq == 1 && written.files == 2 && written.bytes > 0);
    /* The first copy of a lineage has nothing to build on: every file is made whole (these are
     * small enough to ride inline in the manifest, so the store holds the manifest alone). */
    CHECK(written.pieces_uploaded == 0 && written.bytes_uploaded == written.bytes && written.pieces_reused == 0 &&
          written.bytes_reused == 0);
    CHECK(write_state(a.root, "A-2") == 0);
    written = WRITE_COPY(&a);
    CHECK(written.epoch == 1 && written.seq == 2 && written.files == 2);
    /* The next one makes what changed and references the rest of its lineage. */
    CHECK(written.bytes_uploaded > 0 && written.bytes_uploaded + written.bytes_reused >= written.bytes);

    /* A stalls: the store's clock passes its TTL; A's own clock stands still, so its gate
     * still passes (the frozen process that already made its check). */
    STATUS(gotry_manual_clock_advance(wall, TTL_MS + 500, &now, &err), GOTRY_STATUS_OK);
    STATUS(gotry_lease_assert_held(a.lease, &err), GOTRY_STATUS_OK);

    /* B: epoch 2 restores A's last copy into its own root, then writes its own. */
    Holder b;
    holder_start(&b, leases, &tenant, "replica-b", 2, urls[1], state_b);
    CHECK(make_dirs(b.root) == 0 && write_state(b.root, "B-before-restore") == 0);
    report = RESTORE(&b, NULL);
    view = view_of(report);
    CHECK(view.restored && view.copy.epoch == 1 && view.copy.seq == 2 && view.skipped_len == 0 && view.files == 2);
    gotry_restore_report_free(report);
    STATE_IS(b.root, "A-2");
    CHECK(write_state(b.root, "B-1") == 0);
    written = WRITE_COPY(&b);
    CHECK(written.epoch == 2 && written.seq == 1 && written.files == 2);

    /* A wakes and writes one more copy: it lands, but in epoch 1's prefix. */
    CHECK(write_state(a.root, "A-late") == 0);
    STATUS(gotry_lease_assert_held(a.lease, &err), GOTRY_STATUS_OK);
    written = WRITE_COPY(&a);
    CHECK(written.epoch == 1 && written.seq == 3);
    /* Its next renewal tells it the truth, and its gate closes. */
    FAILS(gotry_lease_renew(a.lease, &err), GOTRY_STATUS_LEASE_LOST, "GOTRY_TENANT_LEASE_LOST");
    FAILS(gotry_epoch_copies_write_copy(a.copies, a.lease, a.root, strlen(a.root), &written, &err),
          GOTRY_STATUS_FENCED, "GOTRY_TENANT_FENCED");

    /* C: epoch 3 restores B's copy, never A's late one. */
    STATUS(gotry_manual_clock_advance(wall, TTL_MS + 500, &now, &err), GOTRY_STATUS_OK);
    Holder c;
    holder_start(&c, leases, &tenant, "replica-c", 3, urls[2], state_c);
    FoldCheck accept_all = {0, 0, NULL};
    report = RESTORE(&c, &accept_all);
    view = view_of(report);
    CHECK(view.restored && view.copy.epoch == 2 && view.copy.seq == 1 && view.skipped_len == 0);
    gotry_restore_report_free(report);
    CHECK(accept_all.calls == 1 && accept_all.bad_paths == 0);
    STATE_IS(c.root, "B-1");

    /* Every copy is in the store, oldest first: A's three (the late one too) and B's. */
    GotryCopyList *list = NULL;
    size_t count = 0;
    STATUS(gotry_epoch_copies_list(c.copies, tenant.key, strlen(tenant.key), &list, &err), GOTRY_STATUS_OK);
    STATUS(gotry_copy_list_len(list, &count), GOTRY_STATUS_OK);
    CHECK(count == 4);
    static const int64_t listed_epochs[4] = {1, 1, 1, 2};
    static const uint64_t listed_seqs[4] = {1, 2, 3, 1};
    for (size_t i = 0; i < 4 && i < count; i++) {
        GotryCopyListing listing;
        STATUS(gotry_copy_list_get(list, i, &listing), GOTRY_STATUS_OK);
        /* Each is its manifest alone: files this small ride inline in it. */
        CHECK(listing.epoch == listed_epochs[i] && listing.seq == listed_seqs[i] && listing.complete &&
              listing.objects == 1 && listing.bytes > 0);
    }
    gotry_copy_list_free(list);

    /* D: epoch 4, whose host check refuses B's copy. A's late copy is still never taken: it
     * was written after B's tenure began from A's second copy, which D restores. */
    STATUS(gotry_manual_clock_advance(wall, TTL_MS + 500, &now, &err), GOTRY_STATUS_OK);
    Holder d;
    holder_start(&d, leases, &tenant, "replica-d", 4, urls[0], state_d);
    FoldCheck refuse_b = {0, 0, "B-1"};
    report = RESTORE(&d, &refuse_b);
    view = view_of(report);
    CHECK(view.restored && view.copy.epoch == 1 && view.copy.seq == 2 && view.skipped_len == 2);
    CHECK(skipped_is(report, 0, 2, 1, GOTRY_SKIP_REASON_FOLD));
    CHECK(skipped_is(report, 1, 1, 3, GOTRY_SKIP_REASON_SUPERSEDED));
    GotrySkippedCopy skipped;
    STATUS(gotry_restore_report_skipped(report, 2, &skipped), GOTRY_STATUS_INVALID_ARGUMENT);
    gotry_restore_report_free(report);
    CHECK(refuse_b.calls == 2 && refuse_b.bad_paths == 0);
    STATE_IS(d.root, "A-2");
    CHECK(write_state(d.root, "D-1") == 0);
    written = WRITE_COPY(&d);
    CHECK(written.epoch == 4 && written.seq == 1);

    /* Deleting needs the lease store to name the holder: B's gate still passes locally, but
     * the store names D; A's gate is closed. */
    GotryCopyIdList *kept = NULL;
    GotryCopyIdList *deleted = NULL;
    FAILS(gotry_epoch_copies_gc(b.copies, b.lease, 1, &kept, &deleted, &err), GOTRY_STATUS_LEASE_LOST,
          "GOTRY_TENANT_LEASE_LOST");
    FAILS(gotry_epoch_copies_forget_copies(a.copies, a.lease, &deleted, &err), GOTRY_STATUS_FENCED,
          "GOTRY_TENANT_FENCED");
    CHECK(kept == NULL && deleted == NULL);
    FAILS_RANGE(gotry_epoch_copies_gc(d.copies, d.lease, 0, &kept, &deleted, &err));
    /* D keeps its newest copy; from D's lineage B's copy and A's late one are superseded. */
    STATUS(gotry_epoch_copies_gc(d.copies, d.lease, 1, &kept, &deleted, &err), GOTRY_STATUS_OK);
    const GotryCopyId kept_ids[1] = {copy_id(4, 1)};
    const GotryCopyId deleted_ids[4] = {copy_id(2, 1), copy_id(1, 3), copy_id(1, 2), copy_id(1, 1)};
    CHECK(ids_are(kept, kept_ids, 1));
    CHECK(ids_are(deleted, deleted_ids, 4));
    GotryCopyId id;
    STATUS(gotry_copy_id_list_get(kept, 1, &id), GOTRY_STATUS_INVALID_ARGUMENT);
    gotry_copy_id_list_free(kept);
    gotry_copy_id_list_free(deleted);
    /* Forgetting up to D's own epoch deletes the rest. */
    GotryRecord *record = NULL;
    STATUS(gotry_lease_mark_forgotten(d.lease, &record, &err), GOTRY_STATUS_OK);
    gotry_record_free(record);
    STATUS(gotry_epoch_copies_forget_copies(d.copies, d.lease, &deleted, &err), GOTRY_STATUS_OK);
    CHECK(ids_are(deleted, kept_ids, 1));
    gotry_copy_id_list_free(deleted);
    STATUS(gotry_epoch_copies_list(d.copies, tenant.key, strlen(tenant.key), &list, &err), GOTRY_STATUS_OK);
    STATUS(gotry_copy_list_len(list, &count), GOTRY_STATUS_OK);
    CHECK(count == 0);
    gotry_copy_list_free(list);

    STATUS(gotry_lease_release(d.lease, &err), GOTRY_STATUS_OK);
    holder_stop(&a);
    holder_stop(&b);
    holder_stop(&c);
    holder_stop(&d);
    gotry_store_free(leases);
    gotry_manual_clock_free(wall);
    gotry_error_free(err);
}

/* ---- what a copy stored and what it reused ---- */

static void what_a_copy_stored(const char *dir) {
    GotryError *err = NULL;
    GotryManualClock *wall = NULL;
    GotryStore *leases = NULL;
    char path[4200];
    char url[1200];
    char state[1100];
    const Tenant tenant = fresh_tenant("stored");
    snprintf(path, sizeof path, "%s/leases.db", dir);
    snprintf(url, sizeof url, "file://%s/store", dir);
    snprintf(state, sizeof state, "%s/replica-a", dir);
    STATUS(gotry_manual_clock_new(5000000, &wall), GOTRY_STATUS_OK);
    STATUS(gotry_store_open(path, strlen(path), wall, &leases, &err), GOTRY_STATUS_OK);
    Holder a;
    holder_start(&a, leases, &tenant, "replica-a", 1, url, state);
    CHECK(write_state(a.root, "only") == 0);
    const GotryWrittenCopy first = WRITE_COPY(&a);
    /* Small files ride inline in the manifest: the copy is one object. */
    CHECK(first.pieces_uploaded == 0 && first.bytes_uploaded == first.bytes && first.pieces_reused == 0 &&
          first.bytes_reused == 0);
    /* Nothing changed: the copy is its manifest, every file referenced from the first. */
    const GotryWrittenCopy second = WRITE_COPY(&a);
    CHECK(second.seq == 2 && second.bytes == first.bytes);
    CHECK(second.pieces_uploaded == 0 && second.bytes_uploaded == 0 && second.pieces_reused == 0 &&
          second.bytes_reused == first.bytes_uploaded);
    STATUS(gotry_lease_release(a.lease, &err), GOTRY_STATUS_OK);
    holder_stop(&a);
    gotry_store_free(leases);
    gotry_manual_clock_free(wall);
    gotry_error_free(err);
}

/* ---- the failures, on the directory backend ---- */

static void restore_invalid_and_conflict(const char *dir) {
    GotryError *err = NULL;
    GotryManualClock *wall = NULL;
    GotryStore *leases = NULL;
    char path[4200];
    char store_dir[1100];
    char state[1100];
    char url[1200];
    const Tenant tenant = fresh_tenant("invalid");
    snprintf(path, sizeof path, "%s/leases.db", dir);
    snprintf(store_dir, sizeof store_dir, "%s/store", dir);
    snprintf(url, sizeof url, "file://%s", store_dir);
    STATUS(gotry_manual_clock_new(5000000, &wall), GOTRY_STATUS_OK);
    STATUS(gotry_store_open(path, strlen(path), wall, &leases, &err), GOTRY_STATUS_OK);

    Holder a;
    snprintf(state, sizeof state, "%s/replica-a", dir);
    holder_start(&a, leases, &tenant, "replica-a", 1, url, state);
    /* A file too large to ride inline, first by path order, rewritten whole by each state. */
    char blob[4200];
    snprintf(blob, sizeof blob, "%s/gotry-state/blob.bin", a.root);
    CHECK(write_state(a.root, "first") == 0 && write_filled(blob, '1', 64 * 1024) == 0);
    CHECK(WRITE_COPY(&a).seq == 1);
    CHECK(write_state(a.root, "second") == 0 && write_filled(blob, '2', 64 * 1024) == 0);
    CHECK(WRITE_COPY(&a).seq == 2);
    STATUS(gotry_lease_release(a.lease, &err), GOTRY_STATUS_OK);

    /* The newest copy gets a flipped byte in its first file's object; the host check refuses
     * the older one. */
    object_path(path, sizeof path, store_dir, &tenant, 1, 2, "files/000000");
    CHECK(flip_byte(path, 100) == 0);
    Holder b;
    snprintf(state, sizeof state, "%s/replica-b", dir);
    holder_start(&b, leases, &tenant, "replica-b", 2, url, state);
    CHECK(make_dirs(b.root) == 0 && write_state(b.root, "kept") == 0);
    FoldCheck refuse_first = {0, 0, "first"};
    GotryRestoreReport *report = NULL;
    STATUS(gotry_epoch_copies_restore(b.copies, b.lease, b.root, strlen(b.root), fold_check, &refuse_first, &report,
                                      &err),
           GOTRY_STATUS_RESTORE_INVALID);
    CHECK(report == NULL && refuse_first.calls == 1);
    size_t count = 0;
    GotrySkippedCopy skipped;
    STATUS(gotry_error_skipped_count(err, &count), GOTRY_STATUS_OK);
    CHECK(count == 2);
    memset(&skipped, 0, sizeof skipped);
    STATUS(gotry_error_skipped(err, 0, &skipped), GOTRY_STATUS_OK);
    CHECK(skipped.epoch == 1 && skipped.seq == 2 && skipped.reason == GOTRY_SKIP_REASON_CHECKSUM);
    STATUS(gotry_error_skipped(err, 1, &skipped), GOTRY_STATUS_OK);
    CHECK(skipped.epoch == 1 && skipped.seq == 1 && skipped.reason == GOTRY_SKIP_REASON_FOLD);
    CHECK(strcmp(gotry_skip_reason_name(skipped.reason), "fold") == 0);
    STATUS(gotry_error_skipped(err, 2, &skipped), GOTRY_STATUS_INVALID_ARGUMENT);
    CHECK(skipped.seq == 1);
    const char *code = NULL;
    STATUS(gotry_error_backend_code(err, &code), GOTRY_STATUS_NO_VALUE);
    ERROR_IS(GOTRY_STATUS_RESTORE_INVALID, "GOTRY_TENANT_RESTORE_INVALID");
    /* The root was left as it was. */
    STATE_IS(b.root, "kept");

    /* An object put by hand in B's own prefix, before B's first copy: a conflict, and the
     * lease is untouched. */
    object_path(path, sizeof path, store_dir, &tenant, 2, 1, "files");
    CHECK(make_dirs(path) == 0);
    object_path(path, sizeof path, store_dir, &tenant, 2, 1, "files/000000");
    CHECK(write_text(path, "not B's") == 0);
    GotryWrittenCopy written;
    memset(&written, 0, sizeof written);
    FAILS(gotry_epoch_copies_write_copy(b.copies, b.lease, b.root, strlen(b.root), &written, &err),
          GOTRY_STATUS_COPY_CONFLICT, "GOTRY_TENANT_COPY_CONFLICT");
    CHECK(written.seq == 0);
    STATUS(gotry_lease_assert_held(b.lease, &err), GOTRY_STATUS_OK);
    /* The stranger lists as an incomplete copy: it does not exist for a restore. */
    GotryCopyList *list = NULL;
    GotryCopyListing listing;
    STATUS(gotry_epoch_copies_list(b.copies, tenant.key, strlen(tenant.key), &list, &err), GOTRY_STATUS_OK);
    STATUS(gotry_copy_list_len(list, &count), GOTRY_STATUS_OK);
    CHECK(count == 3);
    STATUS(gotry_copy_list_get(list, 2, &listing), GOTRY_STATUS_OK);
    CHECK(listing.epoch == 2 && listing.seq == 1 && !listing.complete && listing.objects == 1);
    STATUS(gotry_copy_list_get(list, 3, &listing), GOTRY_STATUS_INVALID_ARGUMENT);
    gotry_copy_list_free(list);
    STATUS(gotry_lease_release(b.lease, &err), GOTRY_STATUS_OK);

    holder_stop(&a);
    holder_stop(&b);
    gotry_store_free(leases);
    gotry_manual_clock_free(wall);
    gotry_error_free(err);
}

static void store_unavailable(const char *dir) {
    GotryError *err = NULL;
    GotryStore *leases = NULL;
    GotryDurableStore *durable = NULL;
    char path[4200];
    char store_dir[1100];
    char state[1100];
    const char *code = NULL;
    const Tenant tenant = fresh_tenant("unavailable");

    /* A store folder under a file: the errno name comes with the status (ENOTDIR: a file
     * stands where a folder must be). */
    snprintf(path, sizeof path, "%s/a-file", dir);
    CHECK(write_text(path, "x") == 0);
    snprintf(path, sizeof path, "%s/a-file/store", dir);
    STATUS(gotry_durable_store_open(path, strlen(path), &durable, &err), GOTRY_STATUS_DURABLE_STORE_UNAVAILABLE);
    CHECK(durable == NULL);
    STATUS(gotry_error_backend_code(err, &code), GOTRY_STATUS_OK);
    CHECK(code != NULL && strcmp(code, "ENOTDIR") == 0);
    ERROR_IS(GOTRY_STATUS_DURABLE_STORE_UNAVAILABLE, "GOTRY_TENANT_DURABLE_STORE_UNAVAILABLE");

    /* A file where the tenant's folder of the store should be: the copy fails, the lease and
     * its gate do not, and the next copy succeeds once the folder is back. */
    snprintf(path, sizeof path, "%s/leases.db", dir);
    STATUS(gotry_store_open(path, strlen(path), NULL, &leases, &err), GOTRY_STATUS_OK);
    snprintf(store_dir, sizeof store_dir, "%s/store", dir);
    STATUS(gotry_durable_store_open(store_dir, strlen(store_dir), &durable, &err), GOTRY_STATUS_OK);
    Holder e;
    memset(&e, 0, sizeof e);
    STATUS(gotry_lease_acquire(leases, tenant.key, strlen(tenant.key), S("replica-e"), 60000, 1000, NULL, &e.lease,
                               &err),
           GOTRY_STATUS_OK);
    STATUS(gotry_epoch_copies_new(durable, &e.copies), GOTRY_STATUS_OK);
    snprintf(state, sizeof state, "%s/replica-e", dir);
    tenant_root(state, &tenant, e.root, sizeof e.root);
    CHECK(write_state(e.root, "E-1") == 0);
    snprintf(path, sizeof path, "%s/orgs/%s/tenants", store_dir, ORG);
    CHECK(make_dirs(path) == 0);
    snprintf(path, sizeof path, "%s/orgs/%s/tenants/%s", store_dir, ORG, tenant.tenant);
    CHECK(write_text(path, "in the way") == 0);
    GotryWrittenCopy written;
    memset(&written, 0, sizeof written);
    STATUS(gotry_epoch_copies_write_copy(e.copies, e.lease, e.root, strlen(e.root), &written, &err),
           GOTRY_STATUS_DURABLE_STORE_UNAVAILABLE);
    code = NULL;
    STATUS(gotry_error_backend_code(err, &code), GOTRY_STATUS_OK);
    CHECK(code != NULL && strcmp(code, "ENOTDIR") == 0);
    STATUS(gotry_error_skipped_count(err, &written.files), GOTRY_STATUS_NO_VALUE);
    ERROR_IS(GOTRY_STATUS_DURABLE_STORE_UNAVAILABLE, "GOTRY_TENANT_DURABLE_STORE_UNAVAILABLE");
    CHECK(written.seq == 0);
    STATUS(gotry_lease_assert_held(e.lease, &err), GOTRY_STATUS_OK);
    CHECK(unlink(path) == 0);
    written = WRITE_COPY(&e);
    CHECK(written.epoch == 1 && written.seq == 1 && written.files == 2);

    /* A root that cannot be read is the tenant's own disk failing, not the store's. */
    snprintf(path, sizeof path, "%s/no-such-root", dir);
    FAILS(gotry_epoch_copies_write_copy(e.copies, e.lease, path, strlen(path), &written, &err),
          GOTRY_STATUS_STORAGE_ERROR, "ENOENT");

    STATUS(gotry_lease_release(e.lease, &err), GOTRY_STATUS_OK);
    gotry_epoch_copies_free(e.copies);
    gotry_lease_free(e.lease);
    gotry_durable_store_free(durable);
    gotry_store_free(leases);
    gotry_error_free(err);
}

/* NULL arguments, text that is not UTF-8, keys that are not tenants, and every _free(NULL). */
static void arguments(const char *dir) {
    GotryError *err = NULL;
    GotryDurableStore *durable = NULL;
    GotryEpochCopies *copies = NULL;
    GotryStore *leases = NULL;
    GotryLease *lease = NULL;
    GotryWrittenCopy written;
    GotryRestoreReport *report = NULL;
    GotryRestoreView view;
    GotrySkippedCopy skipped;
    GotryCopyList *list = NULL;
    GotryCopyListing listing;
    GotryCopyIdList *ids = NULL;
    GotryCopyIdList *more_ids = NULL;
    GotryCopyId id;
    size_t count = 0;
    char path[4200];
    const Tenant tenant = fresh_tenant("arguments");

    snprintf(path, sizeof path, "%s/store", dir);
    FAILS_NULL(gotry_durable_store_open(NULL, 0, &durable, &err));
    FAILS_NULL(gotry_durable_store_open(path, strlen(path), NULL, &err));
    FAILS_RANGE(gotry_durable_store_open(S("/tmp/a\0b"), &durable, &err));
    FAILS_RANGE(gotry_durable_store_open(S("/tmp/\xff"), &durable, &err));
    FAILS_NULL(gotry_durable_store_open_url(NULL, 0, &durable, &err));
    FAILS_RANGE(gotry_durable_store_open_url(S("gs://bucket"), &durable, &err));
    FAILS_RANGE(gotry_durable_store_open_url(S("file:"), &durable, &err));
    /* A URL's user part may be a credential: it never reaches the message. */
    STATUS(gotry_durable_store_open_url(S("AKIAEXAMPLE:s3cret@bucket/p"), &durable, &err),
           GOTRY_STATUS_INVALID_ARGUMENT);
    const char *message = NULL;
    size_t message_len = 0;
    STATUS(gotry_error_message(err, &message, &message_len), GOTRY_STATUS_OK);
    CHECK(message != NULL && strstr(message, "AKIAEXAMPLE") == NULL && strstr(message, "s3cret") == NULL);
    ERROR_IS(GOTRY_STATUS_INVALID_ARGUMENT, "ERR_OUT_OF_RANGE");
    CHECK(durable == NULL);
    STATUS(gotry_durable_store_open(path, strlen(path), &durable, &err), GOTRY_STATUS_OK);
    STATUS(gotry_epoch_copies_new(NULL, &copies), GOTRY_STATUS_NULL_ARGUMENT);
    STATUS(gotry_epoch_copies_new(durable, NULL), GOTRY_STATUS_NULL_ARGUMENT);
    STATUS(gotry_epoch_copies_new(durable, &copies), GOTRY_STATUS_OK);

    snprintf(path, sizeof path, "%s/leases.db", dir);
    STATUS(gotry_store_open(path, strlen(path), NULL, &leases, &err), GOTRY_STATUS_OK);
    STATUS(gotry_lease_acquire(leases, tenant.key, strlen(tenant.key), S("replica"), 60000, 1000, NULL, &lease, &err),
           GOTRY_STATUS_OK);
    snprintf(path, sizeof path, "%s/root", dir);
    size_t len = strlen(path);
    FAILS_NULL(gotry_epoch_copies_write_copy(NULL, lease, path, len, &written, &err));
    FAILS_NULL(gotry_epoch_copies_write_copy(copies, NULL, path, len, &written, &err));
    FAILS_NULL(gotry_epoch_copies_write_copy(copies, lease, NULL, 0, &written, &err));
    FAILS_NULL(gotry_epoch_copies_write_copy(copies, lease, path, len, NULL, &err));
    FAILS_RANGE(gotry_epoch_copies_write_copy(copies, lease, S("/tmp/\0x"), &written, &err));
    STATUS(gotry_epoch_copies_write_copy(copies, lease, path, len, NULL, NULL), GOTRY_STATUS_NULL_ARGUMENT);
    FAILS_NULL(gotry_epoch_copies_restore(NULL, lease, path, len, NULL, NULL, &report, &err));
    FAILS_NULL(gotry_epoch_copies_restore(copies, NULL, path, len, NULL, NULL, &report, &err));
    FAILS_NULL(gotry_epoch_copies_restore(copies, lease, NULL, 0, NULL, NULL, &report, &err));
    FAILS_NULL(gotry_epoch_copies_restore(copies, lease, path, len, NULL, NULL, NULL, &err));
    FAILS_RANGE(gotry_epoch_copies_restore(copies, lease, S("/tmp/\xff"), NULL, NULL, &report, &err));
    CHECK(report == NULL);
    FAILS_NULL(gotry_epoch_copies_list(NULL, tenant.key, strlen(tenant.key), &list, &err));
    FAILS_NULL(gotry_epoch_copies_list(copies, NULL, 0, &list, &err));
    FAILS_NULL(gotry_epoch_copies_list(copies, tenant.key, strlen(tenant.key), NULL, &err));
    FAILS_RANGE(gotry_epoch_copies_list(copies, S("acme/\xff"), &list, &err));
    FAILS(gotry_epoch_copies_list(copies, S("acme/t-1"), &list, &err), GOTRY_STATUS_ID_INVALID,
          "GOTRY_TENANT_ID_INVALID");
    FAILS(gotry_epoch_copies_list(copies, S("no-slash"), &list, &err), GOTRY_STATUS_ID_INVALID,
          "GOTRY_TENANT_ID_INVALID");
    CHECK(list == NULL);
    FAILS_NULL(gotry_epoch_copies_forget_copies(NULL, lease, &ids, &err));
    FAILS_NULL(gotry_epoch_copies_forget_copies(copies, NULL, &ids, &err));
    FAILS_NULL(gotry_epoch_copies_forget_copies(copies, lease, NULL, &err));
    FAILS_NULL(gotry_epoch_copies_gc(NULL, lease, 1, &ids, &more_ids, &err));
    FAILS_NULL(gotry_epoch_copies_gc(copies, NULL, 1, &ids, &more_ids, &err));
    FAILS_NULL(gotry_epoch_copies_gc(copies, lease, 1, NULL, &more_ids, &err));
    FAILS_NULL(gotry_epoch_copies_gc(copies, lease, 1, &ids, NULL, &err));
    CHECK(ids == NULL && more_ids == NULL);

    /* A lease whose key is not <organization>/<ledger tenant> cannot have copies. */
    GotryLease *odd = NULL;
    STATUS(gotry_lease_acquire(leases, S("not-a-tenant"), S("replica"), 60000, 1000, NULL, &odd, &err),
           GOTRY_STATUS_OK);
    FAILS(gotry_epoch_copies_write_copy(copies, odd, path, len, &written, &err), GOTRY_STATUS_ID_INVALID,
          "GOTRY_TENANT_ID_INVALID");
    gotry_lease_free(odd);

    /* An empty start through this handle, then the report's accessors. */
    STATUS(gotry_epoch_copies_restore(copies, lease, path, len, NULL, NULL, &report, &err), GOTRY_STATUS_OK);
    STATUS(gotry_restore_report_view(NULL, &view), GOTRY_STATUS_NULL_ARGUMENT);
    STATUS(gotry_restore_report_view(report, NULL), GOTRY_STATUS_NULL_ARGUMENT);
    STATUS(gotry_restore_report_skipped(report, 0, &skipped), GOTRY_STATUS_INVALID_ARGUMENT);
    STATUS(gotry_restore_report_skipped(NULL, 0, &skipped), GOTRY_STATUS_NULL_ARGUMENT);
    STATUS(gotry_restore_report_skipped(report, 0, NULL), GOTRY_STATUS_NULL_ARGUMENT);
    gotry_restore_report_free(report);
    STATUS(gotry_epoch_copies_list(copies, tenant.key, strlen(tenant.key), &list, &err), GOTRY_STATUS_OK);
    STATUS(gotry_copy_list_len(list, &count), GOTRY_STATUS_OK);
    CHECK(count == 0);
    STATUS(gotry_copy_list_len(NULL, &count), GOTRY_STATUS_NULL_ARGUMENT);
    STATUS(gotry_copy_list_len(list, NULL), GOTRY_STATUS_NULL_ARGUMENT);
    STATUS(gotry_copy_list_get(list, 0, &listing), GOTRY_STATUS_INVALID_ARGUMENT);
    STATUS(gotry_copy_list_get(NULL, 0, &listing), GOTRY_STATUS_NULL_ARGUMENT);
    STATUS(gotry_copy_list_get(list, 0, NULL), GOTRY_STATUS_NULL_ARGUMENT);
    gotry_copy_list_free(list);
    STATUS(gotry_epoch_copies_forget_copies(copies, lease, &ids, &err), GOTRY_STATUS_OK);
    STATUS(gotry_copy_id_list_len(ids, &count), GOTRY_STATUS_OK);
    CHECK(count == 0);
    STATUS(gotry_copy_id_list_len(NULL, &count), GOTRY_STATUS_NULL_ARGUMENT);
    STATUS(gotry_copy_id_list_len(ids, NULL), GOTRY_STATUS_NULL_ARGUMENT);
    STATUS(gotry_copy_id_list_get(ids, 0, &id), GOTRY_STATUS_INVALID_ARGUMENT);
    STATUS(gotry_copy_id_list_get(NULL, 0, &id), GOTRY_STATUS_NULL_ARGUMENT);
    STATUS(gotry_copy_id_list_get(ids, 0, NULL), GOTRY_STATUS_NULL_ARGUMENT);
    gotry_copy_id_list_free(ids);

    /* The names of the reasons, in the core's words. */
    static const char *const reasons[6] = {"manifest", "tenant", "checksum", "integrity", "fold", "superseded"};
    for (int i = 0; i < 6; i++) {
        const char *name = gotry_skip_reason_name(GOTRY_SKIP_REASON_MANIFEST + i);
        CHECK(name != NULL && strcmp(name, reasons[i]) == 0);
    }
    CHECK(GOTRY_SKIP_REASON_SUPERSEDED == GOTRY_SKIP_REASON_MANIFEST + 5);
    CHECK(gotry_skip_reason_name(0) == NULL && gotry_skip_reason_name(7) == NULL);

    STATUS(gotry_error_backend_code(NULL, &message), GOTRY_STATUS_NULL_ARGUMENT);
    gotry_durable_store_free(NULL);
    gotry_epoch_copies_free(NULL);
    gotry_restore_report_free(NULL);
    gotry_copy_list_free(NULL);
    gotry_copy_id_list_free(NULL);
    gotry_lease_free(lease);
    gotry_store_free(leases);
    gotry_epoch_copies_free(copies);
    gotry_durable_store_free(durable);
    gotry_error_free(err);
}

/* An empty root, a file-system root and an empty store path are INVALID_ARGUMENT before any
 * I/O, in every call that takes one: the system would read '' as the working directory. */
static void empty_and_system_roots(const char *dir) {
    GotryError *err = NULL;
    GotryDurableStore *durable = NULL;
    GotryEpochCopies *copies = NULL;
    GotryStore *leases = NULL;
    GotryLease *lease = NULL;
    GotryRouter *router = NULL;
    GotryRouterOptions options;
    GotryWrittenCopy written;
    GotryRestoreReport *report = NULL;
    GotryCopyList *list = NULL;
    size_t count = 1;
    char path[1200];
    const Tenant tenant = fresh_tenant("roots");

    snprintf(path, sizeof path, "%s/store", dir);
    STATUS(gotry_durable_store_open(path, strlen(path), &durable, &err), GOTRY_STATUS_OK);
    STATUS(gotry_epoch_copies_new(durable, &copies), GOTRY_STATUS_OK);
    snprintf(path, sizeof path, "%s/leases.db", dir);
    STATUS(gotry_store_open(path, strlen(path), NULL, &leases, &err), GOTRY_STATUS_OK);
    STATUS(gotry_lease_acquire(leases, tenant.key, strlen(tenant.key), S("replica"), 60000, 1000, NULL, &lease, &err),
           GOTRY_STATUS_OK);
    STATUS(gotry_router_options_default(&options), GOTRY_STATUS_OK);
    static const char *const roots[4] = {"", "/", "//", "/.."};
    for (int i = 0; i < 4; i++) {
        const char *root = roots[i];
        STATUS(gotry_epoch_copies_write_copy(copies, lease, root, strlen(root), &written, &err),
               GOTRY_STATUS_INVALID_ARGUMENT);
        CHECK(message_has(err, "a tenant root must not be"));
        ERROR_IS(GOTRY_STATUS_INVALID_ARGUMENT, "ERR_OUT_OF_RANGE");
        STATUS(gotry_epoch_copies_restore(copies, lease, root, strlen(root), NULL, NULL, &report, &err),
               GOTRY_STATUS_INVALID_ARGUMENT);
        CHECK(message_has(err, "a tenant root must not be"));
        ERROR_IS(GOTRY_STATUS_INVALID_ARGUMENT, "ERR_OUT_OF_RANGE");
        CHECK(report == NULL);
        STATUS(gotry_router_start(leases, durable, root, strlen(root), S("r"), 60000, 1000, &options, &router, &err),
               GOTRY_STATUS_INVALID_ARGUMENT);
        CHECK(message_has(err, "a router's state root must not be"));
        ERROR_IS(GOTRY_STATUS_INVALID_ARGUMENT, "ERR_OUT_OF_RANGE");
        CHECK(router == NULL);
        GotryDurableStore *other = NULL;
        STATUS(gotry_durable_store_open(root, strlen(root), &other, &err), GOTRY_STATUS_INVALID_ARGUMENT);
        CHECK(message_has(err, "a durable store folder must not be"));
        ERROR_IS(GOTRY_STATUS_INVALID_ARGUMENT, "ERR_OUT_OF_RANGE");
        CHECK(other == NULL);
    }
    /* Nothing reached the store: a restore would have written its tenure marker. */
    STATUS(gotry_epoch_copies_list(copies, tenant.key, strlen(tenant.key), &list, &err), GOTRY_STATUS_OK);
    STATUS(gotry_copy_list_len(list, &count), GOTRY_STATUS_OK);
    CHECK(count == 0);
    gotry_copy_list_free(list);
    snprintf(path, sizeof path, "%s/store/orgs", dir);
    CHECK(access(path, F_OK) != 0);
    gotry_lease_free(lease);
    gotry_store_free(leases);
    gotry_epoch_copies_free(copies);
    gotry_durable_store_free(durable);
    gotry_error_free(err);
}

/* An S3 endpoint that refuses connections: unavailable, with the backend's code, and no
 * credential of the URL in the message. The timeout leaves room for valgrind's pace, so the
 * refusal (S3_CONNECT) and not the deadline (S3_TIMEOUT) ends the attempt. */
static void s3_unreachable(void) {
    GotryError *err = NULL;
    GotryDurableStore *durable = NULL;
    const char *code = NULL;
    const char *message = NULL;
    size_t len = 0;
    static const char url[] = "s3://AKIAEXAMPLE:s3cret@bucket/p?endpoint=http://127.0.0.1:1&timeout_ms=3000";
    STATUS(gotry_durable_store_open_url(S(url), &durable, &err), GOTRY_STATUS_DURABLE_STORE_UNAVAILABLE);
    CHECK(durable == NULL);
    STATUS(gotry_error_backend_code(err, &code), GOTRY_STATUS_OK);
    CHECK(code != NULL && strcmp(code, "S3_CONNECT") == 0);
    STATUS(gotry_error_message(err, &message, &len), GOTRY_STATUS_OK);
    CHECK(message != NULL && len > 0 && strstr(message, "AKIAEXAMPLE") == NULL && strstr(message, "s3cret") == NULL);
    ERROR_IS(GOTRY_STATUS_DURABLE_STORE_UNAVAILABLE, "GOTRY_TENANT_DURABLE_STORE_UNAVAILABLE");
}

static int subdir(const char *dir, const char *name, char *out, size_t capacity) {
    snprintf(out, capacity, "%s/%s", dir, name);
    return make_dirs(out);
}

int main(int argc, char **argv) {
    if (argc != 2 && argc != 3) {
        fprintf(stderr, "usage: %s SCRATCH_DIR [S3_URL]\n", argv[0]);
        return 2;
    }
    char dir[1024];
    CHECK(argv[1][0] == '/' && shell_safe(argv[1]) && strlen(argv[1]) < 900);
    if (argc == 3) {
        const char *const urls[3] = {argv[2], argv[2], argv[2]};
        CHECK(subdir(argv[1], "stale-writer-s3", dir, sizeof dir) == 0);
        stale_writer(dir, urls, "s3");
        s3_unreachable();
        printf("copies_test (S3 store): %d checks, %d failed\n", checks, failures);
        return failures == 0 ? 0 : 1;
    }
    /* One folder, spelled three ways: each holder opens it as a separate process would. */
    char store_dir[1100];
    char file_url[1200];
    char plain_url[1200];
    CHECK(subdir(argv[1], "stale-writer-dir", dir, sizeof dir) == 0);
    snprintf(store_dir, sizeof store_dir, "%s/store", dir);
    snprintf(file_url, sizeof file_url, "file://%s", store_dir);
    snprintf(plain_url, sizeof plain_url, "file:%s", store_dir);
    GotryDurableStore *opened = NULL;
    CHECK(gotry_durable_store_open(store_dir, strlen(store_dir), &opened, NULL) == GOTRY_STATUS_OK);
    gotry_durable_store_free(opened);
    const char *const urls[3] = {file_url, plain_url, file_url};
    stale_writer(dir, urls, "dir");
    CHECK(subdir(argv[1], "stored", dir, sizeof dir) == 0);
    what_a_copy_stored(dir);
    CHECK(subdir(argv[1], "invalid", dir, sizeof dir) == 0);
    restore_invalid_and_conflict(dir);
    CHECK(subdir(argv[1], "unavailable", dir, sizeof dir) == 0);
    store_unavailable(dir);
    CHECK(subdir(argv[1], "arguments", dir, sizeof dir) == 0);
    arguments(dir);
    CHECK(subdir(argv[1], "roots", dir, sizeof dir) == 0);
    empty_and_system_roots(dir);
    printf("copies_test (directory store): %d checks, %d failed\n", checks, failures);
    return failures == 0 ? 0 : 1;
}
