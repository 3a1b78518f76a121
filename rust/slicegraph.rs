//! SliceGraph (placeholder; see issue 3).
