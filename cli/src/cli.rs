//! The command line: commands, options, and the help that shows an example of each.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::failure::exit_status_help;

#[derive(Debug, Parser)]
#[command(
    name = "gotry-tenant",
    version,
    about = "Inspect and repair gotry tenant leases, check and restore durable copies, see what routers serve, derive tenant ids, and watch a handoff between replicas",
    after_help = top_level_help(),
    subcommand_required = true,
    arg_required_else_help = false
)]
pub struct Cli {
    /// Print JSON for scripts instead of text for people; failures are one JSON line on stderr
    #[arg(long, global = true)]
    pub json: bool,

    #[command(subcommand)]
    pub command: Command,
}

fn top_level_help() -> String {
    format!(
        "Examples:
  gotry-tenant demo
  gotry-tenant lease list --held --store /var/lib/gotry/leases.db
  gotry-tenant copies restore acme/t-5e0c2ba9c4c6b3b5a0f1d1e4b6f5a7c2 --durable /srv/gotry-copies --to ./look
  gotry-tenant router status --org acme --store /var/lib/gotry/leases.db --durable /srv/gotry-copies
  GOTRY_ORGANIZATION_KEY_FILE=org.key gotry-tenant id derive --issuer https://idp.example --subject alice

The organization key is read from --key-file PATH, or from the environment: GOTRY_ORGANIZATION_KEY_FILE
(a path) or GOTRY_ORGANIZATION_KEY. Both hold the key as hex text of at least 32 bytes
(`openssl rand -hex 32`). It is never taken from an argument, which other users can read.

{}",
        exit_status_help()
    )
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Play a handoff of one tenant between two replicas and print its timeline
    #[command(after_help = "Examples:
  gotry-tenant demo                          # a throwaway SQLite store on a simulated clock: instant
  gotry-tenant demo --store demo.db          # a store you name, on its own clock: about 1.3 s
  gotry-tenant demo --json | jq '.events[] | [.actor, .action, .outcome]'")]
    Demo(DemoArgs),

    /// Read, list and repair leases in a lease store
    #[command(
        subcommand,
        subcommand_required = true,
        arg_required_else_help = false,
        after_help = "Examples:
  gotry-tenant lease list
  gotry-tenant lease read acme/t-5e0c2ba9c4c6b3b5a0f1d1e4b6f5a7c2 --store /var/lib/gotry/leases.db"
    )]
    Lease(LeaseCommand),

    /// List, verify and restore a tenant's durable copies
    #[command(
        subcommand,
        subcommand_required = true,
        arg_required_else_help = false,
        after_help = "Examples:
  gotry-tenant copies list acme/t-5e0c2ba9c4c6b3b5a0f1d1e4b6f5a7c2 --durable /srv/gotry-copies
  gotry-tenant copies verify acme/t-5e0c2ba9c4c6b3b5a0f1d1e4b6f5a7c2 --durable 's3://copies/prod?endpoint=http://127.0.0.1:9000&region=us-east-1'

Copies live in a durable store: a folder (a path, or file:///abs/dir) or an S3 bucket
(s3://bucket/prefix?endpoint=...&region=..., credentials from the AWS environment variables)."
    )]
    Copies(CopiesCommand),

    /// What a fleet of routers serves, as the lease store and the durable store see it
    #[command(
        subcommand,
        subcommand_required = true,
        arg_required_else_help = false,
        after_help = "Example:
  gotry-tenant router status --store /var/lib/gotry/leases.db --durable /srv/gotry-copies

A router lives inside its host process, out of this tool's reach; `router status` shows what
every router's work leaves in the stores: who holds each tenant, and its newest copy."
    )]
    Router(RouterCommand),

    /// Derive and check tenant ids and the names built from them
    #[command(
        subcommand,
        subcommand_required = true,
        arg_required_else_help = false,
        after_help = "Ids:
  organization id          1 to 63 of a-z 0-9 '-', not starting with '-'     acme
  ledger tenant id         't-' and 32 lowercase hex digits                  t-5e0c2ba9c4c6b3b5a0f1d1e4b6f5a7c2
  prompt cache partition   'pc-' and 32 lowercase hex digits                 pc-0d9f6e1a2b3c4d5e6f708192a3b4c5d6

