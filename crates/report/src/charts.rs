//! The charts, hand-written SVG: step-time breakdown, pipeline timeline, per-layer
//! communication, memory per stage, validation.

use std::fmt::Write;

use autoplan_evaluate::{CommKind, StepBreakdown};
use autoplan_plan::Schedule;

use crate::svg::{c, esc, gib, line, nice_step, rect, secs, svg, text, PALETTE};
use crate::timeline::{Op, Timeline};
use crate::{PlanView, ValidationView};

/// The breakdown's parts: label, colour, value.
fn parts(b: &StepBreakdown) -> [(&'static str, &'static str, f64); 10] {
    [
        ("compute", PALETTE[0], b.compute_s),
        ("recompute", PALETTE[4], b.recompute_s),
        ("TP/SP exposed", PALETTE[1], b.tp_exposed_s),
        ("CP exposed", PALETTE[6], b.cp_exposed_s),
        ("EP exposed", PALETTE[3], b.ep_exposed_s),
        ("PP exposed", PALETTE[5], b.pp_exposed_s),
        ("DP exposed", PALETTE[2], b.dp_exposed_s),
        ("bubble", PALETTE[8], b.bubble_s),
        ("optimizer", PALETTE[7], b.optimizer_s),
        // The optimizer offload to host memory (`offload_optimizer`; 0 without it).
        ("offload", PALETTE[9], b.offload_s),
    ]
}

fn legend(o: &mut String, items: &[(&str, &str)]) {
    o.push_str("<p class=\"legend\">");
    for (name, col) in items {
        let _ = write!(
            o,
            "<span><i style=\"background:{col}\"></i>{}</span>",
            esc(name)
        );
    }
    o.push_str("</p>");
}

/// An x axis from 0 to `max` over `w` pixels starting at `x0`, at `y`; labels by `f`.
fn x_axis(o: &mut String, x0: f64, w: f64, y: f64, top: f64, max: f64, f: &dyn Fn(f64) -> String) {
    let step = nice_step(max, 6.0);
    let mut v = 0.0;
    while v <= max * 1.0001 {
        let x = x0 + w * v / max;
        line(o, x, top, x, y, "grid");
        text(o, x, y + 13.0, "middle", &f(v));
        v += step;
    }
    line(o, x0, y, x0 + w, y, "axis");
}

/// Stacked bars of the step time, one per labelled breakdown.
pub(crate) fn breakdown(o: &mut String, list: &[(String, StepBreakdown)]) {
    let (lw, w, rh) = (150.0, 820.0, 22.0);
    let max = list.iter().map(|(_, b)| b.total()).fold(0.0, f64::max);
    let h = rh * list.len() as f64 + 30.0;
    let mut s = String::new();
    for (i, (label, b)) in list.iter().enumerate() {
        let y = 4.0 + rh * i as f64;
        text(&mut s, lw - 6.0, y + 14.0, "end", label);
        let mut x = lw;
        for (name, col, v) in parts(b) {
            let bw = if max > 0.0 { w * v / max } else { 0.0 };
            let pct = if b.total() > 0.0 {
                100.0 * v / b.total()
            } else {
                0.0
            };
            rect(
                &mut s,
                x,
                y,
                bw,
                rh - 6.0,
                col,
                &format!("{label}: {name} {} ({pct:.1}%)", secs(v)),
            );
            x += bw;
        }
        text(&mut s, x + 4.0, y + 14.0, "start", &secs(b.total()));
    }
    x_axis(&mut s, lw, w, h - 22.0, 0.0, max.max(1e-12), &|v| secs(v));
    o.push_str("<section id=\"breakdown\"><h2>Step-time breakdown</h2>");
    let items: Vec<(&str, &str)> = parts(&StepBreakdown::default())
        .iter()
        .map(|p| (p.0, p.1))
        .collect();
    legend(o, &items);
    o.push_str(&svg(lw + w + 90.0, h, "step-time breakdown", &s));
    o.push_str("<p class=\"note\">The evaluator's breakdown of the busiest stage: the parts sum to the step time; hover a segment for its value.</p></section>\n");
}

