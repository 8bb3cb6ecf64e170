//! SVG line charts for the reports: round trips per second against the requester count (log2 x
//! axis), or any rate against named steps (evenly spaced), one line per series, written as plain
//! SVG text so a report folder needs nothing else.

use std::fmt::Write as _;

const COLORS: [&str; 7] = [
    "#1f6feb", "#d1242f", "#1a7f37", "#bc4c00", "#8250df", "#1b9aaa", "#57606a",
];

/// A round axis maximum at or above `v` that divides into four round steps.
fn nice_max(v: f64) -> f64 {
    let raw = (v / 4.0).max(1e-9);
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0]
        .iter()
        .map(|k| k * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    step * 4.0
}

/// A line chart of rate against requesters (log2 x axis), one line per series, legend at the
/// right.
pub fn svg_lines(title: &str, series: &[(String, Vec<(usize, f64)>)]) -> String {
    let (w, h, m, left, legend) = (860.0, 380.0, 50.0, 80.0, 210.0);
    let right = w - legend;
    let xs: Vec<f64> = series
        .iter()
        .flat_map(|(_, p)| p.iter().map(|(x, _)| (*x as f64).log2()))
        .collect();
    let xmin = xs.iter().cloned().fold(f64::INFINITY, f64::min);
    let xmin = if xmin.is_finite() { xmin } else { 0.0 };
    let xmax = xs.iter().cloned().fold(xmin + 1.0, f64::max);
    let ymax = nice_max(
        series
            .iter()
            .flat_map(|(_, p)| p.iter().map(|(_, y)| *y))
            .fold(1.0, f64::max)
            * 1.05,
    );
    let px = |x: f64| left + 10.0 + (x - xmin) / (xmax - xmin) * (right - left - 30.0);
    let py = |y: f64| h - m - y / ymax * (h - 2.0 * m);
    let mut out = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">"#
    );
    let _ = write!(
        out,
        r#"<rect width="{w}" height="{h}" fill="white"/><text x="{left}" y="24" font-size="14">{title}</text>"#
    );
    for i in 0..=4 {
        let y = ymax * i as f64 / 4.0;
        let _ = write!(
            out,
            r##"<line x1="{left}" y1="{0:.1}" x2="{right}" y2="{0:.1}" stroke="#d0d7de"/><text x="{1}" y="{2:.1}" text-anchor="end">{y:.0}</text>"##,
            py(y),
            left - 6.0,
            py(y) + 4.0
        );
    }
    let _ = write!(
        out,
        r#"<line x1="{left}" y1="{0}" x2="{right}" y2="{0}" stroke="black"/><line x1="{left}" y1="{m}" x2="{left}" y2="{0}" stroke="black"/>"#,
        h - m
    );
    let mut ticks: Vec<usize> = series
        .iter()
        .flat_map(|(_, p)| p.iter().map(|(x, _)| *x))
        .collect();
    ticks.sort_unstable();
    ticks.dedup();
    for t in ticks {
        let _ = write!(
            out,
            r#"<text x="{:.1}" y="{}" text-anchor="middle">{t}</text>"#,
            px((t as f64).log2()),
            h - m + 16.0
        );
    }
    let _ = write!(
        out,
        r#"<text x="{}" y="{}" text-anchor="middle">requesters</text>"#,
        (left + right) / 2.0,
        h - 10.0
    );
    let _ = write!(
        out,
        r#"<text x="14" y="{0}" transform="rotate(-90 14 {0})" text-anchor="middle">round trips/s</text>"#,
        h / 2.0
    );
    for (k, (label, pts)) in series.iter().enumerate() {
        let color = COLORS[k % COLORS.len()];
        let p: Vec<String> = pts
            .iter()
            .map(|(x, y)| format!("{:.1},{:.1}", px((*x as f64).log2()), py(*y)))
            .collect();
        let _ = write!(
            out,
            r#"<polyline fill="none" stroke="{color}" stroke-width="2" points="{}"/>"#,
            p.join(" ")
        );
        for (x, y) in pts {
            let _ = write!(
                out,
                r#"<circle cx="{:.1}" cy="{:.1}" r="3" fill="{color}"/>"#,
                px((*x as f64).log2()),
                py(*y)
            );
        }
        let ly = m + 8.0 + 20.0 * k as f64;
        let _ = write!(
            out,
            r#"<rect x="{}" y="{}" width="14" height="4" fill="{color}"/><text x="{}" y="{}">{label}</text>"#,
            right + 16.0,
            ly - 5.0,
            right + 36.0,
            ly
        );
    }
    out.push_str("</svg>\n");
    out
}

