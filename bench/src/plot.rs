//! Small SVG charts written by hand (no plotting dependency to build): throughput over time
//! with fault markers, and latency percentiles per scenario.

use std::fmt::Write as _;

/// A named line.
#[derive(Debug, Clone)]
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

const COLORS: &[&str] = &[
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
    "#bcbd22", "#17becf",
];

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// A line chart. `markers` are vertical lines at x with a label; `log_y` plots log10(y).
pub fn line_chart(
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series],
    markers: &[(String, f64)],
    log_y: bool,
) -> String {
    let (w, h, left, right, top, bottom) = (900.0, 420.0, 70.0, 190.0, 40.0, 50.0);
    let (pw, ph) = (w - left - right, h - top - bottom);
    let ty = |y: f64| if log_y { y.max(1e-3).log10() } else { y };
    let pts = series.iter().flat_map(|s| s.points.iter());
    let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for (x, y) in pts {
        x0 = x0.min(*x);
        x1 = x1.max(*x);
        y0 = y0.min(ty(*y));
        y1 = y1.max(ty(*y));
    }
    for (_, x) in markers {
        x0 = x0.min(*x);
        x1 = x1.max(*x);
    }
    if x0 > x1 {
        (x0, x1, y0, y1) = (0.0, 1.0, 0.0, 1.0);
    }
    if !log_y {
        y0 = y0.min(0.0);
    }
    if (x1 - x0).abs() < 1e-9 {
        x1 = x0 + 1.0;
    }
    if (y1 - y0).abs() < 1e-9 {
        y1 = y0 + 1.0;
    }
    let sx = |x: f64| left + (x - x0) / (x1 - x0) * pw;
    let sy = |y: f64| top + ph - (ty(y) - y0) / (y1 - y0) * ph;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect width="{w}" height="{h}" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="{}" y="22" font-size="15" text-anchor="middle">{}</text>"#,
        left + pw / 2.0,
        esc(title)
    );
    let _ = writeln!(
        s,
        r##"<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="#444"/>"##
    );
    for i in 0..=5 {
        let f = f64::from(i) / 5.0;
        let yv = y0 + f * (y1 - y0);
        let label = if log_y { 10f64.powf(yv) } else { yv };
        let y = top + ph - f * ph;
        let _ = writeln!(
            s,
            r##"<line x1="{left}" x2="{}" y1="{y}" y2="{y}" stroke="#ddd"/>"##,
            left + pw
        );
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{}" text-anchor="end">{}</text>"#,
            left - 6.0,
            y + 4.0,
            fmt_num(label)
        );
        let xv = x0 + f * (x1 - x0);
        let x = left + f * pw;
        let _ = writeln!(
            s,
            r#"<text x="{x}" y="{}" text-anchor="middle">{}</text>"#,
            top + ph + 16.0,
            fmt_num(xv)
        );
    }
    let _ = writeln!(
        s,
        r#"<text x="{}" y="{}" text-anchor="middle">{}</text>"#,
        left + pw / 2.0,
        h - 12.0,
        esc(x_label)
    );
    let _ = writeln!(
        s,
        r#"<text x="16" y="{}" text-anchor="middle" transform="rotate(-90 16 {})">{}{}</text>"#,
        top + ph / 2.0,
        top + ph / 2.0,
        esc(y_label),
        if log_y { " (log)" } else { "" }
    );
    for (label, x) in markers {
        let px = sx(*x);
        let _ = writeln!(
            s,
            r##"<line x1="{px}" x2="{px}" y1="{top}" y2="{}" stroke="#999" stroke-dasharray="4 3"/>"##,
            top + ph
        );
        let _ = writeln!(
            s,
            r##"<text x="{}" y="{}" fill="#555" font-size="10">{}</text>"##,
            px + 3.0,
            top + 12.0,
            esc(label)
        );
    }
    for (i, series) in series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let path: Vec<String> = series
            .points
            .iter()
            .map(|(x, y)| format!("{:.1},{:.1}", sx(*x), sy(*y)))
            .collect();
        if path.len() == 1 {
            let _ = writeln!(
                s,
                r#"<circle cx="{:.1}" cy="{:.1}" r="3" fill="{color}"/>"#,
                sx(series.points[0].0),
                sy(series.points[0].1)
            );
        } else {
            let _ = writeln!(
                s,
                r#"<polyline fill="none" stroke="{color}" stroke-width="1.8" points="{}"/>"#,
                path.join(" ")
            );
        }
        let ly = top + 14.0 + i as f64 * 18.0;
        let lx = left + pw + 12.0;
        let _ = writeln!(
            s,
            r#"<rect x="{lx}" y="{}" width="12" height="4" fill="{color}"/>"#,
            ly - 4.0
        );
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{ly}">{}</text>"#,
            lx + 16.0,
            esc(&series.name)
        );
    }
    s.push_str("</svg>\n");
    s
}

fn fmt_num(v: f64) -> String {
    let a = v.abs();
    if a >= 1e6 {
        format!("{:.1}M", v / 1e6)
    } else if a >= 1e4 {
        format!("{:.0}k", v / 1e3)
    } else if a >= 100.0 || v == v.trunc() {
        format!("{v:.0}")
    } else if a >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_series_markers_and_legend() {
        let svg = line_chart(
            "t",
            "x",
            "y",
            &[Series {
                name: "a<b".into(),
                points: vec![(0.0, 1.0), (1.0, 10.0)],
            }],
            &[("kill".into(), 0.5)],
            true,
        );
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert!(svg.contains("polyline") && svg.contains("kill") && svg.contains("a&lt;b"));
    }
}
