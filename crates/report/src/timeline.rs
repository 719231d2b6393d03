//! The pipeline schedule as a timeline: a pure function of (schedule, pp, vpp, micro-batches)
//! to the operations every stage runs, each at an integer start slot with an integer length.
//!
//! The model is the usual uniform-stage one (every stage's micro-batch takes the same time, as
//! in the schedules' papers): a forward is 1 slot, a backward 2 (input gradient 1 + weight
//! gradient 1, split where the schedule splits them), per model chunk; communication between
//! stages takes no slot. Each stage runs its operations in the schedule's own order (below,
//! with the source of each), and an operation starts as soon as the stage is free and its
//! inputs exist (the previous virtual stage's forward, the next one's backward). The
//! timeline's bubble — slots a stage idles before the last operation of the step ends — is
//! therefore what the schedule's order produces, not a formula; `tests` check it equals the
//! evaluator's `Schedule::bubble` for every schedule.

use autoplan_plan::Schedule;

/// What one slot range of a stage does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Op {
    /// Forward of one micro-batch through one model chunk.
    Forward,
    /// Backward: input gradient and weight gradient together (1F1B, interleaved).
    Backward,
    /// Input-gradient backward only (zero-bubble, DualPipe): the weight gradient follows later.
    BackwardInput,
    /// Weight-gradient backward, deferred to fill a bubble.
    Weight,
    /// DualPipe's overlapped forward of one direction and backward of the other ("F&B").
    ForwardBackward,
}

impl Op {
    /// Length in slots (a forward of one chunk is 1).
    pub fn slots(self) -> u32 {
        match self {
            Op::Forward | Op::BackwardInput | Op::Weight => 1,
            Op::Backward => 2,
            // DualPipe Table 2's F&B counted as its parts (F + B + W), no overlap gain.
            Op::ForwardBackward => 3,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Op::Forward => "forward",
            Op::Backward => "backward",
            Op::BackwardInput => "backward (input)",
            Op::Weight => "weight gradient",
            Op::ForwardBackward => "forward+backward",
        }
    }
}

/// One operation on one stage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Event {
    pub op: Op,
    /// Micro-batch (of the forward part, for [`Op::ForwardBackward`]).
    pub mb: u32,
    /// Model chunk on this stage (interleaved: 0..vpp; DualPipe: the direction, 0 or 1).
    pub chunk: u32,
    /// Micro-batch and chunk of the backward part of an [`Op::ForwardBackward`].
    pub back: Option<(u32, u32)>,
    pub start: u32,
    pub len: u32,
}

impl Event {
    pub fn end(&self) -> u32 {
        self.start + self.len
    }
}

/// A schedule laid out: every stage's events in time order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Timeline {
    pub schedule: Schedule,
    pub pp: u32,
    pub vpp: u32,
    pub microbatches: u32,
    /// Slots of work per micro-batch per stage (forward + backward of all its chunks).
    pub unit: u32,
    /// Slot at which the last operation ends.
    pub makespan: u32,
    stages: Vec<Vec<Event>>,
}

/// A schedule the timeline cannot lay out for these numbers (the framework refuses them too).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TimelineError {
    #[error("pp, vpp and the micro-batch count must be at least 1")]
    Empty,
    #[error("interleaved 1F1B needs at least pp ({pp}) micro-batches, got {microbatches} (Megatron-LM's check)")]
    Interleaved { pp: u32, microbatches: u32 },
    #[error("DualPipe needs an even pp ≥ 2 and an even number of micro-batches ≥ 2·pp; pp={pp}, {microbatches} micro-batches (DualPipe's own assertion)")]
    DualPipe { pp: u32, microbatches: u32 },
    #[error(
        "the {schedule:?} order deadlocks on pp={pp}, vpp={vpp}, {microbatches} micro-batches"
    )]
    Deadlock {
        schedule: Schedule,
        pp: u32,
        vpp: u32,
        microbatches: u32,
    },
    #[error("{slots} slots: too long a timeline to draw (at most {MAX_SLOTS})")]
    TooLong { slots: u64 },
}

/// The longest timeline laid out (slots per stage); a report draws far fewer.
pub const MAX_SLOTS: u64 = 1 << 20;