/// The micro-batch count drawn: the plan's, or fewer with the same remainder modulo 2·pp (the
/// same bubble: the steady state repeats) when the plan has too many to draw legibly.
fn drawn_microbatches(pp: u32, vpp: u32, m: u32) -> u32 {
    let cap = (1200 / (pp * vpp).max(1)).max(1);
    if m <= cap.max(2 * pp) {
        return m;
    }
    let lo = cap.max(2 * pp);
    lo + (m - lo) % (2 * pp)
}

fn op_colour(op: Op, chunk: u32, chunks: u32) -> String {
    let base = match op {
        Op::Forward => (0, 114, 178),
        Op::Backward => (230, 159, 0),
        Op::BackwardInput => (213, 94, 0),
        Op::Weight => (0, 158, 115),
        Op::ForwardBackward => (204, 121, 167),
    };
    // Later chunks lighter: mix with white.
    let t = if chunks > 1 {
        0.45 * f64::from(chunk) / f64::from(chunks - 1)
    } else {
        0.0
    };
    let mix = |v: u8| (f64::from(v) + (255.0 - f64::from(v)) * t).round() as u8;
    format!("#{:02x}{:02x}{:02x}", mix(base.0), mix(base.1), mix(base.2))
}

/// The pipeline schedule: every stage's forward, backward and weight-gradient slots.
pub(crate) fn timeline(o: &mut String, p: &PlanView) {
    let r = &p.report;
    let plan = &p.plan;
    let pp = plan.pp.max(1);
    let vpp = if plan.schedule == Schedule::Interleaved {
        plan.vpp.max(1)
    } else {
        1
    };
    let m = r.microbatches.max(1);
    let md = drawn_microbatches(pp, vpp, m);
    o.push_str("<section id=\"timeline\"><h3>Pipeline schedule</h3>");
    let t = match Timeline::new(plan.schedule, pp, vpp, md) {
        Ok(t) => t,
        Err(e) => {
            let _ = writeln!(
                o,
                "<p class=\"note\">No timeline: {}.</p></section>",
                esc(&e.to_string())
            );
            return;
        }
    };
    let b = &r.breakdown;
    let tmax = r
        .stages
        .get(r.bottleneck_stage as usize)
        .map_or(0.0, |s| s.time_per_microbatch_s);
    let slot_s = tmax / f64::from(t.unit);
    // Exposed TP/CP/EP/PP share of the busiest stage's micro-batch time.
    let exposed = b.tp_exposed_s + b.cp_exposed_s + b.ep_exposed_s + b.pp_exposed_s;
    let busy = b.compute_s + b.recompute_s + exposed;
    let frac = if busy > 0.0 { exposed / busy } else { 0.0 };
    let tail = if slot_s > 0.0 {
        (b.dp_exposed_s + b.optimizer_s + b.offload_s) / slot_s
    } else {
        0.0
    };
    let (lw, w, rh) = (70.0, 1000.0, 20.0);
    let total = f64::from(t.makespan) + tail;
    let sx = w / total.max(1.0);
    let h = rh * f64::from(pp) + 34.0;
    let mut s = String::new();
    for st in 0..pp {
        let y = 4.0 + rh * f64::from(st);
        let hot = st == r.bottleneck_stage;
        text(
            &mut s,
            lw - 6.0,
            y + 13.0,
            "end",
            &format!("stage {st}{}", if hot { " *" } else { "" }),
        );
        rect(
            &mut s,
            lw,
            y,
            sx * f64::from(t.makespan),
            rh - 4.0,
            "#f1f1f1",
            &format!("stage {st}: idle = bubble"),
        );
        for e in t.events(st) {
            let x = lw + sx * f64::from(e.start);
            let ew = sx * f64::from(e.len);
            let what = match e.back {
                Some((bm, bc)) => format!("F mb {} chunk {} + B mb {bm} chunk {bc}", e.mb, e.chunk),
                None => format!("{} mb {} chunk {}", e.op.name(), e.mb, e.chunk),
            };
            let title = format!(
                "stage {st}: {what}, slots {}–{} ({} – {})",
                e.start,
                e.end(),
                secs(slot_s * f64::from(e.start)),
                secs(slot_s * f64::from(e.end()))
            );
            rect(
                &mut s,
                x,
                y,
                ew - 0.5,
                rh - 4.0,
                &op_colour(
                    e.op,
                    e.chunk,
                    t.vpp.max(if plan.schedule == Schedule::DualPipe {
                        2
                    } else {
                        1
                    }),
                ),
                &title,
            );
            if hot && frac > 0.0 {
                rect(
                    &mut s,
                    x + ew * (1.0 - frac),
                    y + rh - 8.0,
                    ew * frac - 0.5,
                    4.0,
                    "#b00020",
                    &format!(
                        "exposed TP/CP/EP/PP communication: {:.1}% of this slot",
                        100.0 * frac
                    ),
                );
            }
            if ew >= 14.0 {
                text(&mut s, x + ew / 2.0, y + 12.0, "middle", &e.mb.to_string());
            }
        }
        if tail > 0.0 {
            let x = lw + sx * f64::from(t.makespan);
            let dw = sx * b.dp_exposed_s / slot_s.max(1e-300);
            rect(
                &mut s,
                x,
                y,
                dw,
                rh - 4.0,
                PALETTE[2],
                &format!("exposed DP communication (step): {}", secs(b.dp_exposed_s)),
            );
            let ow = sx * b.optimizer_s / slot_s.max(1e-300);
            rect(
                &mut s,
                x + dw,
                y,
                ow,
                rh - 4.0,
                PALETTE[7],
                &format!("optimizer step: {}", secs(b.optimizer_s)),
            );
            if b.offload_s > 0.0 {
                rect(
                    &mut s,
                    x + dw + ow,
                    y,
                    sx * b.offload_s / slot_s.max(1e-300),
                    rh - 4.0,
                    PALETTE[9],
                    &format!("optimizer offload (host): {}", secs(b.offload_s)),
                );
            }
        }
    }
    x_axis(&mut s, lw, w, h - 22.0, 0.0, total.max(1.0), &|v| {
        secs(v * slot_s)
    });
    legend(
        o,
        &[
            ("forward", "#0072b2"),
            ("backward (input + weight)", "#e69f00"),
            ("backward (input)", "#d55e00"),
            ("weight gradient", "#009e73"),
            ("forward & backward overlapped", "#cc79a7"),
            ("exposed communication (bottleneck stage *)", "#b00020"),
            ("DP exposed", PALETTE[2]),
            ("optimizer", PALETTE[7]),
        ],
    );
    o.push_str("<div class=\"scroll\">");
    o.push_str(&svg(lw + w + 10.0, h, "pipeline schedule timeline", &s));
    o.push_str("</div>");
    let eval_frac = plan.schedule.bubble(1.0, plan.vpp, pp);
    let base = r
        .stages
        .iter()
        .map(|s| s.time_per_microbatch_s)
        .sum::<f64>()
        - tmax;
    let _ = writeln!(
        o,
        "<p class=\"note\">{} on {pp} stages{}, {md} micro-batches drawn{}; numbers are micro-batches, \
         lighter shades later chunks. Every stage is drawn at the bottleneck stage's pace ({} per micro-batch). \
         Timeline bubble: {} slots = {:.4} of 1F1B's (pp − 1) micro-batches; the evaluator's schedule factor: {:.4} \
         (bubble {} over Σ stage − max stage = {}).</p></section>",
        esc(plan.schedule.name()),
        if vpp > 1 { format!(", {vpp} chunks each") } else { String::new() },
        if md != m { format!(" (the plan has {m}; the steady state repeats)") } else { String::new() },
        secs(tmax),
        t.bubble_slots(),
        t.bubble_fraction(),
        eval_frac,
        secs(b.bubble_s),
        secs(base),
    );
}

