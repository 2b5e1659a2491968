//! How `bench run` ends: its exit code and its last lines on stderr. The exit code goes by
//! correctness alone: any run not passed (failed, or inconclusive: not verified) exits 1, and a
//! correct run that fell behind its writers exits 0 but is named, as is a tree no commit
//! reproduces.

use crate::result::{Provenance, RunResult, Verdict};

/// Every run passed its correctness check.
pub const PASSED: i32 = 0;
/// Some run failed or was inconclusive.
pub const NOT_PASSED: i32 = 1;

/// The exit code of a run of `runs`.
pub fn code(runs: &[RunResult]) -> i32 {
    if runs.iter().all(|r| r.verdict == Verdict::Passed) {
        PASSED
    } else {
        NOT_PASSED
    }
}

/// The lines the command ends with: which runs did not pass, which fell behind, and the tree
/// warning.
pub fn closing_lines(p: &Provenance, runs: &[RunResult]) -> Vec<String> {
    let mut lines = Vec::new();
    let names = |keep: &dyn Fn(&RunResult) -> bool| {
        runs.iter()
            .filter(|r| keep(r))
            .map(RunResult::label)
            .collect::<Vec<_>>()
            .join(", ")
    };
    if code(runs) != PASSED {
        lines.push(format!(
            "bench: some runs did not pass: failed (lost or reordered records) or inconclusive (see each run's verdict): {}",
            names(&|r| r.verdict != Verdict::Passed)
        ));
    }
    let behind = names(&|r| r.pace.is_some_and(|p| p.fell_behind()));
    if !behind.is_empty() {
        lines.push(format!(
            "bench: fell behind their writers (keeping up is reported, the exit code goes by correctness): {behind}"
        ));
    }
    if let Some(w) = crate::report::tree_warning(p) {
        lines.push(format!("bench: {w}"));
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::result::Pace;

    fn run(name: &str, verdict: Verdict, pace: Pace) -> RunResult {
        RunResult {
            scenario: name.into(),
            passed: verdict == Verdict::Passed,
            verdict,
            pace: Some(pace),
            ..RunResult::default()
        }
    }

    #[test]
    fn the_exit_code_fails_on_correctness_and_not_on_pace() {
        let p = Provenance {
            commit: "5d35504".into(),
            ..Provenance::default()
        };
        let kept = run(
            "steady",
            Verdict::Passed,
            Pace::judge(Some(2e3), Some((2e3, 2e3))),
        );
        let behind = run(
            "ooo",
            Verdict::Passed,
            Pace::judge(Some(2e3), Some((10.0, 1744.0))),
        );
        let drain = run("drain", Verdict::Passed, Pace::NoWriters);
        assert_eq!(code(&[kept.clone(), drain.clone()]), PASSED);
        assert!(closing_lines(&p, &[kept.clone(), drain.clone()]).is_empty());
        // Correct but behind: exits 0, and is named.
        assert_eq!(code(&[kept.clone(), behind.clone()]), PASSED);
        let lines = closing_lines(&p, &[kept.clone(), behind]);
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(
            lines[0].contains("fell behind") && lines[0].ends_with(": ooo"),
            "{lines:?}"
        );
        // Failed or inconclusive, though keeping up: exits 1.
        for v in [Verdict::Failed, Verdict::Inconclusive] {
            let bad = run("x", v, Pace::judge(Some(2e3), Some((2e3, 2e3))));
            assert_eq!(code(&[kept.clone(), bad.clone()]), NOT_PASSED);
            assert!(closing_lines(&p, &[bad])[0].ends_with("verdict): x"));
        }
        // An uncommitted tree is said last.
        let dirty = Provenance {
            commit: "5d35504 (with uncommitted changes)".into(),
            ..Provenance::default()
        };
        let lines = closing_lines(&dirty, &[drain]);
        assert!(
            lines[0].starts_with("bench: NOT FROM A COMMITTED TREE"),
            "{lines:?}"
        );
    }
}