/// One operation of a stage's order before it is timed.
#[derive(Debug, Clone, Copy)]
struct Planned {
    op: Op,
    mb: u32,
    chunk: u32,
    back: Option<(u32, u32)>,
}

impl Timeline {
    /// Lay out `schedule` on `pp` stages, `vpp` chunks per stage (interleaved only), `micro`
    /// micro-batches.
    pub fn new(
        schedule: Schedule,
        pp: u32,
        vpp: u32,
        micro: u32,
    ) -> Result<Timeline, TimelineError> {
        if pp == 0 || vpp == 0 || micro == 0 {
            return Err(TimelineError::Empty);
        }
        let vpp = if schedule == Schedule::Interleaved {
            vpp
        } else {
            1
        };
        let slots = u64::from(micro) * u64::from(vpp) * 3 * 2 + 6 * u64::from(pp) * u64::from(vpp);
        if slots > MAX_SLOTS {
            return Err(TimelineError::TooLong { slots });
        }
        let orders: Vec<Vec<Planned>> = match schedule {
            Schedule::OneF1B => (0..pp).map(|s| one_f1b(pp, s, micro)).collect(),
            Schedule::Interleaved => {
                if micro < pp {
                    return Err(TimelineError::Interleaved {
                        pp,
                        microbatches: micro,
                    });
                }
                (0..pp).map(|s| interleaved(pp, vpp, s, micro)).collect()
            }
            Schedule::ZeroBubble => (0..pp).map(|s| zb_h1(pp, s, micro)).collect(),
            Schedule::DualPipe => {
                if !pp.is_multiple_of(2) || !micro.is_multiple_of(2) || micro < 2 * pp {
                    return Err(TimelineError::DualPipe {
                        pp,
                        microbatches: micro,
                    });
                }
                (0..pp).map(|s| dualpipe(pp, s, micro)).collect()
            }
        };
        let unit = 3 * vpp;
        let stages = simulate(schedule, pp, vpp, &orders).ok_or(TimelineError::Deadlock {
            schedule,
            pp,
            vpp,
            microbatches: micro,
        })?;
        let makespan = stages
            .iter()
            .flat_map(|s| s.last())
            .map(Event::end)
            .max()
            .unwrap_or(0);
        Ok(Timeline {
            schedule,
            pp,
            vpp,
            microbatches: micro,
            unit,
            makespan,
            stages,
        })
    }

    /// The events of `stage` in time order.
    pub fn events(&self, stage: u32) -> &[Event] {
        self.stages.get(stage as usize).map_or(&[], Vec::as_slice)
    }

    /// What `stage` does during `slot`: the event covering it, or `None` (idle).
    pub fn at(&self, stage: u32, slot: u32) -> Option<&Event> {
        let ev = self.events(stage);
        let i = ev.partition_point(|e| e.end() <= slot);
        ev.get(i).filter(|e| e.start <= slot)
    }

    /// Idle slots of the busiest stage over the step: the bubble, in slots.
    pub fn bubble_slots(&self) -> u32 {
        self.makespan - self.microbatches * self.unit
    }

    /// The bubble as a fraction of 1F1B's fill-and-drain, `(pp − 1)` micro-batches of a
    /// stage: what `Schedule::bubble(1.0, vpp, pp)` gives in the evaluator. 0 for `pp = 1`.
    pub fn bubble_fraction(&self) -> f64 {
        if self.pp <= 1 {
            return 0.0;
        }
        f64::from(self.bubble_slots()) / (f64::from(self.unit) * f64::from(self.pp - 1))
    }
}

fn fwd(mb: u32, chunk: u32) -> Planned {
    Planned {
        op: Op::Forward,
        mb,
        chunk,
        back: None,
    }
}

fn op(op: Op, mb: u32, chunk: u32) -> Planned {
    Planned {
        op,
        mb,
        chunk,
        back: None,
    }
}

/// 1F1B (PipeDream-flush; Megatron-LM `forward_backward_pipelining_without_interleaving`):
/// `pp − s − 1` warm-up forwards, then one forward and one backward alternately, then the
/// cool-down backwards.
fn one_f1b(pp: u32, s: u32, m: u32) -> Vec<Planned> {
    let warm = (pp - s - 1).min(m);
    let mut v: Vec<Planned> = (0..warm).map(|i| fwd(i, 0)).collect();
    for i in 0..m - warm {
        v.push(fwd(warm + i, 0));
        v.push(op(Op::Backward, i, 0));
    }
    v.extend((m - warm..m).map(|i| op(Op::Backward, i, 0)));
    v
}

