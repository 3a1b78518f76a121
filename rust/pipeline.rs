//! Pipeline DP (placeholder).
