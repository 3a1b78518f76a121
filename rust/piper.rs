//! Piper training planner (placeholder; see issue 5).