fn kind_colour(k: CommKind) -> &'static str {
    match k {
        CommKind::Tp => PALETTE[1],
        CommKind::Cp => PALETTE[6],
        CommKind::Ep => PALETTE[3],
        CommKind::Pp => PALETTE[5],
        CommKind::Dp => PALETTE[2],
        CommKind::None => PALETTE[8],
    }
}

/// Per-layer communication: time on the link and exposed time per collective.
pub(crate) fn communication(o: &mut String, p: &PlanView) {
    let rows = &p.report.comm;
    o.push_str("<section id=\"communication\"><h3>Communication per collective</h3>");
    if rows.is_empty() {
        o.push_str("<p class=\"note\">No communication (one GPU).</p></section>\n");
        return;
    }
    let (lw, w, rh) = (420.0, 560.0, 18.0);
    let max = rows.iter().map(|r| r.time).fold(0.0, f64::max).max(1e-12);
    let h = rh * rows.len() as f64 + 30.0;
    let mut s = String::new();
    for (i, r) in rows.iter().enumerate() {
        let y = 4.0 + rh * i as f64;
        let layer = r.layer.map_or("step", |l| l.name());
        let pass = match r.pass {
            autoplan_evaluate::Pass::Forward => "fwd",
            autoplan_evaluate::Pass::Backward => "bwd",
            autoplan_evaluate::Pass::Recompute => "recompute",
            autoplan_evaluate::Pass::Step => "step",
        };
        let label = format!("{layer} · {} · {pass}", r.what);
        text(&mut s, lw - 6.0, y + 12.0, "end", &label);
        let title = format!(
            "{label}: {} {} on {} ranks ({} nodes), {:.0} calls × {} = {}, exposed {}",
            r.collective.name(),
            r.algorithm.name(),
            r.group.size,
            r.group.nodes,
            r.calls_per_step,
            secs(r.time_per_call),
            secs(r.time),
            secs(r.exposed)
        );
        let col = kind_colour(r.kind);
        let _ = write!(s, "<g opacity=\"0.35\">");
        rect(&mut s, lw, y, w * r.time / max, rh - 5.0, col, &title);
        s.push_str("</g>");
        rect(&mut s, lw, y, w * r.exposed / max, rh - 5.0, col, &title);
    }
    x_axis(&mut s, lw, w, h - 22.0, 0.0, max, &|v| secs(v));
    legend(
        o,
        &[
            ("TP/SP", kind_colour(CommKind::Tp)),
            ("CP", kind_colour(CommKind::Cp)),
            ("EP", kind_colour(CommKind::Ep)),
            ("PP", kind_colour(CommKind::Pp)),
            ("DP", kind_colour(CommKind::Dp)),
        ],
    );
    o.push_str(&svg(lw + w + 20.0, h, "communication per collective", &s));
    o.push_str("<p class=\"note\">Per step on the bottleneck stage: pale bar the time on the link, solid bar the exposed (not overlapped) part.</p></section>\n");
}

