// The C++ host: the same checks through the header's extern "C" block, with RAII owners.
// Usage: smoke-cpp KEY_HEX ISSUER SUBJECT EXPECTED_LEDGER_ID DB_PATH
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "gotry_tenant_state.h"

namespace {
struct StoreFree { void operator()(GotryStore *s) const { gotry_store_free(s); } };
struct LeaseFree { void operator()(GotryLease *l) const { gotry_lease_free(l); } };
struct ErrorFree { void operator()(GotryError *e) const { gotry_error_free(e); } };

bool ok(const char *what, GotryStatus status) {
    if (status != GOTRY_STATUS_OK) std::fprintf(stderr, "%s: %s\n", what, gotry_status_name(status));
    return status == GOTRY_STATUS_OK;
}
}  // namespace

int main(int argc, char **argv) {
    if (argc != 6) return 2;
    if (std::string(gotry_version()) != GOTRY_TENANT_STATE_VERSION) return 1;
    const std::string hex = argv[1], issuer = argv[2], subject = argv[3], expected = argv[4], path = argv[5];
    std::vector<uint8_t> key;
    for (size_t i = 0; i + 1 < hex.size(); i += 2) key.push_back(static_cast<uint8_t>(std::stoul(hex.substr(i, 2), nullptr, 16)));

    char id[GOTRY_LEDGER_TENANT_ID_BUFFER_LEN];
    if (!ok("derive", gotry_derive_ledger_tenant_id(key.data(), key.size(), issuer.data(), issuer.size(), subject.data(),
                                                    subject.size(), id, sizeof id, nullptr)))
        return 1;
    if (expected != id) {
        std::fprintf(stderr, "derived %s, the vector says %s\n", id, expected.c_str());
        return 1;
    }
    char lease_key[GOTRY_LEASE_KEY_BUFFER_LEN];
    if (!ok("key", gotry_lease_key_for("acme", 4, id, expected.size(), lease_key, sizeof lease_key, nullptr))) return 1;

    GotryStore *raw_store = nullptr;
    if (!ok("open", gotry_store_open(path.data(), path.size(), nullptr, &raw_store, nullptr))) return 1;
    std::unique_ptr<GotryStore, StoreFree> store(raw_store);
    GotryLease *raw_lease = nullptr;
    const std::string owner = "cpp", lk = lease_key;
    if (!ok("acquire", gotry_lease_acquire(store.get(), lk.data(), lk.size(), owner.data(), owner.size(), 30000, 1000,
                                           nullptr, &raw_lease, nullptr)))
        return 1;
    std::unique_ptr<GotryLease, LeaseFree> lease(raw_lease);
    GotryError *raw_error = nullptr;
    GotryStatus renewed = gotry_lease_renew(lease.get(), &raw_error);
    std::unique_ptr<GotryError, ErrorFree> error(raw_error);
    if (!ok("renew", renewed) || !ok("release", gotry_lease_release(lease.get(), nullptr))) return 1;
    std::printf("c++: vector %s, acquire/renew/release, version %s\n", id, gotry_version());
    return 0;
}
