//! Test helpers (placeholder)