Examples:
  gotry-tenant id derive --key-file org.key --issuer https://idp.example --subject alice
  gotry-tenant id lease-key acme t-5e0c2ba9c4c6b3b5a0f1d1e4b6f5a7c2"
    )]
    Id(IdCommand),

    /// Print a shell completion script
    #[command(after_help = "Examples:
  gotry-tenant completions bash > ~/.local/share/bash-completion/completions/gotry-tenant
  gotry-tenant completions zsh > ~/.zfunc/_gotry-tenant
  gotry-tenant completions fish > ~/.config/fish/completions/gotry-tenant.fish")]
    Completions {
        /// The shell to complete for
        shell: clap_complete::Shell,
    },
}

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Play on this store (a URL, or a SQLite file path, created if missing) instead of a
    /// throwaway one on a simulated clock; a store you name runs on its own clock, in real time
    #[arg(long, value_name = "URL|PATH")]
    pub store: Option<OsString>,
}

/// The store option of every `lease` command.
#[derive(Debug, Args)]
pub struct StoreArg {
    /// The lease store: a URL (sqlite:PATH, or any scheme the core opens) or a SQLite file path;
    /// it must exist
    #[arg(long, value_name = "URL|PATH", default_value = crate::store::DEFAULT_STORE)]
    pub store: OsString,
}

#[derive(Debug, Subcommand)]
pub enum LeaseCommand {
    /// Show one tenant's lease: owner, epoch, and when it expires
    #[command(after_help = "Example:
  gotry-tenant lease read acme/t-5e0c2ba9c4c6b3b5a0f1d1e4b6f5a7c2
  (prints nothing but a note, or `null` with --json, when the store has no lease for the key)")]
    Read {
        /// The lease key, ORG/TENANT (see `gotry-tenant id lease-key`)
        key: OsString,
        #[command(flatten)]
        store: StoreArg,
    },

    /// Show the store's log of granted operations, oldest first
    #[command(after_help = "Examples:
  gotry-tenant lease history acme/t-5e0c2ba9c4c6b3b5a0f1d1e4b6f5a7c2
  gotry-tenant lease history --limit 20      # the 20 latest operations on every key")]
    History {
        /// Only this key's operations
        key: Option<OsString>,
        /// Show only the N latest operations
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
        limit: Option<u64>,
        #[command(flatten)]
        store: StoreArg,
    },

    /// List leases with their state on the store's clock
    #[command(after_help = "Examples:
  gotry-tenant lease list --held --prefix acme/
  gotry-tenant lease list --expired --json | jq -r '.leases[].key'")]
    List {
        /// Only leases that hold their tenant now
        #[arg(long, conflicts_with = "expired")]
        held: bool,
        /// Only leases that have expired or were released
        #[arg(long)]
        expired: bool,
        /// Only keys that start with this text, such as an organization: acme/
        #[arg(long, value_name = "ORG/")]
        prefix: Option<OsString>,
        #[command(flatten)]
        store: StoreArg,
    },

    /// End a lease at once, on behalf of its holder (for a replica that died holding it)
    #[command(after_help = "Example:
  gotry-tenant lease release acme/t-5e0c2ba9c4c6b3b5a0f1d1e4b6f5a7c2 --owner replica-a --epoch 3

The store accepts it only from the owner and epoch that hold the record (after expiry too);
the epoch stays, so the next acquire gets the next epoch.")]
    Release(HolderArgs),

    /// Mark every durable copy up to this epoch dead, on behalf of the unexpired holder
    #[command(after_help = "Example:
  gotry-tenant lease forget acme/t-5e0c2ba9c4c6b3b5a0f1d1e4b6f5a7c2 --owner replica-b --epoch 4

The store accepts it only from the owner and epoch that hold the lease, before it expires.")]
    Forget(HolderArgs),

    /// Prune old renewals from the store's log, keeping the last one of each tenure
    #[command(after_help = "Example:
  gotry-tenant lease compact --store /var/lib/gotry/leases.db

The store deletes the renewals older than its retention (ten minutes) that a later renewal of
the same tenure follows; every acquire, release and forget stays, and so does the last renewal
of each tenure. Writes prune as they go: this catches up on a log written before, or by the
reference implementation, in short transactions. A MySQL store on tables of an earlier version
that this user may not migrate (no TRIGGER privilege) says why it cannot (status 7).")]
    Compact {
        #[command(flatten)]
        store: StoreArg,
    },
}