/// Interleaved 1F1B (Megatron-Core `schedules.py`, `forward_backward_pipelining_with_interleaving`
/// and `get_schedule_table`): micro-batches in groups of `pp` (the last group takes the rest),
/// each group through chunk 0, then chunk 1, ...; backwards in the same table with the chunks
/// reversed; `(pp − s − 1)·2 + (vpp − 1)·pp` warm-up forwards, then one forward and one
/// backward alternately.
fn interleaved(pp: u32, vpp: u32, s: u32, m: u32) -> Vec<Planned> {
    let mut table = Vec::with_capacity((m * vpp) as usize);
    let mut lo = 0;
    while lo < m {
        let hi = if lo + pp >= m { m } else { lo + pp };
        for c in 0..vpp {
            table.extend((lo..hi).map(|mb| (mb, c)));
        }
        lo = hi;
    }
    let total = m * vpp;
    let warm = ((pp - s - 1) * 2 + (vpp - 1) * pp).min(total);
    let f = |k: u32| {
        let (mb, c) = table[k as usize];
        fwd(mb, c)
    };
    let b = |k: u32| {
        let (mb, c) = table[k as usize];
        op(Op::Backward, mb, vpp - 1 - c)
    };
    let mut v: Vec<Planned> = (0..warm).map(f).collect();
    for i in 0..total - warm {
        v.push(f(warm + i));
        v.push(b(i));
    }
    v.extend((total - warm..total).map(b));
    v
}

/// ZB-H1 (Qi et al., "Zero Bubble Pipeline Parallelism", ICLR 2024, §3.1): 1F1B's order of
/// forwards and input-gradient backwards (so 1F1B's activation memory); the weight gradients
/// are not in the order: [`simulate`] runs the oldest pending one whenever the stage would
/// otherwise idle, and the rest at the end.
fn zb_h1(pp: u32, s: u32, m: u32) -> Vec<Planned> {
    one_f1b(pp, s, m)
        .into_iter()
        .map(|p| match p.op {
            Op::Backward => op(Op::BackwardInput, p.mb, p.chunk),
            _ => p,
        })
        .collect()
}

/// DualPipe (DeepSeek-V3 §3.2.1; deepseek-ai/DualPipe `dualpipe.py`, `step`): micro-batches
/// enter from both ends, half each; stage `s` holds a chunk of each direction. Its eight
/// phases with `h = pp/2`, `r = min(s, pp−1−s)`: `2(h−r−1)` F0; `r+1` (F0 F1); `h−r−1`
/// (B1 W F1) with the weight gradient split; `M/2 − pp + r + 1` (F0&B1, F1&B0) overlapped;
/// `h−r−1` (B1, F1&B0); `r+1` (B1 B0), splitting W from the middle on; `h−r−1` (W B0); `r+1`
/// W. "0" is the direction entering at this end of the pipeline (the second half's ranks swap).
fn dualpipe(pp: u32, s: u32, m: u32) -> Vec<Planned> {
    let h = pp / 2;
    let r = s.min(pp - 1 - s);
    let second = s >= h;
    let dir = |phase: u32| phase ^ u32::from(second);
    let mut next_f = [0u32; 2];
    let mut next_b = [0u32; 2];
    let mut deferred: std::collections::VecDeque<(u32, u32)> = std::collections::VecDeque::new();
    let mut v = Vec::new();
    let mut f = |v: &mut Vec<Planned>, phase: u32| {
        let d = dir(phase);
        v.push(fwd(next_f[d as usize], d));
        next_f[d as usize] += 1;
    };
    let mut b = |v: &mut Vec<Planned>,
                 phase: u32,
                 zb: bool,
                 deferred: &mut std::collections::VecDeque<(u32, u32)>| {
        let d = dir(phase);
        let mb = next_b[d as usize];
        next_b[d as usize] += 1;
        if zb {
            v.push(op(Op::BackwardInput, mb, d));
            deferred.push_back((mb, d));
        } else {
            v.push(op(Op::Backward, mb, d));
        }
    };
    let w = |v: &mut Vec<Planned>, deferred: &mut std::collections::VecDeque<(u32, u32)>| {
        if let Some((mb, d)) = deferred.pop_front() {
            v.push(op(Op::Weight, mb, d));
        }
    };
    for _ in 0..2 * (h - r - 1) {
        f(&mut v, 0);
    }
    for _ in 0..r + 1 {
        f(&mut v, 0);
        f(&mut v, 1);
    }
    for _ in 0..h - r - 1 {
        b(&mut v, 1, true, &mut deferred);
        w(&mut v, &mut deferred);
        f(&mut v, 1);
    }
    let main = m / 2 - pp + r + 1;
    for i in 0..main {
        if i == 0 && second {
            f(&mut v, 0);
            b(&mut v, 1, false, &mut deferred);
        } else {
            fused(&mut v, &mut f, &mut b, 0, &mut deferred);
        }
        fused(&mut v, &mut f, &mut b, 1, &mut deferred);
    }
    for _ in 0..h - r - 1 {
        b(&mut v, 1, false, &mut deferred);
        fused(&mut v, &mut f, &mut b, 1, &mut deferred);
    }
    let k = r + 1;
    let mut zb = false;
    for i in 0..k {
        if i == k / 2 && r % 2 == 1 {
            zb = true;
        }
        b(&mut v, 1, zb, &mut deferred);
        if i == k / 2 && r.is_multiple_of(2) {
            zb = true;
        }
        b(&mut v, 0, zb, &mut deferred);
    }
    for _ in 0..h - r - 1 {
        w(&mut v, &mut deferred);
        b(&mut v, 0, true, &mut deferred);
    }
    while !deferred.is_empty() {
        w(&mut v, &mut deferred);
    }
    v
}

