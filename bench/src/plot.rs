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

/// How the x axis maps values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum XAxis {
    #[default]
    Linear,
    /// Values are quantiles (0.5, 0.99 ...) placed at log10(1 / (1 - q)), as HdrHistogram plots
    /// them: each further "nine" gets the same width, so the tail is as readable as the median.
    /// A value of 1.0 or more stands for the maximum and sits one step past 99.9 %.
    Percentile,
}

/// A shaded span of x with a label (a failover's publish gap).
#[derive(Debug, Clone, PartialEq)]
pub struct Span {
    pub label: String,
    pub from: f64,
    pub to: f64,
}

/// What a chart shows besides its series.
#[derive(Debug, Clone, Default)]
pub struct Extras {
    /// Vertical dashed lines at x with a label (labels that would overlap go one row lower).
    pub markers: Vec<(String, f64)>,
    pub spans: Vec<Span>,
    pub x_axis: XAxis,
    /// Plot log10(y), with ticks at 1-2-5 steps of each decade.
    pub log_y: bool,
}

/// The x position of quantile `q` on a [`XAxis::Percentile`] axis.
fn percentile_x(q: f64) -> f64 {
    if q >= 1.0 {
        4.0
    } else {
        (1.0 / (1.0 - q.clamp(0.0, 0.9999))).log10()
    }
}

/// Tick values for a linear range: steps of 1, 2 or 5 times a power of ten, about five of them.
pub fn linear_ticks(lo: f64, hi: f64) -> Vec<f64> {
    let span = (hi - lo).abs().max(1e-9);
    let raw = span / 5.0;
    let decade = 10f64.powf(raw.log10().floor());
    let mantissa = [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .find(|m| m * decade >= raw)
        .unwrap_or(10.0);
    let step = mantissa * decade;
    // k x mantissa, scaled by the decade with a division when it is below one, so 0.6 comes out
    // as 0.6 and not 0.6000000000000001.
    let value = |k: f64| {
        if decade >= 1.0 {
            k * mantissa * decade
        } else {
            k * mantissa / (1.0 / decade).round()
        }
    };
    let (first, last) = ((lo / step - 1e-9).ceil(), (hi / step + 1e-9).floor());
    let mut ticks = Vec::new();
    let mut k = first;
    while k <= last {
        // + 0.0 turns -0.0 into 0.0.
        ticks.push(value(k) + 0.0);
        k += 1.0;
    }
    ticks
}

/// Tick values for a log range given as log10 bounds: 1, 2 and 5 of each decade, or only the
/// decades when that would crowd the axis.
pub fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    let mut ticks = Vec::new();
    let decades = (hi - lo).max(0.0);
    let steps: &[f64] = if decades > 4.0 {
        &[1.0]
    } else {
        &[1.0, 2.0, 5.0]
    };
    let mut d = lo.floor() as i32;
    while f64::from(d) <= hi.ceil() {
        for m in steps {
            let v = m * 10f64.powi(d);
            let l = v.log10();
            if l >= lo - 1e-9 && l <= hi + 1e-9 {
                ticks.push(v);
            }
        }
        d += 1;
    }
    ticks
}

/// The chart's geometry: the canvas, the plot area inside its margins, and the data ranges
/// the plot area shows (y as log10 on a log axis, x as placed by the axis).
#[derive(Debug, Clone, Copy)]
struct Frame {
    w: f64,
    h: f64,
    left: f64,
    top: f64,
    /// The plot area's width and height.
    pw: f64,
    ph: f64,
    x_axis: XAxis,
    log_y: bool,
    x0: f64,
    x1: f64,
    y0: f64,
    y1: f64,
}

impl Frame {
    /// The frame holding every point, marker and span, with whole ticks at the top.
    fn around(series: &[Series], extras: &Extras) -> Frame {
        let (w, h, left, right, top, bottom) = (900.0, 420.0, 70.0, 190.0, 40.0, 50.0);
        let mut f = Frame {
            w,
            h,
            left,
            top,
            pw: w - left - right,
            ph: h - top - bottom,
            x_axis: extras.x_axis,
            log_y: extras.log_y,
            x0: f64::MAX,
            x1: f64::MIN,
            y0: f64::MAX,
            y1: f64::MIN,
        };
        for (x, y) in series.iter().flat_map(|s| s.points.iter()) {
            f.x0 = f.x0.min(f.tx(*x));
            f.x1 = f.x1.max(f.tx(*x));
            f.y0 = f.y0.min(f.ty(*y));
            f.y1 = f.y1.max(f.ty(*y));
        }
        for x in extras
            .markers
            .iter()
            .map(|(_, x)| *x)
            .chain(extras.spans.iter().flat_map(|s| [s.from, s.to]))
        {
            f.x0 = f.x0.min(f.tx(x));
            f.x1 = f.x1.max(f.tx(x));
        }
        f.settle();
        f
    }