/// A key and the holder a repair acts for.
#[derive(Debug, Args)]
pub struct HolderArgs {
    /// The lease key, ORG/TENANT
    pub key: OsString,
    /// The owner (replica id) that holds the lease, as `lease read` shows it
    #[arg(long)]
    pub owner: OsString,
    /// The epoch that owner holds, as `lease read` shows it
    #[arg(long, allow_negative_numbers = true)]
    pub epoch: i64,
    #[command(flatten)]
    pub store: StoreArg,
}

/// Where `id` commands that need the organization key find it.
#[derive(Debug, Args)]
pub struct KeyArg {
    /// A file holding the organization key as hex text (else GOTRY_ORGANIZATION_KEY_FILE or
    /// GOTRY_ORGANIZATION_KEY)
    #[arg(long, value_name = "PATH")]
    pub key_file: Option<PathBuf>,
}

/// The durable store option of every `copies` command.
#[derive(Debug, Args)]
pub struct DurableArg {
    /// The durable store: a URL (file:///abs/dir, file:rel/dir, s3://bucket/prefix?endpoint=...)
    /// or a folder path; a folder named by its path must exist
    #[arg(long, value_name = "URL|PATH", default_value = crate::durable::DEFAULT_DURABLE)]
    pub durable: OsString,
}

#[derive(Debug, Subcommand)]
pub enum CopiesCommand {
    /// List every copy of a tenant: epoch, sequence, whether its manifest is there, its size
    #[command(after_help = "Example:
  gotry-tenant copies list acme/t-5e0c2ba9c4c6b3b5a0f1d1e4b6f5a7c2 --durable /srv/gotry-copies

A copy is complete once its manifest is written; an incomplete one (a writer that died mid-copy)
is never restored. Listing reads no copy's content: `copies verify` does.")]
    List {
        /// The lease key, ORG/TENANT (see `gotry-tenant id lease-key`)
        key: OsString,
        #[command(flatten)]
        durable: DurableArg,
    },

    /// Check complete copies as a restore would: manifest, tenant, checksums, SQLite integrity
    #[command(after_help = "Examples:
  gotry-tenant copies verify acme/t-5e0c2ba9c4c6b3b5a0f1d1e4b6f5a7c2
  gotry-tenant copies verify acme/t-5e0c2ba9c4c6b3b5a0f1d1e4b6f5a7c2 --epoch 3 --seq 12

Every complete copy gets a verdict, `ok` or the reason a restore would pass over it, and the
command succeeds. Given --epoch and --seq, only that copy is checked, and the command fails
(status 8) when it does not verify. The host's own check of its ledger (`fold`) and the
lineage check (`superseded`) are made by a restore only.")]
    Verify {
        /// The lease key, ORG/TENANT
        key: OsString,
        /// Only the copy of this epoch (with --seq)
        #[arg(long, requires = "seq", allow_negative_numbers = true)]
        epoch: Option<i64>,
        /// Only the copy of this sequence number (with --epoch)
        #[arg(long, requires = "epoch")]
        seq: Option<u64>,
        #[command(flatten)]
        durable: DurableArg,
    },

    /// Restore the newest copy that verifies into a folder, to look at a tenant's data
    #[command(after_help = "Example:
  gotry-tenant copies restore acme/t-5e0c2ba9c4c6b3b5a0f1d1e4b6f5a7c2 --to ./acme-look --store /var/lib/gotry/leases.db

Copies are tried newest first (epoch, then sequence); every copy passed over is shown with its
reason. With --store, copies up to the lease's forgotten epoch (`lease forget`) are left out;
without it none is. The restore takes no lease and records no tenure: it starts no service.
It fails (status 8, GOTRY_TENANT_RESTORE_INVALID) when copies exist but none verifies.")]
    Restore {
        /// The lease key, ORG/TENANT
        key: OsString,
        /// The folder to restore into: created if missing, refused if it holds anything
        /// (unless --force)
        #[arg(long, value_name = "DIR")]
        to: PathBuf,
        /// Replace what DIR holds: its old content is deleted once the copy is in place
        #[arg(long)]
        force: bool,
        /// Only copies of epochs below this one, such as the copies the holder of that epoch
        /// could restore from
        #[arg(long, value_name = "EPOCH", allow_negative_numbers = true)]
        below_epoch: Option<i64>,
        /// The lease store (a URL or a SQLite file path, which must exist) whose record of the
        /// key gives the forgotten epoch; without it no copy is left out as forgotten
        #[arg(long, value_name = "URL|PATH")]
        store: Option<OsString>,
        #[command(flatten)]
        durable: DurableArg,
    },
}

