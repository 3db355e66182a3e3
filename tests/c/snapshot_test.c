/*
 * A copy of a tenant root whose ledger the host holds open through its own SQLite.
 *
 * The host here is a C program on the system's libsqlite3 (-lsqlite3), as a C or C++ service
 * is: it opens its tenant's ledger in WAL mode with automatic checkpoints off and writes rows
 * that exist only in the -wal file. This library carries a SQLite of its own; had it opened
 * that ledger (for the copy's backup) and closed it again, its close would have dropped the
 * host's POSIX locks (they belong to the process) and, seeing no other connection it knows
 * of, checkpointed and deleted the WAL the host still writes to. So:
 *
 *   (a) a copy without a snapshot function fails with GOTRY_STATUS_OPEN_IN_PROCESS (code
 *       GOTRY_TENANT_OPEN_IN_PROCESS); the -wal file is still there, unchanged, and the host's connection
 *       goes on working; nothing was stored;
 *   (b) with the host's snapshot function the copy succeeds, and a restore into another root
 *       has the WAL-only rows. A held ledger whose WAL has frames is read without SQLite (the
 *       file through the host's descriptor, and the frames); the host's function is asked
 *       where the WAL tells nothing (emptied by a checkpoint), through the backup API of its
 *       own connection, then VACUUM INTO. A refusing function gives
 *       GOTRY_STATUS_HOST_CALLBACK_FAILED with its value and message; a restore into the root
 *       the host holds is refused (OPEN_IN_PROCESS) and leaves the host's ledger alone.
 *
 * Linked against the .so, the host's sqlite3_* calls reach the system's SQLite (the .so
 * exports none of its own). Linked against the .a, they reach the library's bundled SQLite
 * (its definitions win over -lsqlite3): the program prints which one it got, and passes
 * either way.
 *
 * Usage: snapshot_test SCRATCH_DIR   (an existing, empty, writable directory)
 * Link with -lsqlite3 (shared library) and -pthread.
 */
#define _POSIX_C_SOURCE 200809L

#include "host_sqlite.h"

static const int64_t TTL_MS = 1000;
static const int64_t MARGIN_MS = 100;

static void copy_file(const char *from, const char *to) {
    FILE *in = fopen(from, "rb");
    FILE *out = fopen(to, "wb");
    char buffer[8192];
    size_t got;
    CHECK(in != NULL && out != NULL);
    while (in != NULL && out != NULL && (got = fread(buffer, 1, sizeof buffer, in)) > 0)
        CHECK(fwrite(buffer, 1, got, out) == got);
    if (in != NULL) fclose(in);
    if (out != NULL) fclose(out);
}

static size_t copies_listed(const GotryEpochCopies *copies, const Tenant *tenant) {
    GotryCopyList *list = NULL;
    size_t len = 99;
    CHECK(gotry_epoch_copies_list(copies, tenant->key, strlen(tenant->key), &list, NULL) == GOTRY_STATUS_OK);
    CHECK(gotry_copy_list_len(list, &len) == GOTRY_STATUS_OK);
    gotry_copy_list_free(list);
    return len;
}

static void arguments(GotryDurableStore *durable, HostSnapshots *host) {
    GotryEpochCopies *copies = NULL;
    GotryError *err = NULL;
    int32_t code = 0;
    STATUS(gotry_epoch_copies_new_with_snapshot(NULL, host_snapshot, host, &copies), GOTRY_STATUS_NULL_ARGUMENT);
    STATUS(gotry_epoch_copies_new_with_snapshot(durable, NULL, host, &copies), GOTRY_STATUS_NULL_ARGUMENT);
    STATUS(gotry_epoch_copies_new_with_snapshot(durable, host_snapshot, host, NULL), GOTRY_STATUS_NULL_ARGUMENT);
    CHECK(copies == NULL);
    /* user_data is the host's: NULL is passed through, not refused. */
    STATUS(gotry_epoch_copies_new_with_snapshot(durable, host_snapshot, NULL, &copies), GOTRY_STATUS_OK);
    gotry_epoch_copies_free(copies);
    STATUS(gotry_error_host_code(NULL, &code), GOTRY_STATUS_NULL_ARGUMENT);
    CHECK(gotry_status_name(GOTRY_STATUS_HOST_CALLBACK_FAILED) != NULL &&
          strcmp(gotry_status_name(GOTRY_STATUS_HOST_CALLBACK_FAILED), "GOTRY_STATUS_HOST_CALLBACK_FAILED") == 0);
    CHECK(gotry_status_code(GOTRY_STATUS_HOST_CALLBACK_FAILED) == NULL);
}