/// DualPipe's `_forward_backward_chunk(phase, 1 − phase)`: the forward of `phase` and the
/// whole backward of the other, as one overlapped operation.
fn fused<F, B>(
    v: &mut Vec<Planned>,
    f: &mut F,
    b: &mut B,
    phase: u32,
    deferred: &mut std::collections::VecDeque<(u32, u32)>,
) where
    F: FnMut(&mut Vec<Planned>, u32),
    B: FnMut(&mut Vec<Planned>, u32, bool, &mut std::collections::VecDeque<(u32, u32)>),
{
    let mut tmp = Vec::with_capacity(2);
    f(&mut tmp, phase);
    b(&mut tmp, 1 - phase, false, deferred);
    let (fw, bw) = (tmp[0], tmp[1]);
    v.push(Planned {
        op: Op::ForwardBackward,
        mb: fw.mb,
        chunk: fw.chunk,
        back: Some((bw.mb, bw.chunk)),
    });
}

/// Where (stage, chunk) sits in its pipeline: the virtual stage index, 0 at the entry.
fn position(schedule: Schedule, pp: u32, stage: u32, chunk: u32) -> u32 {
    match schedule {
        Schedule::Interleaved => chunk * pp + stage,
        Schedule::DualPipe if chunk == 1 => pp - 1 - stage,
        _ => stage,
    }
}

/// The stage holding virtual stage `pos` of chunk direction `chunk`'s pipeline, and its chunk.
fn holder(schedule: Schedule, pp: u32, pos: u32, chunk: u32) -> (u32, u32) {
    match schedule {
        Schedule::Interleaved => (pos % pp, pos / pp),
        Schedule::DualPipe if chunk == 1 => (pp - 1 - pos, 1),
        _ => (pos, chunk),
    }
}