/// Memory of every stage's GPU against HBM.
pub(crate) fn memory(o: &mut String, p: &PlanView) {
    let hbm = p.report.hbm_bytes;
    let (lw, w, rh) = (70.0, 820.0, 22.0);
    let list = &p.stage_memory;
    let max = list.iter().map(|m| m.total).fold(hbm, f64::max) * 1.05;
    let h = rh * list.len() as f64 + 30.0;
    let mut s = String::new();
    let names = [
        "weights",
        "gradients",
        "optimizer",
        "activations",
        "logits",
        "extra",
        "transient",
        "reserve",
    ];
    for (i, mb) in list.iter().enumerate() {
        let y = 4.0 + rh * i as f64;
        text(
            &mut s,
            lw - 6.0,
            y + 14.0,
            "end",
            &format!("stage {}", mb.stage),
        );
        let vals = [
            mb.weights,
            mb.grads,
            mb.optimizer,
            mb.activations,
            mb.logits,
            mb.extra,
            mb.transient,
            mb.reserve,
        ];
        let mut x = lw;
        for (k, v) in vals.iter().enumerate() {
            let bw = w * v / max;
            rect(
                &mut s,
                x,
                y,
                bw,
                rh - 6.0,
                PALETTE[k],
                &format!("stage {}: {} {}", mb.stage, names[k], gib(*v)),
            );
            x += bw;
        }
        text(
            &mut s,
            x + 4.0,
            y + 14.0,
            "start",
            &format!("{} ({:.1} in flight)", gib(mb.total), mb.in_flight),
        );
    }
    x_axis(&mut s, lw, w, h - 22.0, 0.0, max, &|v| {
        format!("{:.0}", v / (1024.0 * 1024.0 * 1024.0))
    });
    let hx = lw + w * hbm / max;
    line(&mut s, hx, 0.0, hx, h - 22.0, "hbm");
    let _ = write!(s, "<title>HBM {}</title>", esc(&gib(hbm)));
    o.push_str("<section id=\"memory\"><h3>Memory per stage (GiB)</h3>");
    let items: Vec<(&str, &str)> = names
        .iter()
        .enumerate()
        .map(|(k, n)| (*n, PALETTE[k]))
        .collect();
    legend(o, &items);
    o.push_str(&svg(lw + w + 160.0, h, "memory per stage against HBM", &s));
    let _ = writeln!(
        o,
        "<p class=\"note\">Dashed red line: HBM, {}.</p></section>",
        esc(&gib(hbm))
    );
}

