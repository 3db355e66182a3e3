//! A tenant root's state as the router tests write it: lines appended to `lines.txt`, one
//! per acknowledged call, so that what a later holder restored can be read back in order.

use std::fs;
use std::io::Write;
use std::path::Path;

/// Appends `line` to the root's `lines.txt`, making the root if needed.
pub fn append(root: &Path, line: &str) {
    fs::create_dir_all(root).unwrap();
    let mut file = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(root.join("lines.txt"))
        .unwrap();
    writeln!(file, "{line}").unwrap();
}

/// The root's lines, none when it has no `lines.txt`.
pub fn read(root: &Path) -> Vec<String> {
    fs::read_to_string(root.join("lines.txt"))
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}