int main(int argc, char **argv) {
    if (argc != 2 || argv[1][0] != '/' || strlen(argv[1]) > 900) {
        fprintf(stderr, "usage: %s ABSOLUTE_SCRATCH_DIR\n", argv[0]);
        return 2;
    }
    const char *dir = argv[1];
    printf("host SQLite: %s at run time, %s in the header it was compiled with (%s)\n", sqlite3_libversion(),
           SQLITE_VERSION,
           strcmp(sqlite3_libversion(), SQLITE_VERSION) == 0 ? "the system's library"
                                                             : "another library: the bundled one of the .a");
    GotryError *err = NULL;
    char path[2400];
    char state_a[1000];
    char state_b[1000];
    char root_a[2048];
    char root_b[2048];
    char rows[512];
    int64_t now = 0;
    snprintf(state_a, sizeof state_a, "%s/replica-a", dir);
    snprintf(state_b, sizeof state_b, "%s/replica-b", dir);
    const Tenant tenant = tenant_named("snapshot-test/one");
    tenant_root(state_a, &tenant, root_a, sizeof root_a);
    tenant_root(state_b, &tenant, root_b, sizeof root_b);

    GotryManualClock *wall = NULL;
    GotryManualClock *clock_a = NULL;
    GotryManualClock *clock_b = NULL;
    GotryStore *leases = NULL;
    GotryDurableStore *durable = NULL;
    GotryLease *a = NULL;
    GotryLease *b = NULL;
    STATUS(gotry_manual_clock_new(1000000, &wall), GOTRY_STATUS_OK);
    STATUS(gotry_manual_clock_new(0, &clock_a), GOTRY_STATUS_OK);
    STATUS(gotry_manual_clock_new(0, &clock_b), GOTRY_STATUS_OK);
    snprintf(path, sizeof path, "%s/leases.db", dir);
    STATUS(gotry_store_open(path, strlen(path), wall, &leases, &err), GOTRY_STATUS_OK);
    snprintf(path, sizeof path, "%s/durable", dir);
    STATUS(gotry_durable_store_open(path, strlen(path), &durable, &err), GOTRY_STATUS_OK);
    STATUS(gotry_lease_acquire(leases, tenant.key, strlen(tenant.key), S("replica-a"), TTL_MS, MARGIN_MS, clock_a,
                               &a, &err),
           GOTRY_STATUS_OK);

    /* The host's ledger: two rows checkpointed into the main file, then WAL mode without
     * checkpoints and two rows that exist only in the -wal file. */
    HostLedger ledger;
    char wal[2400];
    CHECK(host_open(&ledger, root_a, HOST_WAL) == 0);
    CHECK(host_exec(ledger.db, "PRAGMA journal_mode = DELETE") == SQLITE_OK);
    CHECK(host_insert(ledger.db, "one") == 0 && host_insert(ledger.db, "two") == 0);
    CHECK(host_exec(ledger.db, "PRAGMA journal_mode = WAL; PRAGMA wal_autocheckpoint = 0") == SQLITE_OK);
    CHECK(host_insert(ledger.db, "three") == 0 && host_insert(ledger.db, "four") == 0);
    snprintf(path, sizeof path, "%s/notes.txt", root_a);
    FILE *notes = fopen(path, "w");
    CHECK(notes != NULL && fputs("plain file", notes) >= 0);
    if (notes != NULL) fclose(notes);
    snprintf(wal, sizeof wal, "%s-wal", ledger.path);
    long long wal_size = file_size(wal);
    CHECK(wal_size > 0);
    /* Proof that rows three and four are in the WAL only: the main file alone lacks them. */
    snprintf(path, sizeof path, "%s/main-file-alone.db", dir);
    copy_file(ledger.path, path);
    ledger_rows(path, rows, sizeof rows);
    CHECK(strcmp(rows, "one,two") == 0);
    host_rows(ledger.db, rows, sizeof rows);
    CHECK(strcmp(rows, "one,two,three,four") == 0);

    /* (a) No snapshot function: refused before anything of the root is opened. */
    GotryEpochCopies *plain = NULL;
    GotryWrittenCopy written;
    memset(&written, 0, sizeof written);
    STATUS(gotry_epoch_copies_new(durable, &plain), GOTRY_STATUS_OK);
    STATUS(gotry_epoch_copies_write_copy(plain, a, root_a, strlen(root_a), &written, &err),
           GOTRY_STATUS_OPEN_IN_PROCESS);
    CHECK(message_has(err, "gotry-state.db") && message_has(err, "open"));
    ERROR_IS(GOTRY_STATUS_OPEN_IN_PROCESS, "GOTRY_TENANT_OPEN_IN_PROCESS");
    CHECK(written.files == 0 && written.epoch == 0);
    CHECK(file_size(wal) == wal_size);
    CHECK(host_insert(ledger.db, "five") == 0);
    host_rows(ledger.db, rows, sizeof rows);
    CHECK(strcmp(rows, "one,two,three,four,five") == 0);
    CHECK(file_size(wal) > wal_size);
    CHECK(copies_listed(plain, &tenant) == 0);

    /* (b) The host's snapshot function, asked while the WAL tells nothing (a checkpoint emptied
     * it): first refusing, then the backup API. */
    CHECK(host_exec(ledger.db, "PRAGMA wal_checkpoint(TRUNCATE)") == SQLITE_OK);
    CHECK(file_size(wal) == 0);
    HostSnapshots host;
    snapshots_init(&host);
    snapshots_hold(&host, &ledger);
    GotryEpochCopies *copies = NULL;
    STATUS(gotry_epoch_copies_new_with_snapshot(durable, host_snapshot, &host, &copies), GOTRY_STATUS_OK);

    host.fail_with = SQLITE_BUSY;
    int32_t code = 0;
    STATUS(gotry_epoch_copies_write_copy(copies, a, root_a, strlen(root_a), &written, &err),
           GOTRY_STATUS_HOST_CALLBACK_FAILED);
    STATUS(gotry_error_host_code(err, &code), GOTRY_STATUS_OK);
    CHECK(code == SQLITE_BUSY);
    CHECK(message_has(err, "the host refuses to snapshot") && message_has(err, "gotry-state.db"));
    ERROR_IS(GOTRY_STATUS_HOST_CALLBACK_FAILED, "HOST_CALLBACK");
    CHECK(written.files == 0);
    /* A message that fills the buffer without a NUL is taken whole, and never read past. */
    host.fill_message = 1;
    host.fail_with = -7;
    STATUS(gotry_epoch_copies_write_copy(copies, a, root_a, strlen(root_a), &written, &err),
           GOTRY_STATUS_HOST_CALLBACK_FAILED);
    STATUS(gotry_error_host_code(err, &code), GOTRY_STATUS_OK);
    CHECK(code == -7);
    {
        const char *message = NULL;
        size_t len = 0;
        STATUS(gotry_error_message(err, &message, &len), GOTRY_STATUS_OK);
        size_t xs = 0;
        for (size_t i = 0; i < len; i++) xs += message[i] == 'x';
        CHECK(xs == GOTRY_HOST_MESSAGE_BUFFER_LEN);
    }
    ERROR_IS(GOTRY_STATUS_HOST_CALLBACK_FAILED, "HOST_CALLBACK");
    host.fill_message = 0;
    host.fail_with = 0;
    CHECK(copies_listed(copies, &tenant) == 0);

    STATUS(gotry_epoch_copies_write_copy(copies, a, root_a, strlen(root_a), &written, &err), GOTRY_STATUS_OK);
    CHECK(written.epoch == 1 && written.files == 2 && written.bytes > 0);
    CHECK(host.calls == 3 && host.bad_args == 0 && host.on_main_thread == 3);
    CHECK(exists(wal));
    /* A row in the WAL: the copy reads the file and the frames, the host is not asked, and it
     * stores a delta of a few blocks. */
    CHECK(host_insert(ledger.db, "six") == 0);
    CHECK(file_size(wal) > 0);
    GotryWrittenCopy from_wal;
    memset(&from_wal, 0, sizeof from_wal);
    STATUS(gotry_epoch_copies_write_copy(copies, a, root_a, strlen(root_a), &from_wal, &err), GOTRY_STATUS_OK);
    /* The delta rides inline in the manifest: the copy is one object. */
    CHECK(from_wal.seq > written.seq && from_wal.files == 2 && from_wal.pieces_uploaded == 0);
    CHECK(from_wal.bytes_uploaded < 4 * 4096 + 256);
    CHECK(host.calls == 3);
    /* Then VACUUM INTO, on the same connection, the WAL emptied again. */
    CHECK(host_exec(ledger.db, "PRAGMA wal_checkpoint(TRUNCATE)") == SQLITE_OK);
    host.method = SNAPSHOT_VACUUM_INTO;
    GotryWrittenCopy second;
    memset(&second, 0, sizeof second);
    STATUS(gotry_epoch_copies_write_copy(copies, a, root_a, strlen(root_a), &second, &err), GOTRY_STATUS_OK);
    CHECK(second.epoch == 1 && second.seq > from_wal.seq && second.files == 2);
    CHECK(host.calls == 4 && host.bad_args == 0);
    CHECK(exists(wal));
    CHECK(host_insert(ledger.db, "seven") == 0);
    host_rows(ledger.db, rows, sizeof rows);
    CHECK(strcmp(rows, "one,two,three,four,five,six,seven") == 0);
    CHECK(copies_listed(copies, &tenant) == 3);

    /* The next tenure: A's lease runs out on the store's clock, B takes epoch 2. */
    STATUS(gotry_manual_clock_advance(wall, TTL_MS + 500, &now, &err), GOTRY_STATUS_OK);
    STATUS(gotry_lease_acquire(leases, tenant.key, strlen(tenant.key), S("replica-b"), TTL_MS, MARGIN_MS, clock_b,
                               &b, &err),
           GOTRY_STATUS_OK);
    GotryRestoreReport *report = NULL;
    /* Into the root the host still holds: refused, the host's ledger as it was. */
    STATUS(gotry_epoch_copies_restore(plain, b, root_a, strlen(root_a), NULL, NULL, &report, &err),
           GOTRY_STATUS_OPEN_IN_PROCESS);
    ERROR_IS(GOTRY_STATUS_OPEN_IN_PROCESS, "GOTRY_TENANT_OPEN_IN_PROCESS");
    CHECK(report == NULL);
    host_rows(ledger.db, rows, sizeof rows);
    CHECK(strcmp(rows, "one,two,three,four,five,six,seven") == 0);
    CHECK(exists(wal));
    /* Into B's own root: the newest copy, with the rows that were only in A's WAL. */
    STATUS(gotry_epoch_copies_restore(plain, b, root_b, strlen(root_b), NULL, NULL, &report, &err),
           GOTRY_STATUS_OK);
    GotryRestoreView view;
    memset(&view, 0, sizeof view);
    STATUS(gotry_restore_report_view(report, &view), GOTRY_STATUS_OK);
    CHECK(view.restored && view.copy.epoch == 1 && view.copy.seq == second.seq && view.files == 2 &&
          view.skipped_len == 0);
    gotry_restore_report_free(report);
    snprintf(path, sizeof path, "%s/gotry-state/gotry-state.db", root_b);
    ledger_rows(path, rows, sizeof rows);
    CHECK(strcmp(rows, "one,two,three,four,five,six") == 0);
    /* And the other error kinds carry no host code. */
    STATUS(gotry_epoch_copies_restore(plain, b, root_a, strlen(root_a), NULL, NULL, &report, &err),
           GOTRY_STATUS_OPEN_IN_PROCESS);
    STATUS(gotry_error_host_code(err, &code), GOTRY_STATUS_NO_VALUE);
    ERROR_IS(GOTRY_STATUS_OPEN_IN_PROCESS, "GOTRY_TENANT_OPEN_IN_PROCESS");

    arguments(durable, &host);

    /* The host closes its ledger: from now on this library may read it itself. */
    snapshots_release(&host, &ledger);
    host_close(&ledger);
    ledger_rows(ledger.path, rows, sizeof rows);
    CHECK(strcmp(rows, "one,two,three,four,five,six,seven") == 0);

    gotry_epoch_copies_free(copies);
    gotry_epoch_copies_free(plain);
    gotry_lease_free(a);
    gotry_lease_free(b);
    gotry_durable_store_free(durable);
    gotry_store_free(leases);
    gotry_manual_clock_free(wall);
    gotry_manual_clock_free(clock_a);
    gotry_manual_clock_free(clock_b);
    snapshots_destroy(&host);
    printf("snapshot_test: %d checks, %d failed\n", checks, failures);
    return failures == 0 ? 0 : 1;
}
