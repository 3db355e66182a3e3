/*
 * A C host built from an installed prefix with pkg-config: one shared id vector, one lease
 * taken, renewed and released on a file store, and the library loaded is the one the header
 * describes. Usage: smoke KEY_HEX ISSUER SUBJECT EXPECTED_LEDGER_ID DB_PATH
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "gotry_tenant_state.h"

static int failed(const char *what, GotryStatus status, GotryError *err) {
    const char *message = NULL;
    size_t len = 0;
    if (err != NULL && gotry_error_message(err, &message, &len) == GOTRY_STATUS_OK)
        fprintf(stderr, "%s: %s: %.*s\n", what, gotry_status_name(status), (int)len, message);
    else
        fprintf(stderr, "%s: %s\n", what, gotry_status_name(status));
    gotry_error_free(err);
    return 1;
}

int main(int argc, char **argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: %s KEY_HEX ISSUER SUBJECT EXPECTED_LEDGER_ID DB_PATH\n", argv[0]);
        return 2;
    }
    if (strcmp(gotry_version(), GOTRY_TENANT_STATE_VERSION) != 0) {
        fprintf(stderr, "header %s, library %s\n", GOTRY_TENANT_STATE_VERSION, gotry_version());
        return 1;
    }
    uint8_t key[64];
    size_t key_len = strlen(argv[1]) / 2;
    if (key_len > sizeof key) return 2;
    for (size_t i = 0; i < key_len; i++) {
        unsigned byte;
        if (sscanf(argv[1] + 2 * i, "%2x", &byte) != 1) return 2;
        key[i] = (uint8_t)byte;
    }
    GotryError *err = NULL;
    char id[GOTRY_LEDGER_TENANT_ID_BUFFER_LEN];
    GotryStatus status = gotry_derive_ledger_tenant_id(key, key_len, argv[2], strlen(argv[2]), argv[3],
                                                       strlen(argv[3]), id, sizeof id, &err);
    if (status != GOTRY_STATUS_OK) return failed("derive", status, err);
    if (strcmp(id, argv[4]) != 0) {
        fprintf(stderr, "derived %s, the vector says %s\n", id, argv[4]);
        return 1;
    }
    char lease_key[GOTRY_LEASE_KEY_BUFFER_LEN];
    status = gotry_lease_key_for("acme", 4, id, strlen(id), lease_key, sizeof lease_key, &err);
    if (status != GOTRY_STATUS_OK) return failed("lease key", status, err);

    GotryStore *store = NULL;
    GotryLease *lease = NULL;
    status = gotry_store_open(argv[5], strlen(argv[5]), NULL, &store, &err);
    if (status != GOTRY_STATUS_OK) return failed("open", status, err);
    status = gotry_lease_acquire(store, lease_key, strlen(lease_key), "c", 1, 30000, 1000, NULL, &lease, &err);
    if (status != GOTRY_STATUS_OK) return failed("acquire", status, err);
    if ((status = gotry_lease_assert_held(lease, &err)) != GOTRY_STATUS_OK) return failed("gate", status, err);
    if ((status = gotry_lease_renew(lease, &err)) != GOTRY_STATUS_OK) return failed("renew", status, err);
    if ((status = gotry_lease_release(lease, &err)) != GOTRY_STATUS_OK) return failed("release", status, err);
    gotry_lease_free(lease);
    gotry_store_free(store);
    printf("c: vector %s, acquire/renew/release, version %s\n", id, gotry_version());
    return 0;
}
