//! Node.js addon (work in progress).