/// Predicted against measured: each row's error, coloured by GPU, shaped by family, with the
/// ±MAPE band; and the rows as a table.
pub(crate) fn validation(o: &mut String, v: &ValidationView) {
    let mut pts: Vec<&crate::ValidationPoint> = v.points.iter().collect();
    pts.sort_by(|a, b| (&a.family, &a.id).cmp(&(&b.family, &b.id)));
    let mut gpus: Vec<&str> = pts.iter().map(|p| p.gpu.as_str()).collect();
    gpus.sort_unstable();
    gpus.dedup();
    let mut fams: Vec<&str> = pts.iter().map(|p| p.family.as_str()).collect();
    fams.sort_unstable();
    fams.dedup();
    let err = |p: &crate::ValidationPoint| {
        if p.measured != 0.0 {
            p.predicted / p.measured - 1.0
        } else {
            0.0
        }
    };
    let lim = pts
        .iter()
        .map(|p| err(p).abs())
        .fold(v.mape, f64::max)
        .max(0.05)
        * 1.1;
    let (lw, w, h) = (60.0, 900.0, 320.0);
    let (top, bottom) = (10.0, h - 30.0);
    let y_of = |e: f64| top + (bottom - top) * (lim - e) / (2.0 * lim);
    let mut s = String::new();
    rect(
        &mut s,
        lw,
        y_of(v.mape),
        w,
        y_of(-v.mape) - y_of(v.mape),
        "#e8f0e8",
        &format!("error band: ±MAPE {:.1}%", 100.0 * v.mape),
    );
    let step = nice_step(lim, 4.0);
    let mut k = -(lim / step).floor() * step;
    while k <= lim {
        line(
            &mut s,
            lw,
            y_of(k),
            lw + w,
            y_of(k),
            if k.abs() < 1e-12 { "axis" } else { "grid" },
        );
        text(
            &mut s,
            lw - 4.0,
            y_of(k) + 4.0,
            "end",
            &format!("{:+.0}%", 100.0 * k),
        );
        k += step;
    }
    let n = pts.len().max(1) as f64;
    for (i, p) in pts.iter().enumerate() {
        let x = lw + w * (i as f64 + 0.5) / n;
        let y = y_of(err(p));
        let gi = gpus.iter().position(|g| *g == p.gpu).unwrap_or(0);
        let fi = fams.iter().position(|f| *f == p.family).unwrap_or(0);
        let col = PALETTE[gi % PALETTE.len()];
        let fill = if p.outlier { "none" } else { col };
        let title = format!(
            "{} ({}, {}): {} measured {:.4}, predicted {:.4}, error {:+.1}%{}",
            p.id,
            p.family,
            p.gpu,
            p.figure,
            p.measured,
            p.predicted,
            100.0 * err(p),
            if p.outlier {
                " (outside the calibrated domain)"
            } else {
                ""
            }
        );
        let shape = match fi % 4 {
            0 => format!("<circle cx=\"{}\" cy=\"{}\" r=\"5\"", c(x), c(y)),
            1 => format!(
                "<rect x=\"{}\" y=\"{}\" width=\"9\" height=\"9\"",
                c(x - 4.5),
                c(y - 4.5)
            ),
            2 => format!(
                "<polygon points=\"{},{} {},{} {},{}\"",
                c(x),
                c(y - 6.0),
                c(x - 5.5),
                c(y + 4.0),
                c(x + 5.5),
                c(y + 4.0)
            ),
            _ => format!(
                "<polygon points=\"{},{} {},{} {},{} {},{}\"",
                c(x),
                c(y - 6.0),
                c(x + 6.0),
                c(y),
                c(x),
                c(y + 6.0),
                c(x - 6.0),
                c(y)
            ),
        };
        let _ = write!(
            s,
            "{shape} fill=\"{fill}\" stroke=\"{col}\" stroke-width=\"1.5\"><title>{}</title></{}>",
            esc(&title),
            if fi % 4 == 0 {
                "circle"
            } else if fi % 4 == 1 {
                "rect"
            } else {
                "polygon"
            }
        );
    }
    text(
        &mut s,
        lw + w / 2.0,
        h - 8.0,
        "middle",
        "published runs, grouped by model family (hover for each)",
    );
    o.push_str("<section id=\"validation\"><h2>Predicted against measured</h2>");
    let items: Vec<(&str, &str)> = gpus
        .iter()
        .enumerate()
        .map(|(i, g)| (*g, PALETTE[i % PALETTE.len()]))
        .collect();
    legend(o, &items);
    let shapes = ["●", "■", "▲", "◆"];
    o.push_str("<p class=\"legend\">");
    for (i, f) in fams.iter().enumerate() {
        let _ = write!(o, "<span>{} {}</span>", shapes[i % 4], esc(f));
    }
    o.push_str("</p>");
    o.push_str(&svg(
        lw + w + 10.0,
        h,
        "prediction error per published run",
        &s,
    ));
    let _ = write!(o, "<p class=\"note\">(predicted − measured) / measured per row; green band ±MAPE = {:.1}%; hollow markers are outside the calibrated domain (not in the MAPE).</p>", 100.0 * v.mape);
    let t = crate::Table {
        columns: [
            "run",
            "family",
            "GPU",
            "figure",
            "measured",
            "predicted",
            "error",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect(),
        rows: pts
            .iter()
            .map(|p| {
                vec![
                    crate::Cell::text(&p.id),
                    crate::Cell::text(&p.family),
                    crate::Cell::text(&p.gpu),
                    crate::Cell::text(&p.figure),
                    crate::Cell::num(format!("{:.4}", p.measured), p.measured),
                    crate::Cell::num(format!("{:.4}", p.predicted), p.predicted),
                    crate::Cell::num(format!("{:+.1}%", 100.0 * err(p)), err(p)),
                ]
            })
            .collect(),
    };
    o.push_str("<div class=\"scroll\">");
    crate::page::table(o, &t);
    o.push_str("</div></section>\n");
}
