use super::sweep::is_default;
use super::*;

fn p(value: &str, rate: f64, p99: f64) -> Point {
    Point {
        path: "x".into(),
        value: value.into(),
        passed: true,
        delivered_per_s: rate,
        p50_ms: Some(p99 / 2.0),
        p99_ms: Some(p99),
        cpu_seconds_per_million: None,
        runs: 1,
        delivered_range: None,
        vs_control: None,
        run: RunResult::default(),
    }
}

fn control(rates: &[f64], p99: f64) -> Control {
    Control {
        rates: rates.to_vec(),
        p99_ms: vec![p99; rates.len()],
        passed: true,
    }
}

#[test]
fn the_control_says_how_much_the_same_settings_moved() {
    let c = control(&[6887.0, 9068.0, 9713.0, 10295.0], 40.0);
    assert_eq!(c.median_rate(), (9068.0 + 9713.0) / 2.0);
    assert!((c.spread() - (10295.0 - 6887.0) / c.median_rate()).abs() < 1e-12);
    assert!(c.drift() > 0.3, "{}", c.drift());
    assert!(c.describe().contains("4 times"), "{}", c.describe());
    assert_eq!(budget_for(&c), Some(80.0));
    assert_eq!(budget_for(&control(&[1.0], 2.0)), Some(10.0));
    assert_eq!(Control::default().spread(), 0.0);
}

#[test]
fn repeated_values_become_one_point_of_medians_in_first_run_order() {
    let at = |value: &str, rate: f64, p99: f64, vs: f64| Point {
        path: "limits.max_in_flight_records".into(),
        vs_control: Some(vs),
        ..p(value, rate, p99)
    };
    let all = vec![
        at("100", 100.0, 10.0, 0.9),
        at("1000", 50.0, 30.0, 1.0),
        at("100", 300.0, 20.0, 1.1),
        at("1000", 70.0, 10.0, 1.2),
        at("100", 200.0, 90.0, 1.0),
        at("1000", 60.0, 20.0, 1.1),
    ];
    let m = medians(all);
    assert_eq!(m.len(), 2);
    assert_eq!((m[0].value.as_str(), m[1].value.as_str()), ("100", "1000"));
    assert_eq!(m[0].delivered_per_s, 200.0);
    assert_eq!(m[0].p99_ms, Some(20.0));
    assert_eq!(m[0].vs_control, Some(1.0));
    assert_eq!(m[0].delivered_range, Some((100.0, 300.0)));
    assert_eq!(m[0].runs, 3);
    assert_eq!(m[1].delivered_per_s, 60.0);
    let sweep = Sweep {
        points: m,
        control: control(&[100.0, 110.0], 20.0),
    };
    let table = markdown(&sweep, &[], 500.0, "");
    assert!(
        table.contains("| 100 | yes | 200 (100-300) | 1.00 |"),
        "{table}"
    );
    assert!(
        table.contains("Control: the defaults ran 2 times"),
        "{table}"
    );
    // The notes come before the table, which stays one block of rows.
    assert!(
        table.find("medians").unwrap() < table.find("| setting |").unwrap(),
        "{table}"
    );
    assert_eq!(
        medians(vec![at("1", 5.0, 1.0, 1.0)])[0].delivered_range,
        None
    );
}

#[test]
fn a_value_is_recommended_only_beyond_the_control_s_spread() {
    let at = |value: &str, rate: f64, vs: f64| Point {
        path: "limits.max_in_flight_records".into(),
        vs_control: Some(vs),
        ..p(value, rate, 100.0)
    };
    // The control moved 10 % over the sweep.
    let c = control(&[1000.0, 1100.0, 1050.0], 50.0);
    let points = [at("100", 600.0, 0.6), at("10000", 1300.0, 1.25)];
    let r = &recommend(&points, &c, 500.0)[0];
    assert_eq!(r.value.as_deref(), Some("10000"), "{}", r.why);
    assert!(
        r.why.contains("x1.25 of the control runs beside it"),
        "{}",
        r.why
    );
    assert!(r.why.contains("=100 (x0.60)"), "{}", r.why);
    // A 5 % gain inside a 10 % spread is noise: the default stays.
    let noise = [at("10000", 1100.0, 1.05)];
    let r = &recommend(&noise, &c, 500.0)[0];
    assert_eq!(r.value.as_deref(), Some("auto"), "{}", r.why);
    assert!(r.why.starts_with("keep the default (auto)"), "{}", r.why);
    assert!(r.why.contains("x1.05"), "{}", r.why);
    // An open-loop load: the same rate, a p99 below every control run's.
    let open = control(&[1000.0, 1010.0], 50.0);
    let quick = [Point {
        p99_ms: Some(20.0),
        ..at("1000", 1000.0, 1.0)
    }];
    let r = &recommend(&quick, &open, 500.0)[0];
    assert_eq!(r.value.as_deref(), Some("1000"), "{}", r.why);
    assert!(
        r.why.contains("below every control run's p99 (50-50 ms)"),
        "{}",
        r.why
    );
    // Over the budget: the value does not count, and a control over it is said.
    let r = &recommend(&points, &control(&[1000.0], 900.0), 50.0)[0];
    assert_eq!(r.value, None, "{}", r.why);
    assert!(r.why.contains("defaults' own p99 (900 ms)"), "{}", r.why);
    // Every default sweep starts with the default (run as the control, not as a value).
    for d in default_dimensions(true) {
        assert_eq!(d.values[0], default_value(&d.path).unwrap(), "{}", d.path);
        assert!(is_default(&d.path, &d.values[0]));
    }
    assert_eq!(default_value("unknown.path"), None);
}

#[test]
fn sweeps_parse() {
    let d = Dimension::parse("limits.send_concurrency=1, 4,8").unwrap();
    assert_eq!(d.values, ["1", "4", "8"]);
    assert!(Dimension::parse("limits.send_concurrency").is_err());
}
