//! The few SVG and HTML pieces the charts are drawn with: escaping, numbers printed with fixed
//! precision (so the output is byte-identical run to run), a palette.

use std::fmt::Write;

/// `s` with the five HTML/XML special characters escaped: safe in text and in quoted
/// attributes.
pub fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

/// A coordinate: one decimal, no `-0.0`, non-finite as 0.
pub fn c(x: f64) -> String {
    if !x.is_finite() {
        return "0".into();
    }
    let r = (x * 10.0).round() / 10.0;
    if r == 0.0 {
        "0".into()
    } else if r.fract() == 0.0 {
        format!("{r:.0}")
    } else {
        format!("{r:.1}")
    }
}

/// Seconds for people: s, ms or µs with 3–4 significant digits.
pub fn secs(x: f64) -> String {
    let a = x.abs();
    if !x.is_finite() {
        "–".into()
    } else if a >= 1.0 {
        format!("{x:.3} s")
    } else if a >= 1e-3 {
        format!("{:.3} ms", x * 1e3)
    } else {
        format!("{:.1} µs", x * 1e6)
    }
}

/// Bytes in GiB.
pub fn gib(x: f64) -> String {
    format!("{:.2} GiB", x / (1024.0 * 1024.0 * 1024.0))
}

/// Fixed colours, one per series (colour-blind-safe Okabe–Ito order, then greys).
pub const PALETTE: [&str; 10] = [
    "#0072b2", "#e69f00", "#009e73", "#cc79a7", "#56b4e9", "#d55e00", "#f0e442", "#000000",
    "#999999", "#7f5f3f",
];

/// A rectangle with a hover title.
pub fn rect(out: &mut String, x: f64, y: f64, w: f64, h: f64, fill: &str, title: &str) {
    let _ = write!(
        out,
        r#"<rect x="{}" y="{}" width="{}" height="{}" fill="{}"><title>{}</title></rect>"#,
        c(x),
        c(y),
        c(w.max(0.0)),
        c(h.max(0.0)),
        fill,
        esc(title)
    );
}

/// Text at (x, y); `anchor` start, middle or end.
pub fn text(out: &mut String, x: f64, y: f64, anchor: &str, s: &str) {
    let _ = write!(
        out,
        r#"<text x="{}" y="{}" text-anchor="{}">{}</text>"#,
        c(x),
        c(y),
        anchor,
        esc(s)
    );
}

/// A line.
pub fn line(out: &mut String, x1: f64, y1: f64, x2: f64, y2: f64, class: &str) {
    let _ = write!(
        out,
        r#"<line x1="{}" y1="{}" x2="{}" y2="{}" class="{}"/>"#,
        c(x1),
        c(y1),
        c(x2),
        c(y2),
        class
    );
}

/// An `<svg>` of `w`×`h` with `body`, labelled for screen readers.
pub fn svg(w: f64, h: f64, label: &str, body: &str) -> String {
    format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{}" viewBox="0 0 {} {}" role="img" aria-label="{}">{}</svg>"#,
        c(w),
        c(h),
        c(w),
        c(h),
        esc(label),
        body
    )
}

/// Round "nice" axis step for a range of `max` over about `n` ticks.
pub fn nice_step(max: f64, n: f64) -> f64 {
    if max.is_nan() || max <= 0.0 || !max.is_finite() {
        return 1.0;
    }
    let raw = max / n;
    let p = 10f64.powf(raw.log10().floor());
    let m = raw / p;
    let k = if m <= 1.0 {
        1.0
    } else if m <= 2.0 {
        2.0
    } else if m <= 5.0 {
        5.0
    } else {
        10.0
    };
    k * p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_and_formats() {
        assert_eq!(
            esc(r#"<a href="x">&'"#),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
        );
        assert_eq!(c(-0.01), "0");
        assert_eq!(c(2.25), "2.3");
        assert_eq!(c(f64::NAN), "0");
        assert_eq!(secs(0.0123), "12.300 ms");
        assert_eq!(nice_step(97.0, 5.0), 20.0);
    }
}