#[derive(Debug, Subcommand)]
pub enum RouterCommand {
    /// Every tenant's lease and newest complete copy: who holds it, and whether its holder
    /// has written a copy in its own epoch
    #[command(after_help = "Examples:
  gotry-tenant router status --store /var/lib/gotry/leases.db --durable /srv/gotry-copies
  gotry-tenant router status --org acme --json | jq -r '.tenants[] | select(.newestCopy.currentEpoch != true) | .key'
  gotry-tenant router status --metrics > /var/lib/node_exporter/textfile/gotry_tenant.prom

One row per lease in the lease store (per lease of ORG with --org). The state is the store's:
`held by OWNER` until the lease expires on the store's clock, then `released` (its holder
gave it back), `forgotten` (its copies up to its epoch are marked dead) or `expired`. The
newest complete copy is the one with the highest epoch, then sequence, whose manifest is
written; `current` says whether it is of the lease's epoch. Nothing is verified: see
`gotry-tenant copies verify KEY`.")]
    Status {
        /// Only this organization's tenants
        #[arg(long, value_name = "ORG")]
        org: Option<OsString>,
        /// Print what the stores show as Prometheus text (format 0.0.4) instead of the table:
        /// leases by state, held leases without a copy of their own epoch, copies by
        /// completeness. For a textfile collector or a scrape through a wrapper
        #[arg(long, conflicts_with = "json")]
        metrics: bool,
        #[command(flatten)]
        store: StoreArg,
        #[command(flatten)]
        durable: DurableArg,
    },
}

#[derive(Debug, Subcommand)]
pub enum IdCommand {
    /// Derive the ledger tenant id of an authenticated principal
    #[command(after_help = "Example:
  gotry-tenant id derive --key-file org.key --issuer https://idp.example --subject alice

Claims are taken byte for byte, without Unicode normalization: 1 to 512 bytes of UTF-8, no NUL.")]
    Derive {
        /// The identity provider's issuer claim
        #[arg(long, allow_hyphen_values = true)]
        issuer: OsString,
        /// The principal's subject claim
        #[arg(long, allow_hyphen_values = true)]
        subject: OsString,
        #[command(flatten)]
        key: KeyArg,
    },

    /// Derive the prompt cache partition of a ledger tenant
    #[command(after_help = "Example:
  gotry-tenant id cache-partition t-5e0c2ba9c4c6b3b5a0f1d1e4b6f5a7c2 --key-file org.key")]
    CachePartition {
        /// The ledger tenant id
        #[arg(allow_hyphen_values = true)]
        tenant: OsString,
        #[command(flatten)]
        key: KeyArg,
    },

    /// Print the lease key of a tenant: ORG/TENANT
    #[command(after_help = "Example:
  gotry-tenant id lease-key acme t-5e0c2ba9c4c6b3b5a0f1d1e4b6f5a7c2")]
    LeaseKey {
        /// The organization id
        #[arg(allow_hyphen_values = true)]
        org: OsString,
        /// The ledger tenant id
        #[arg(allow_hyphen_values = true)]
        tenant: OsString,
    },

    /// Print the directory of a tenant's state under a state root
    #[command(after_help = "Example:
  gotry-tenant id root /var/lib/gotry/state acme t-5e0c2ba9c4c6b3b5a0f1d1e4b6f5a7c2
  (a relative root is resolved against the working directory; symlinks are not followed)")]
    Root {
        /// The state root directory
        state_root: PathBuf,
        /// The organization id
        #[arg(allow_hyphen_values = true)]
        org: OsString,
        /// The ledger tenant id
        #[arg(allow_hyphen_values = true)]
        tenant: OsString,
    },
}