/// Times every stage's order, slot by slot: at each slot a free stage starts the next
/// operation of its order if its inputs are done, else (zero-bubble only) its oldest pending
/// weight gradient, else idles. Inputs finish on slot boundaries, so a weight gradient started
/// in an idle slot never delays the order. `None` when the orders deadlock (every stage idle
/// with work left).
fn simulate(
    schedule: Schedule,
    pp: u32,
    vpp: u32,
    orders: &[Vec<Planned>],
) -> Option<Vec<Vec<Event>>> {
    use std::collections::{HashMap, VecDeque};
    let last = match schedule {
        Schedule::Interleaved => pp * vpp - 1,
        _ => pp - 1,
    };
    let flexible_w = schedule == Schedule::ZeroBubble;
    // Finish slot of (class, stage, chunk, mb): class 0 forward, 1 input gradient.
    let mut done: HashMap<(u8, u32, u32, u32), u32> = HashMap::new();
    let n = orders.len();
    let mut next = vec![0usize; n];
    let mut free = vec![0u32; n];
    let mut pending: Vec<VecDeque<(u32, u32)>> = vec![VecDeque::new(); n];
    let mut out: Vec<Vec<Event>> = orders.iter().map(|o| Vec::with_capacity(o.len())).collect();
    let mut t = 0u32;
    while (0..n).any(|s| next[s] < orders[s].len() || !pending[s].is_empty()) {
        if free.iter().all(|&f| f < t) && t > 0 && !out.iter().flatten().any(|e| e.start + 1 == t) {
            // Nothing running and nothing started last slot: nothing can ever become ready.
            return None;
        }
        for s in 0..n {
            if free[s] > t {
                continue;
            }
            let st = s as u32;
            let fdep = |mb: u32, chunk: u32| {
                let pos = position(schedule, pp, st, chunk);
                (pos > 0).then(|| {
                    let (hs, hc) = holder(schedule, pp, pos - 1, chunk);
                    (0u8, hs, hc, mb)
                })
            };
            let bdep = |mb: u32, chunk: u32| {
                let pos = position(schedule, pp, st, chunk);
                if pos < last {
                    let (hs, hc) = holder(schedule, pp, pos + 1, chunk);
                    Some((1u8, hs, hc, mb))
                } else {
                    Some((0u8, st, chunk, mb))
                }
            };
            let mut started: Option<Planned> = None;
            if let Some(p) = orders[s].get(next[s]) {
                let needs: [Option<(u8, u32, u32, u32)>; 2] = match p.op {
                    Op::Forward => [fdep(p.mb, p.chunk), None],
                    Op::Backward | Op::BackwardInput => [bdep(p.mb, p.chunk), None],
                    Op::Weight => [Some((1, st, p.chunk, p.mb)), None],
                    Op::ForwardBackward => [
                        fdep(p.mb, p.chunk),
                        p.back.and_then(|(bm, bc)| bdep(bm, bc)),
                    ],
                };
                let ready = needs
                    .iter()
                    .flatten()
                    .all(|k| done.get(k).is_some_and(|&f| f <= t));
                if ready {
                    started = Some(*p);
                    next[s] += 1;
                }
            }
            if started.is_none() && flexible_w {
                if let Some((mb, c)) = pending[s].pop_front() {
                    started = Some(op(Op::Weight, mb, c));
                }
            }
            let Some(p) = started else { continue };
            let len = p.op.slots();
            let end = t + len;
            match p.op {
                Op::Forward => {
                    done.insert((0, st, p.chunk, p.mb), end);
                }
                Op::Backward | Op::BackwardInput => {
                    done.insert((1, st, p.chunk, p.mb), end);
                    if flexible_w {
                        pending[s].push_back((p.mb, p.chunk));
                    }
                }
                Op::Weight => {}
                Op::ForwardBackward => {
                    done.insert((0, st, p.chunk, p.mb), end);
                    if let Some((bm, bc)) = p.back {
                        done.insert((1, st, bc, bm), end);
                    }
                }
            }
            out[s].push(Event {
                op: p.op,
                mb: p.mb,
                chunk: p.chunk,
                back: p.back,
                start: t,
                len,
            });
            free[s] = end;
        }
        t += 1;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The timeline's bubble against the evaluator's formula, for uniform stages: exact.
    #[test]
    fn bubble_fraction_is_the_evaluators_formula() {
        let cases: &[(Schedule, &[u32], &[u32])] = &[
            (Schedule::OneF1B, &[1, 2, 3, 4, 8], &[1]),
            (Schedule::Interleaved, &[2, 4, 8], &[2, 3, 4]),
            (Schedule::ZeroBubble, &[2, 3, 4, 8], &[1]),
            (Schedule::DualPipe, &[2, 4, 8], &[1]),
        ];
        for &(sch, pps, vpps) in cases {
            for &pp in pps {
                for &vpp in vpps {
                    for m in [pp, 2 * pp, 3 * pp, 4 * pp + 2 * (pp % 2), 16 * pp] {
                        if sch == Schedule::DualPipe && (m < 2 * pp || m % 2 == 1) {
                            continue;
                        }
                        let t = Timeline::new(sch, pp, vpp, m).unwrap();
                        // The evaluator's bubble of `pp` uniform stages of `unit` slots each.
                        let base = f64::from((pp - 1) * t.unit);
                        let want = sch.bubble(base, vpp, pp);
                        let got = f64::from(t.bubble_slots());
                        assert!(
                            (got - want).abs() < 1e-12,
                            "{sch:?} pp={pp} vpp={vpp} m={m}: timeline {got} ({} slots), evaluator {want}",
                            t.bubble_slots()
                        );
                    }
                }
            }
        }
    }

    /// Every micro-batch runs its forward and backward (and weight gradient) once per chunk on
    /// every stage, no two events of a stage overlap, and `at` finds each event's slots.
    #[test]
    fn every_stage_runs_each_microbatch_once_without_overlap() {
        for (sch, pp, vpp, m) in [
            (Schedule::OneF1B, 4, 1, 8),
            (Schedule::Interleaved, 4, 2, 8),
            (Schedule::ZeroBubble, 4, 1, 6),
            (Schedule::DualPipe, 4, 1, 8),
        ] {
            let t = Timeline::new(sch, pp, vpp, m).unwrap();
            for s in 0..pp {
                let ev = t.events(s);
                let work: u32 = ev.iter().map(|e| e.len).sum();
                assert_eq!(work, m * t.unit, "{sch:?} stage {s}");
                for w in ev.windows(2) {
                    assert!(w[0].end() <= w[1].start, "{sch:?} stage {s}: {w:?}");
                }
                for e in ev {
                    assert_eq!(t.at(s, e.start), Some(e));
                    assert_eq!(t.at(s, e.end() - 1), Some(e));
                }
                let fwds = ev
                    .iter()
                    .filter(|e| matches!(e.op, Op::Forward | Op::ForwardBackward))
                    .count() as u32;
                assert_eq!(fwds, m * t.vpp, "{sch:?} stage {s}");
            }
        }
    }

    /// A forward never starts before the previous stage's forward of the same micro-batch ends.
    #[test]
    fn forwards_follow_the_pipeline() {
        let t = Timeline::new(Schedule::OneF1B, 4, 1, 8).unwrap();
        for s in 1..4 {
            for e in t.events(s).iter().filter(|e| e.op == Op::Forward) {
                let prev = t
                    .events(s - 1)
                    .iter()
                    .find(|p| p.op == Op::Forward && p.mb == e.mb)
                    .unwrap();
                assert!(prev.end() <= e.start);
            }
        }
        // 1F1B: the first stage idles (pp − 1)·3 slots in all.
        assert_eq!(t.bubble_slots(), 9);
        assert_eq!(t.at(0, 0).map(|e| e.op), Some(Op::Forward));
    }

    /// Micro-batches not a multiple of pp (Megatron-Core runs them: the last group takes
    /// the rest): the timeline's bubble, against the formula's.
    #[test]
    fn interleaved_uneven_groups() {
        for (pp, vpp, m) in [(2, 4, 15), (4, 2, 6)] {
            let t = Timeline::new(Schedule::Interleaved, pp, vpp, m).unwrap();
            let want = Schedule::Interleaved.bubble(f64::from((pp - 1) * t.unit), vpp, pp);
            // The last, smaller group runs its chunks with fewer micro-batches to hide the
            // hops behind: more bubble than the formula (pp=2, vpp=4, 15: 9 slots, not 3).
            assert!(
                f64::from(t.bubble_slots()) >= want,
                "pp={pp} vpp={vpp} m={m}"
            );
        }
    }

    #[test]
    fn refuses_what_the_framework_refuses() {
        assert!(matches!(
            Timeline::new(Schedule::Interleaved, 4, 2, 3),
            Err(TimelineError::Interleaved { .. })
        ));
        assert!(matches!(
            Timeline::new(Schedule::DualPipe, 4, 1, 6),
            Err(TimelineError::DualPipe { .. })
        ));
        assert!(matches!(
            Timeline::new(Schedule::DualPipe, 3, 1, 12),
            Err(TimelineError::DualPipe { .. })
        ));
        assert!(matches!(
            Timeline::new(Schedule::OneF1B, 0, 1, 6),
            Err(TimelineError::Empty)
        ));
    }
}
