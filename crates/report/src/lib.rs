//! autoplan's HTML report: one self-contained file (inline CSS, hand-written SVG, a few lines
//! of JavaScript to sort tables; hover text is SVG `<title>`), no network access.
//!
//! Boundary: no IO. The CLI builds a [`Document`] from what the search, the evaluator and the
//! validation computed, and writes [`render`]'s string. The output is a function of the
//! document alone: numbers are printed with fixed precision, nothing depends on the time, the
//! thread count or hash order, so two runs give the same bytes.
//!
//! Sections (each an element with a fixed `id`, which the browser test checks): `summary`,
//! `ranking` (a search), `breakdown`, `timeline`, `communication`, `memory` (a plan),
//! `validation` (validate).
//!
//! The pipeline [`timeline`] is a pure model of the schedules (see its module); its bubble is
//! the evaluator's (`Schedule::bubble`), tested there.
//!
//! Not built: the Pareto chart (issue 19: the search has no Pareto front yet). Its hook is a
//! new `Document` field holding the front's points and one more `section_*` function here,
//! listed in `render`'s order; nothing in the page claims it.

pub mod svg;
pub mod timeline;

mod charts;
mod page;

pub use page::render;

use autoplan_evaluate::{MemoryBreakdown, Report, StepBreakdown};
use autoplan_plan::Plan;

/// Everything one report shows; sections without data are left out.
#[derive(Debug, Clone, Default)]
pub struct Document {
    /// Page title and first heading.
    pub title: String,
    /// The summary's (label, value) lines, in order.
    pub summary: Vec<(String, String)>,
    /// The ranked plans of a search.
    pub ranking: Option<Table>,
    /// Step-time breakdowns to draw as stacked bars, labelled (a search: its ranked plans).
    pub breakdowns: Vec<(String, StepBreakdown)>,
    /// One plan in full: timeline, communication, memory.
    pub plan: Option<PlanView>,
    /// Predicted against measured (validate).
    pub validation: Option<ValidationView>,
    /// What the prediction leaves out for these inputs (the CLI's stderr caveats: an
    /// uncalibrated or power-capped GPU, a MoE outside the validated domain, a framework
    /// profile's `not_modelled`), listed under the summary so a shared report carries them.
    pub caveats: Vec<String>,
}

/// A sortable table: a header and rows of cells (text shown, number sorted by).
#[derive(Debug, Clone, Default)]
pub struct Table {
    pub columns: Vec<String>,
    pub rows: Vec<Vec<Cell>>,
}

/// One cell: its text and, for a numeric column, the value it sorts by.
#[derive(Debug, Clone)]
pub struct Cell {
    pub text: String,
    pub sort: Option<f64>,
}

impl Cell {
    pub fn text(s: impl Into<String>) -> Cell {
        Cell {
            text: s.into(),
            sort: None,
        }
    }

    pub fn num(s: impl Into<String>, v: f64) -> Cell {
        Cell {
            text: s.into(),
            sort: Some(v),
        }
    }
}

/// One plan and its evaluator report.
#[derive(Debug, Clone)]
pub struct PlanView {
    pub heading: String,
    pub plan: Plan,
    pub report: Report,
    /// Memory of every pipeline stage's GPU (`Evaluator::stage_memory`).
    pub stage_memory: Vec<MemoryBreakdown>,
}

/// The rows of a validation.
#[derive(Debug, Clone, Default)]
pub struct ValidationView {
    pub points: Vec<ValidationPoint>,
    /// Mean absolute percentage error of the rows, a fraction: the band drawn around zero.
    pub mape: f64,
}

/// One published run, predicted and measured.
#[derive(Debug, Clone)]
pub struct ValidationPoint {
    pub id: String,
    /// Model family (colour of the marker's outline).
    pub family: String,
    /// GPU (fill colour).
    pub gpu: String,
    /// What is compared (e.g. "MFU").
    pub figure: String,
    pub measured: f64,
    pub predicted: f64,
    /// Outside the calibrated domain (drawn hollow).
    pub outlier: bool,
}
