//! The kit's report: one result per check, each failure with where it happened, as text or JSON.

use serde_json::{Map, Value, json};
use std::fmt::Write as _;

/// Failures kept per check; the rest are counted.
const MAX_FAILURES: usize = 10;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Pass,
    Fail,
    /// The check could not run (an earlier step failed, or it does not apply).
    Skip,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pass => "pass",
            Status::Fail => "fail",
            Status::Skip => "skip",
        }
    }
}

/// One failure: where (stream, partition, page, record, field) and what.
#[derive(Debug, Clone)]
pub struct Failure {
    pub location: String,
    pub message: String,
}

/// The outcome of one check.
#[derive(Debug, Clone)]
pub struct CheckResult {
    pub name: &'static str,
    pub stream: Option<String>,
    pub status: Status,
    /// What was checked and what was found, in one line.
    pub summary: String,
    /// Further lines worth showing even when the check passed (e.g. the error a broken config got).
    pub details: Vec<String>,
    /// Numbers for tools (records read, partitions, pages...).
    pub facts: Map<String, Value>,
    pub failures: Vec<Failure>,
    /// Failures beyond those kept.
    pub more_failures: usize,
}

/// A check being run: collects failures, then becomes a [`CheckResult`].
pub struct Check {
    name: &'static str,
    stream: Option<String>,
    failures: Vec<Failure>,
    more_failures: usize,
    details: Vec<String>,
    facts: Map<String, Value>,
}

impl Check {
    pub fn new(name: &'static str, stream: Option<&str>) -> Self {
        Check {
            name,
            stream: stream.map(str::to_string),
            failures: Vec::new(),
            more_failures: 0,
            details: Vec::new(),
            facts: Map::new(),
        }
    }

    pub fn fail(&mut self, location: impl Into<String>, message: impl Into<String>) {
        if self.failures.len() < MAX_FAILURES {
            self.failures.push(Failure { location: location.into(), message: message.into() });
        } else {
            self.more_failures += 1;
        }
    }

    pub fn detail(&mut self, line: impl Into<String>) {
        self.details.push(line.into());
    }

    pub fn fact(&mut self, name: &str, value: impl Into<Value>) {
        self.facts.insert(name.to_string(), value.into());
    }

    pub fn failed(&self) -> bool {
        !self.failures.is_empty()
    }

    pub fn failure_count(&self) -> usize {
        self.failures.len() + self.more_failures
    }

    /// Passes unless a failure was recorded.
    pub fn finish(self, summary: impl Into<String>) -> CheckResult {
        let status = if self.failed() { Status::Fail } else { Status::Pass };
        self.end(status, summary.into())
    }

    pub fn skip(self, reason: impl Into<String>) -> CheckResult {
        self.end(Status::Skip, reason.into())
    }

    fn end(self, status: Status, summary: String) -> CheckResult {
        CheckResult {
            name: self.name,
            stream: self.stream,
            status,
            summary,
            details: self.details,
            facts: self.facts,
            failures: self.failures,
            more_failures: self.more_failures,
        }
    }
}

/// Everything the kit found.
#[derive(Debug, Default)]
pub struct Report {
    pub plugin: String,
    /// What the host said while loading the plugin (cache, grants).
    pub notes: Vec<String>,
    pub checks: Vec<CheckResult>,
    /// The config's secrets, masked out of the rendered report.
    pub(crate) secrets: crate::data::secrets::Secrets,
}

impl Report {
    /// The report for a person (or as JSON), with every secret of the config masked.
    pub fn render(&self, json: bool) -> String {
        let text = if json { format!("{:#}\n", self.to_json()) } else { self.to_text() };
        self.secrets.mask_text(&text)
    }

    pub fn push(&mut self, check: CheckResult) {
        self.checks.push(check);
    }

    pub fn count(&self, status: Status) -> usize {
        self.checks.iter().filter(|c| c.status == status).count()
    }

    pub fn passed(&self) -> bool {
        self.count(Status::Fail) == 0 && self.count(Status::Pass) > 0
    }

    pub fn to_json(&self) -> Value {
        let checks: Vec<Value> = self
            .checks
            .iter()
            .map(|c| {
                json!({
                    "check": c.name,
                    "stream": c.stream,
                    "status": c.status.as_str(),
                    "summary": c.summary,
                    "details": c.details,
                    "facts": c.facts,
                    "failures": c.failures.iter().map(|f| json!({"location": f.location, "message": f.message})).collect::<Vec<_>>(),
                    "more_failures": c.more_failures,
                })
            })
            .collect();
        json!({
            "plugin": self.plugin,
            "passed": self.passed(),
            "counts": {"pass": self.count(Status::Pass), "fail": self.count(Status::Fail), "skip": self.count(Status::Skip)},
            "notes": self.notes,
            "checks": checks,
        })
    }

    pub fn to_text(&self) -> String {
        let mut text = format!("Conformance of {}\n", self.plugin);
        for note in &self.notes {
            let _ = writeln!(text, "  {note}");
        }
        text.push('\n');
        let label = |c: &CheckResult| match &c.stream {
            Some(stream) => format!("{} {stream}", c.name),
            None => c.name.to_string(),
        };
        let width = self.checks.iter().map(|c| label(c).len()).max().unwrap_or(0);
        for check in &self.checks {
            let status = check.status.as_str().to_uppercase();
            let _ = writeln!(text, "{status:<4}  {:<width$}  {}", label(check), check.summary);
            for line in &check.details {
                let _ = writeln!(text, "      {line}");
            }
            for failure in &check.failures {
                let _ = writeln!(text, "      - {}: {}", failure.location, failure.message);
            }
            if check.more_failures > 0 {
                let _ = writeln!(text, "      ... and {} more", check.more_failures);
            }
        }
        let _ = writeln!(
            text,
            "\n{} passed, {} failed, {} skipped: {}",
            self.count(Status::Pass),
            self.count(Status::Fail),
            self.count(Status::Skip),
            if self.passed() { "the connector conforms" } else { "the connector does NOT conform" }
        );
        text
    }
}
