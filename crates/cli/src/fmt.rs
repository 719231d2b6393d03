//! The CLI's number and name formatting, one home for every command: units, rounding and the
//! argument order of the percentages are decided here once.

/// Bytes in a GiB.
pub const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

/// `part` as a percentage of `whole` (0 when `whole` is not positive): a share of a total.
pub fn percent_of(part: f64, whole: f64) -> f64 {
    if whole > 0.0 {
        100.0 * part / whole
    } else {
        0.0
    }
}

/// How much smaller `new` is than `base`, as a percentage of `base` (0 when `base` is not
/// positive): a saving against a baseline.
pub fn percent_saved(base: f64, new: f64) -> f64 {
    if base > 0.0 {
        100.0 * (base - new) / base
    } else {
        0.0
    }
}

/// A size for the reports' tables: two decimals in GiB, one in MiB and KiB, whole bytes below
/// (`1.50 GiB`, `64.0 MiB`, `512 B`).
pub fn bytes_short(b: f64) -> String {
    if b >= GIB {
        format!("{:.2} GiB", b / GIB)
    } else if b >= 1024.0 * 1024.0 {
        format!("{:.1} MiB", b / 1024.0 / 1024.0)
    } else if b >= 1024.0 {
        format!("{:.1} KiB", b / 1024.0)
    } else {
        format!("{b:.0} B")
    }
}

/// A message size as `collective` states it: two decimals in the largest binary unit up to TiB
/// (`64.00 MiB`), the number as given below 1 KiB (`512 B`).
pub fn bytes_2dp(b: f64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b;
    let mut i = 0;
    while v >= 1024.0 && i + 1 < UNITS.len() {
        v /= 1024.0;
        i += 1;
    }
    if i == 0 {
        format!("{b} B")
    } else {
        format!("{v:.2} {}", UNITS[i])
    }
}

/// A duration in seconds as `1.234 s`, `12.345 ms` or `56.7 µs`.
pub fn duration(t: f64) -> String {
    if t >= 1.0 {
        format!("{t:.3} s")
    } else if t >= 1e-3 {
        format!("{:.3} ms", t * 1e3)
    } else {
        format!("{:.1} µs", t * 1e6)
    }
}

/// A count with an SI suffix: 671.03B, 37.6M...
pub fn si_count(x: f64) -> String {
    let a = x.abs();
    if a >= 1e12 {
        format!("{:.2}T", x / 1e12)
    } else if a >= 1e9 {
        format!("{:.2}B", x / 1e9)
    } else if a >= 1e6 {
        format!("{:.2}M", x / 1e6)
    } else if a >= 1e3 {
        format!("{:.2}K", x / 1e3)
    } else {
        format!("{x:.0}")
    }
}

/// The name an enum value has in the input files and JSON (its serde name), e.g. `qwen-moe`,
/// `nvswitch`, `all-reduce`; `?` for a value without one.
pub fn serde_name<T: serde::Serialize>(x: &T) -> String {
    match serde_json::to_value(x) {
        Ok(serde_json::Value::String(s)) => s,
        _ => "?".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentages_say_which_argument_is_the_base() {
        assert_eq!(percent_of(25.0, 200.0), 12.5);
        assert_eq!(percent_saved(200.0, 150.0), 25.0);
        assert_eq!(percent_of(1.0, 0.0), 0.0);
        assert_eq!(percent_saved(0.0, 1.0), 0.0);
    }

    #[test]
    fn sizes_durations_and_counts() {
        assert_eq!(bytes_short(1.5 * GIB), "1.50 GiB");
        assert_eq!(bytes_short(64.0 * 1024.0 * 1024.0), "64.0 MiB");
        assert_eq!(bytes_short(512.0), "512 B");
        assert_eq!(bytes_2dp(64.0 * 1024.0 * 1024.0), "64.00 MiB");
        assert_eq!(bytes_2dp(512.0), "512 B");
        assert_eq!(duration(1.5), "1.500 s");
        assert_eq!(duration(0.0125), "12.500 ms");
        assert_eq!(duration(5.67e-5), "56.7 µs");
        assert_eq!(si_count(671.03e9), "671.03B");
        assert_eq!(si_count(12.0), "12");
    }
}
