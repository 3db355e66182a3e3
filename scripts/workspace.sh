# Sourced by the build and test scripts (bash), from the workspace root: what cargo says of
# the workspace, asked in one place so that every script reads it the same way.

# The workspace's version (every crate inherits it).
workspace_version() {
    cargo pkgid -p gotry-tenant-state | sed 's/.*[#@]//'
}

# The folder cargo builds into (CARGO_TARGET_DIR or the workspace's target/).
workspace_target_dir() {
    cargo metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p'
}
