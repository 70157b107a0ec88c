//! The report: one table row per figure (measured, target, verdict, what limits it), and the same
//! numbers as JSON for tools and the smoke test.

use serde_json::{Map, Value};

/// Whether a figure meets its target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Meets the target.
    Met,
    /// Misses the target.
    Missed,
    /// No target, or not measured in this profile.
    Info,
}

impl Verdict {
    /// Met when `ok`, else missed.
    pub fn from(ok: bool) -> Self {
        if ok {
            Self::Met
        } else {
            Self::Missed
        }
    }

    fn label(self) -> &'static str {
        match self {
            Self::Met => "met",
            Self::Missed => "**missed**",
            Self::Info => "–",
        }
    }
}

/// One row of the table.
#[derive(Debug, Clone)]
pub struct Row {
    /// What is measured.
    pub figure: String,
    /// The measured value(s).
    pub measured: String,
    /// The target it is read against.
    pub target: String,
    /// Met, missed or informational.
    pub verdict: Verdict,
    /// What limits it (CPU split, ceilings, notes).
    pub limit: String,
}

/// The whole report of a run.
#[derive(Debug, Default)]
pub struct Report {
    /// Rows in order.
    pub rows: Vec<Row>,
    /// Machine-readable figures by name.
    pub values: Map<String, Value>,
    /// Lines about the run (machine, profile, scaling).
    pub notes: Vec<String>,
}

impl Report {
    /// Adds a row.
    pub fn row(
        &mut self,
        figure: impl Into<String>,
        measured: impl Into<String>,
        target: impl Into<String>,
        verdict: Verdict,
        limit: impl Into<String>,
    ) {
        let row = Row {
            figure: figure.into(),
            measured: measured.into(),
            target: target.into(),
            verdict,
            limit: limit.into(),
        };
        eprintln!(
            "[bench] {} = {} ({})",
            row.figure,
            row.measured,
            row.verdict.label()
        );
        self.rows.push(row);
    }

    /// Records a machine-readable value.
    pub fn value(&mut self, name: &str, value: impl Into<Value>) {
        self.values.insert(name.to_owned(), value.into());
    }

    /// Adds a note line.
    pub fn note(&mut self, line: impl Into<String>) {
        let line = line.into();
        eprintln!("[bench] note: {line}");
        self.notes.push(line);
    }

    /// The table as Markdown.
    pub fn markdown(&self) -> String {
        let mut out = String::new();
        for line in &self.notes {
            out.push_str(&format!("- {line}\n"));
        }
        out.push('\n');
        out.push_str("| figure | measured | target | verdict | what limits it |\n");
        out.push_str("|---|---|---|---|---|\n");
        for row in &self.rows {
            out.push_str(&format!(
                "| {} | {} | {} | {} | {} |\n",
                cell(&row.figure),
                cell(&row.measured),
                cell(&row.target),
                row.verdict.label(),
                cell(&row.limit)
            ));
        }
        out
    }

    /// Everything as JSON.
    pub fn json(&self) -> Value {
        let rows: Vec<Value> = self
            .rows
            .iter()
            .map(|row| {
                serde_json::json!({
                    "figure": row.figure,
                    "measured": row.measured,
                    "target": row.target,
                    "verdict": match row.verdict {
                        Verdict::Met => "met",
                        Verdict::Missed => "missed",
                        Verdict::Info => "info",
                    },
                    "limit": row.limit,
                })
            })
            .collect();
        serde_json::json!({
            "notes": self.notes,
            "values": self.values,
            "rows": rows,
        })
    }
}

fn cell(text: &str) -> String {
    text.replace('|', "\\|").replace('\n', " ")
}