    /// Gives an empty or flat range some extent, and rounds the y range to ticks.
    fn settle(&mut self) {
        if self.x0 > self.x1 {
            (self.x0, self.x1, self.y0, self.y1) = (0.0, 1.0, 0.0, 1.0);
        }
        if self.x_axis == XAxis::Percentile {
            self.x0 = self.x0.min(percentile_x(0.5));
        }
        if self.log_y {
            // Whole 1-2-5 steps around the data.
            self.y0 = self.y0.min(self.y1 - 1.0).floor();
            self.y1 = self.y1.ceil();
        } else {
            self.y0 = self.y0.min(0.0);
        }
        if (self.x1 - self.x0).abs() < 1e-9 {
            self.x1 = self.x0 + 1.0;
        }
        if (self.y1 - self.y0).abs() < 1e-9 {
            self.y1 = self.y0 + 1.0;
        }
        if !self.log_y {
            // Round the top up to a tick.
            let step = linear_ticks(self.y0, self.y1)
                .windows(2)
                .map(|w| w[1] - w[0])
                .next();
            if let Some(step) = step {
                self.y1 = (self.y1 / step).ceil() * step;
            }
        }
    }

    /// A data x as the axis places it.
    fn tx(&self, x: f64) -> f64 {
        match self.x_axis {
            XAxis::Linear => x,
            XAxis::Percentile => percentile_x(x),
        }
    }

    /// A data y as the axis places it.
    fn ty(&self, y: f64) -> f64 {
        if self.log_y {
            y.max(1e-3).log10()
        } else {
            y
        }
    }

    /// The pixel column of a data x.
    fn sx(&self, x: f64) -> f64 {
        self.left + (self.tx(x) - self.x0) / (self.x1 - self.x0) * self.pw
    }

    /// The pixel row of a data y.
    fn sy(&self, y: f64) -> f64 {
        self.top + self.ph - (self.ty(y) - self.y0) / (self.y1 - self.y0) * self.ph
    }
}

/// A line chart (see [`Extras`]).
pub fn line_chart(
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series],
    extras: &Extras,
) -> String {
    let f = Frame::around(series, extras);
    let mut s = String::new();
    canvas(&mut s, &f, title, &extras.spans);
    y_ticks(&mut s, &f);
    x_ticks(&mut s, &f);
    axis_labels(&mut s, &f, x_label, y_label);
    let rows = markers(&mut s, &f, &extras.markers);
    span_labels(&mut s, &f, &extras.spans, rows);
    lines_and_legend(&mut s, &f, series);
    s.push_str("</svg>\n");
    s
}

/// The SVG's head, the title, the shaded spans and the plot area's border.
fn canvas(s: &mut String, f: &Frame, title: &str, spans: &[Span]) {
    let Frame {
        w,
        h,
        left,
        top,
        pw,
        ph,
        ..
    } = *f;
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
    for span in spans {
        let (a, b) = (f.sx(span.from), f.sx(span.to));
        let _ = writeln!(
            s,
            r##"<rect x="{a:.1}" y="{top}" width="{:.1}" height="{ph}" fill="#f4b6b6" fill-opacity="0.5"/>"##,
            (b - a).max(1.0)
        );
    }
    let _ = writeln!(
        s,
        r##"<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="#444"/>"##
    );
}

