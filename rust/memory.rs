//! The memory budget: every allocation that scales with the input (DP tables, populations,
//! segment tables, ideals) is estimated first and refused with [`CoreError::MemoryLimit`] when
//! the estimate passes the budget, instead of letting the allocator abort the process.
//!
//! The budget is [`DEFAULT_BUDGET`] (2 GiB), or the `STAGECUT_MEMORY_BUDGET` environment
//! variable: a number of bytes with an optional unit (`"8GiB"`, `"500MB"`, `"4e9"`), read at
//! each check so a running Python process can change it.

use crate::error::{CoreError, CoreResult};

/// The budget when `STAGECUT_MEMORY_BUDGET` is not set.
pub const DEFAULT_BUDGET: f64 = (2u64 << 30) as f64;

/// The environment variable that sets the budget.
pub const BUDGET_VAR: &str = "STAGECUT_MEMORY_BUDGET";

/// A byte count with an optional unit: `B`, `KB`/`MB`/`GB`/`TB` (powers of 1000), `KiB`..`TiB`
/// (powers of 1024), or `K`/`M`/`G`/`T` (powers of 1024); `None` when unreadable or negative.
pub fn parse_bytes(text: &str) -> Option<f64> {
    let t = text.trim();
    let split = t
        .find(|c: char| c.is_ascii_alphabetic() && c != 'e' && c != 'E')
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let x: f64 = num.trim().parse().ok()?;
    let scale = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "kb" => 1e3,
        "mb" => 1e6,
        "gb" => 1e9,
        "tb" => 1e12,
        "k" | "kib" => 1024.0,
        "m" | "mib" => 1024.0 * 1024.0,
        "g" | "gib" => 1024.0 * 1024.0 * 1024.0,
        "t" | "tib" => 1024.0 * 1024.0 * 1024.0 * 1024.0,
        _ => return None,
    };
    let v = x * scale;
    (v.is_finite() && v >= 0.0).then_some(v)
}

/// The current budget in bytes (an unreadable `STAGECUT_MEMORY_BUDGET` is an error).
pub fn budget() -> CoreResult<f64> {
    match std::env::var(BUDGET_VAR) {
        Ok(s) => parse_bytes(&s).ok_or_else(|| {
            CoreError::InvalidArgument(format!(
                "{BUDGET_VAR}={s:?} is not a byte count (e.g. 8GiB, 500MB, 4e9)"
            ))
        }),
        Err(_) => Ok(DEFAULT_BUDGET),
    }
}

/// `bytes` in a short human form (`"6.7 GiB"`).
pub fn human(bytes: f64) -> String {
    let units = ["bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    let mut x = bytes;
    let mut i = 0;
    while x >= 1024.0 && i + 1 < units.len() {
        x /= 1024.0;
        i += 1;
    }
    if i == 0 {
        format!("{x:.0} bytes")
    } else {
        format!("{x:.1} {}", units[i])
    }
}

/// Refuse `what`, which needs about `bytes`, when that passes the budget; `hint` says what to
/// change instead (e.g. `"use segment_costs='scan'"`).
pub fn check(bytes: f64, what: &str, hint: &str) -> CoreResult<()> {
    let limit = budget()?;
    if bytes.is_nan() || bytes > limit {
        return Err(refusal(bytes, limit, what, hint));
    }
    Ok(())
}

/// The [`CoreError::MemoryLimit`] for `what`, needing about `bytes` (at least: `"at least"`
/// may be part of `what`) with a budget of `limit`.
pub fn refusal(bytes: f64, limit: f64, what: &str, hint: &str) -> CoreError {
    let sep = if hint.is_empty() { "" } else { "; " };
    CoreError::MemoryLimit(format!(
        "{what} needs about {}, over the memory budget of {}{sep}{hint} (or raise the budget: \
         {BUDGET_VAR}=<bytes>, e.g. 16GiB)",
        human(bytes),
        human(limit)
    ))
}

/// `a * b * c` bytes as an `f64` (no overflow).
pub fn product(factors: &[usize]) -> f64 {
    factors.iter().map(|&x| x as f64).product()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_counts_parse() {
        assert_eq!(parse_bytes("1024"), Some(1024.0));
        assert_eq!(parse_bytes("4e9"), Some(4e9));
        assert_eq!(parse_bytes("2GiB"), Some(2.0 * 1024.0 * 1024.0 * 1024.0));
        assert_eq!(parse_bytes("2 G"), Some(2.0 * 1024.0 * 1024.0 * 1024.0));
        assert_eq!(parse_bytes("500MB"), Some(5e8));
        assert_eq!(parse_bytes("-1"), None);
        assert_eq!(parse_bytes("lots"), None);
        assert_eq!(parse_bytes("3 parsecs"), None);
    }

    #[test]
    fn refusals_say_how_much_and_what_to_do() {
        assert!(check(1e6, "a table", "").is_ok());
        let e = check(7.2e9, "the segment table", "use segment_costs='scan'").unwrap_err();
        let msg = e.to_string();
        assert!(matches!(e, CoreError::MemoryLimit(_)));
        assert!(msg.contains("6.7 GiB") && msg.contains("2.0 GiB"), "{msg}");
        assert!(
            msg.contains("segment_costs='scan'") && msg.contains(BUDGET_VAR),
            "{msg}"
        );
        assert!(check(f64::INFINITY, "x", "").is_err());
        assert_eq!(human(26e12), "23.6 TiB");
        assert_eq!(
            product(&[usize::MAX, usize::MAX]),
            (usize::MAX as f64).powi(2)
        );
    }
}
