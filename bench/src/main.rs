//! Flash-sale benchmark (placeholder).
fn main() {}