/// The y axis's grid lines and tick labels.
fn y_ticks(s: &mut String, f: &Frame) {
    let Frame {
        left, top, pw, ph, ..
    } = *f;
    let ticks: Vec<(f64, String)> = if f.log_y {
        log_ticks(f.y0, f.y1)
            .into_iter()
            .map(|v| (v.log10(), fmt_num(v)))
            .collect()
    } else {
        linear_ticks(f.y0, f.y1)
            .into_iter()
            .map(|v| (v, fmt_num(v)))
            .collect()
    };
    for (yv, label) in ticks {
        let y = top + ph - (yv - f.y0) / (f.y1 - f.y0) * ph;
        let _ = writeln!(
            s,
            r##"<line x1="{left}" x2="{}" y1="{y:.1}" y2="{y:.1}" stroke="#ddd"/>"##,
            left + pw
        );
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{:.1}" text-anchor="end">{label}</text>"#,
            left - 6.0,
            y + 4.0,
        );
    }
}

/// The x axis's grid lines and tick labels.
fn x_ticks(s: &mut String, f: &Frame) {
    let Frame {
        left, top, pw, ph, ..
    } = *f;
    let (x0, x1) = (f.x0, f.x1);
    let ticks: Vec<(f64, String)> = match f.x_axis {
        XAxis::Linear => linear_ticks(x0, x1)
            .into_iter()
            .map(|v| (v, fmt_num(v)))
            .collect(),
        XAxis::Percentile => [
            (0.5, "50%"),
            (0.9, "90%"),
            (0.99, "99%"),
            (0.999, "99.9%"),
            (1.0, "max"),
        ]
        .iter()
        .map(|(q, l)| (percentile_x(*q), (*l).to_owned()))
        .filter(|(x, _)| *x >= x0 - 1e-9 && *x <= x1 + 1e-9)
        .collect(),
    };
    for (xv, label) in ticks {
        let x = left + (xv - x0) / (x1 - x0) * pw;
        let _ = writeln!(
            s,
            r##"<line x1="{x:.1}" x2="{x:.1}" y1="{top}" y2="{}" stroke="#eee"/>"##,
            top + ph
        );
        let _ = writeln!(
            s,
            r#"<text x="{x:.1}" y="{}" text-anchor="middle">{label}</text>"#,
            top + ph + 16.0,
        );
    }
}

/// The axes' names.
fn axis_labels(s: &mut String, f: &Frame, x_label: &str, y_label: &str) {
    let _ = writeln!(
        s,
        r#"<text x="{}" y="{}" text-anchor="middle">{}</text>"#,
        f.left + f.pw / 2.0,
        f.h - 12.0,
        esc(x_label)
    );
    let _ = writeln!(
        s,
        r#"<text x="16" y="{}" text-anchor="middle" transform="rotate(-90 16 {})">{}{}</text>"#,
        f.top + f.ph / 2.0,
        f.top + f.ph / 2.0,
        esc(y_label),
        if f.log_y { " (log)" } else { "" }
    );
}

/// The markers' dashed lines and labels; returns how many label rows they took. Each label goes
/// in the first row where it does not overlap the row's last label (about 6 px per character
/// at this size).
fn markers(s: &mut String, f: &Frame, markers: &[(String, f64)]) -> usize {
    let Frame {
        left, top, pw, ph, ..
    } = *f;
    let mut rows: Vec<f64> = Vec::new();
    let mut markers = markers.to_vec();
    markers.sort_by(|a, b| a.1.total_cmp(&b.1));
    for (label, x) in &markers {
        let px = f.sx(*x);
        let width = 6.0 * label.chars().count() as f64 + 6.0;
        let row = match rows.iter().position(|end| *end <= px) {
            Some(r) => r,
            None => {
                rows.push(f64::MIN);
                rows.len() - 1
            }
        };
        rows[row] = px + width;
        let _ = writeln!(
            s,
            r##"<line x1="{px:.1}" x2="{px:.1}" y1="{top}" y2="{}" stroke="#999" stroke-dasharray="4 3"/>"##,
            top + ph
        );
        // A label that would run past the plot's right edge ends at its line instead.
        let (lx, anchor) = if px + width > left + pw {
            (px - 3.0, "end")
        } else {
            (px + 3.0, "start")
        };
        let _ = writeln!(
            s,
            r##"<text x="{lx:.1}" y="{}" fill="#555" font-size="10" text-anchor="{anchor}">{}</text>"##,
            top + 12.0 + 12.0 * row as f64,
            esc(label)
        );
    }
    rows.len()
}