/// A line chart of `y_label` against named steps `x` (evenly spaced, labelled `x_label`), one
/// line per series; a series' `None` is a step it has no value at (its line skips it).
pub fn svg_steps(
    title: &str,
    x_label: &str,
    y_label: &str,
    x: &[String],
    series: &[(String, Vec<Option<f64>>)],
) -> String {
    let (w, h, m, left, legend) = (860.0, 380.0, 50.0, 80.0, 210.0);
    let right = w - legend;
    let ymax = nice_max(
        series
            .iter()
            .flat_map(|(_, p)| p.iter().flatten().copied())
            .fold(1.0, f64::max)
            * 1.05,
    );
    let steps = x.len().max(2) - 1;
    let px = |i: usize| left + 20.0 + i as f64 / steps as f64 * (right - left - 40.0);
    let py = |y: f64| h - m - y / ymax * (h - 2.0 * m);
    let mut out = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">"#
    );
    let _ = write!(
        out,
        r#"<rect width="{w}" height="{h}" fill="white"/><text x="{left}" y="24" font-size="14">{title}</text>"#
    );
    for i in 0..=4 {
        let y = ymax * i as f64 / 4.0;
        let _ = write!(
            out,
            r##"<line x1="{left}" y1="{0:.1}" x2="{right}" y2="{0:.1}" stroke="#d0d7de"/><text x="{1}" y="{2:.1}" text-anchor="end">{y:.0}</text>"##,
            py(y),
            left - 6.0,
            py(y) + 4.0
        );
    }
    let _ = write!(
        out,
        r#"<line x1="{left}" y1="{0}" x2="{right}" y2="{0}" stroke="black"/><line x1="{left}" y1="{m}" x2="{left}" y2="{0}" stroke="black"/>"#,
        h - m
    );
    for (i, t) in x.iter().enumerate() {
        let _ = write!(
            out,
            r#"<text x="{:.1}" y="{}" text-anchor="middle">{t}</text>"#,
            px(i),
            h - m + 16.0
        );
    }
    let _ = write!(
        out,
        r#"<text x="{}" y="{}" text-anchor="middle">{x_label}</text>"#,
        (left + right) / 2.0,
        h - 10.0
    );
    let _ = write!(
        out,
        r#"<text x="14" y="{0}" transform="rotate(-90 14 {0})" text-anchor="middle">{y_label}</text>"#,
        h / 2.0
    );
    for (k, (label, pts)) in series.iter().enumerate() {
        let color = COLORS[k % COLORS.len()];
        let at: Vec<(usize, f64)> = pts
            .iter()
            .enumerate()
            .filter_map(|(i, y)| y.map(|y| (i, y)))
            .collect();
        let p: Vec<String> = at
            .iter()
            .map(|(i, y)| format!("{:.1},{:.1}", px(*i), py(*y)))
            .collect();
        let _ = write!(
            out,
            r#"<polyline fill="none" stroke="{color}" stroke-width="2" points="{}"/>"#,
            p.join(" ")
        );
        for (i, y) in &at {
            let _ = write!(
                out,
                r#"<circle cx="{:.1}" cy="{:.1}" r="3" fill="{color}"/>"#,
                px(*i),
                py(*y)
            );
        }
        let ly = m + 8.0 + 20.0 * k as f64;
        let _ = write!(
            out,
            r#"<rect x="{}" y="{}" width="14" height="4" fill="{color}"/><text x="{}" y="{}">{label}</text>"#,
            right + 16.0,
            ly - 5.0,
            right + 36.0,
            ly
        );
    }
    out.push_str("</svg>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axes_are_round_and_the_chart_is_whole() {
        assert_eq!(nice_max(1548.0), 1600.0);
        assert_eq!(nice_max(4900.0), 6000.0);
        assert_eq!(nice_max(90.0), 100.0);
        let svg = svg_lines("t", &[("a".into(), vec![(16, 1.0), (64, 2.0)])]);
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>\n"));
        assert!(svg.contains("<polyline"), "{svg}");
    }

    #[test]
    fn a_step_chart_names_its_steps_and_skips_missing_values() {
        let x: Vec<String> = ["1", "10", "50"].iter().map(|s| s.to_string()).collect();
        let svg = svg_steps(
            "t",
            "BATCHSZ",
            "messages/s",
            &x,
            &[("p".into(), vec![Some(100.0), None, Some(300.0)])],
        );
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>\n"));
        assert!(
            svg.contains(">BATCHSZ<") && svg.contains(">messages/s<"),
            "{svg}"
        );
        assert!(svg.contains(">10<"), "every step is labelled: {svg}");
        assert_eq!(svg.matches("<circle").count(), 2, "{svg}");
    }
}