/// The spans' labels, below the marker labels' `rows`.
fn span_labels(s: &mut String, f: &Frame, spans: &[Span], rows: usize) {
    for span in spans {
        let _ = writeln!(
            s,
            r##"<text x="{:.1}" y="{}" fill="#a33" font-size="10" text-anchor="middle">{}</text>"##,
            (f.sx(span.from) + f.sx(span.to)) / 2.0,
            f.top + 12.0 + 12.0 * rows as f64,
            esc(&span.label)
        );
    }
}

/// Each series' line (a dot for a single point) and its legend entry.
fn lines_and_legend(s: &mut String, f: &Frame, series: &[Series]) {
    for (i, series) in series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let path: Vec<String> = series
            .points
            .iter()
            .map(|(x, y)| format!("{:.1},{:.1}", f.sx(*x), f.sy(*y)))
            .collect();
        if path.len() == 1 {
            let _ = writeln!(
                s,
                r#"<circle cx="{:.1}" cy="{:.1}" r="3" fill="{color}"/>"#,
                f.sx(series.points[0].0),
                f.sy(series.points[0].1)
            );
        } else {
            let _ = writeln!(
                s,
                r#"<polyline fill="none" stroke="{color}" stroke-width="1.8" points="{}"/>"#,
                path.join(" ")
            );
        }
        let ly = f.top + 14.0 + i as f64 * 18.0;
        let lx = f.left + f.pw + 12.0;
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
            &Extras {
                markers: vec![("kill".into(), 0.5)],
                log_y: true,
                ..Default::default()
            },
        );
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert!(svg.contains("polyline") && svg.contains("kill") && svg.contains("a&lt;b"));
    }

    #[test]
    fn ticks_go_in_steps_of_one_two_or_five() {
        assert_eq!(
            linear_ticks(0.0, 8219.0),
            vec![0.0, 2000.0, 4000.0, 6000.0, 8000.0]
        );
        assert_eq!(linear_ticks(0.0, 1.0), vec![0.0, 0.2, 0.4, 0.6, 0.8, 1.0]);
        assert_eq!(linear_ticks(0.0, 27.0), vec![0.0, 10.0, 20.0]);
        assert_eq!(linear_ticks(0.0, 22.0), vec![0.0, 5.0, 10.0, 15.0, 20.0]);
        assert_eq!(
            log_ticks(0.0, 2.0),
            vec![1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0]
        );
        assert_eq!(
            log_ticks(-1.0, 5.0),
            vec![0.1, 1.0, 10.0, 100.0, 1000.0, 10000.0, 100000.0]
        );
    }

    #[test]
    fn percentiles_sit_one_nine_apart_and_are_labelled() {
        assert!((percentile_x(0.9) - 1.0).abs() < 1e-9);
        assert!((percentile_x(0.999) - 3.0).abs() < 1e-9);
        let svg = line_chart(
            "latency",
            "percentile",
            "ms",
            &[Series {
                name: "s".into(),
                points: vec![
                    (0.5, 3.0),
                    (0.9, 5.0),
                    (0.99, 20.0),
                    (0.999, 80.0),
                    (1.0, 120.0),
                ],
            }],
            &Extras {
                x_axis: XAxis::Percentile,
                log_y: true,
                ..Default::default()
            },
        );
        for label in [
            ">50%<", ">90%<", ">99%<", ">99.9%<", ">max<", ">1<", ">2<", ">5<", ">100<",
        ] {
            assert!(svg.contains(label), "{label} missing");
        }
    }

    #[test]
    fn close_marker_labels_go_to_separate_rows_and_spans_are_shaded() {
        let svg = line_chart(
            "t",
            "s",
            "r",
            &[Series {
                name: "a".into(),
                points: vec![(0.0, 1.0), (10.0, 2.0)],
            }],
            &Extras {
                markers: vec![("kill leader".into(), 5.0), ("new leader".into(), 5.1)],
                spans: vec![Span {
                    label: "gap 0.1 s".into(),
                    from: 5.0,
                    to: 5.1,
                }],
                ..Default::default()
            },
        );
        let y_of = |label: &str| {
            let at = svg.find(&format!(">{label}<")).unwrap();
            let tag = &svg[svg[..at].rfind("<text").unwrap()..at];
            let y = tag.split("y=\"").nth(1).unwrap().split('"').next().unwrap();
            y.parse::<f64>().unwrap()
        };
        assert!(y_of("kill leader") != y_of("new leader"));
        assert!(svg.contains("#f4b6b6") && svg.contains("gap 0.1 s"));
    }
}
