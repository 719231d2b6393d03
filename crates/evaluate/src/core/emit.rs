//! Booking a communication row: a collective of one class is described once ([`Comm`]: kind,
//! what, pass, collective, group, bytes, calls, how it hides), priced, its exposed time added
//! to the class's per-kind sums, and listed in the report's table when the sink wants rows.

use autoplan_cluster::GroupPlacement;
use autoplan_cost::{Algorithm, Collective, CollectiveCost, Protocol};
use autoplan_graph::LayerKind;

use super::ctx::Ctx;
use super::memo::Memo;
use super::Evaluator;
use crate::comm::{CommKind, CommRow, Pass, Sink};

/// How much of a collective's time `t` the plan hides behind compute.
#[derive(Debug, Clone, Copy)]
pub(super) enum Hide {
    /// Nothing: all exposed.
    Nothing,
    /// Behind `window` seconds of compute: `max(t − window, 0)` exposed.
    Behind(f64),
    /// TP-comm overlap (tiled GEMM + collective, Calculon `tensor_par_overlap`) over `tp`
    /// ranks: one tile is exposed, the rest hide behind the GEMM of the same pass (`window`).
    Tiled { tp: f64, window: f64 },
    /// Behind `window` seconds of compute that runs on the SMs the communication kernel leaves
    /// it: while the hidden part `min(t, window)` runs, the compute progresses at `1 − share`
    /// of its rate, so the step pays `max(t − window, 0) + share · min(t, window)`
    /// (`share` = the kernel's SMs over the GPU's, `ep_overlap_sm_share`). Only the `paired`
    /// share of the calls has a partner to hide behind (the schedule's steady phase); the
    /// rest run alone, all exposed.
    Shared {
        window: f64,
        share: f64,
        paired: f64,
    },
    /// Behind `window` seconds of compute confined to the SMs the communication kernels do not
    /// hold for the whole phase (a static partition): the compute takes `window / (1 − share)`
    /// and the phase lasts the longer of that and `t`, so the step pays
    /// `max(t, window / (1 − share)) − window` — or `t`, running the phase unpartitioned,
    /// where a transfer shorter than `window · share / (1 − share)` makes the partition cost
    /// more than it hides (overlap is never slower than none). `paired` as for `Shared`.
    Partitioned {
        window: f64,
        share: f64,
        paired: f64,
    },
}

impl Hide {
    /// The exposed part of `t` seconds when recompute runs the transfer again, `exposed` of
    /// them exposed in the forward: the same, except what EP overlap hid, which is exposed —
    /// the recomputed forward runs inside its own micro-batch's backward, not paired with
    /// another pass (Megatron-Core refuses EP overlap with full recompute and with `moe`
    /// recomputed, frameworks.md §1.6: this prices the plans `--framework any` lets through
    /// without crediting them a link the paired passes already fill).
    #[inline]
    pub(super) fn recomputed(self, t: f64, exposed: f64) -> f64 {
        if self.paired() {
            t
        } else {
            exposed
        }
    }

    /// EP overlap's hiding: behind the paired micro-batch's other pass ([`Hide::Shared`],
    /// [`Hide::Partitioned`]), not the transfer's own.
    #[inline]
    pub(super) fn paired(self) -> bool {
        matches!(self, Hide::Shared { .. } | Hide::Partitioned { .. })
    }

    /// The exposed part of `t` seconds.
    #[inline]
    pub(super) fn exposed(self, t: f64) -> f64 {
        match self {
            Hide::Nothing => t,
            Hide::Behind(w) => (t - w).max(0.0),
            Hide::Tiled { tp, window } => t / tp + (tp - 1.0) / tp * (t - window).max(0.0),
            Hide::Shared {
                window,
                share,
                paired,
            } => {
                let hidden = (t - window).max(0.0) + share * t.min(window);
                paired * hidden + (1.0 - paired) * t
            }
            Hide::Partitioned {
                window,
                share,
                paired,
            } => {
                let phase = t.max(window / (1.0 - share).max(f64::MIN_POSITIVE));
                paired * (phase - window).min(t) + (1.0 - paired) * t
            }
        }
    }
}

/// One collective of the inventory, as booked: `calls` calls of `op` moving `bytes` each on
/// `group`, in `pass`, hidden per `hide`.
#[derive(Debug, Clone, Copy)]
pub(super) struct Comm {
    pub(super) kind: CommKind,
    pub(super) what: &'static str,
    pub(super) pass: Pass,
    pub(super) op: Collective,
    pub(super) group: GroupPlacement,
    pub(super) bytes: f64,
    pub(super) calls: f64,
    pub(super) hide: Hide,
}

impl Comm {
    /// One call, nothing hidden (set `calls` and `hide` with the builders).
    #[inline]
    pub(super) fn new(
        kind: CommKind,
        what: &'static str,
        pass: Pass,
        op: Collective,
        group: GroupPlacement,
        bytes: f64,
    ) -> Comm {
        Comm {
            kind,
            what,
            pass,
            op,
            group,
            bytes,
            calls: 1.0,
            hide: Hide::Nothing,
        }
    }

    #[inline]
    pub(super) fn calls(self, calls: f64) -> Comm {
        Comm { calls, ..self }
    }

    #[inline]
    pub(super) fn hide(self, hide: Hide) -> Comm {
        Comm { hide, ..self }
    }

    /// The table row of this collective: `calls` calls per step of `time_per_call` seconds
    /// by `algorithm`, `exposed` seconds per step on the critical path.
    pub(super) fn row(
        &self,
        layer: Option<LayerKind>,
        algorithm: Algorithm,
        protocol: Protocol,
        time_per_call: f64,
        exposed: f64,
    ) -> CommRow {
        CommRow {
            layer,
            what: self.what,
            kind: self.kind,
            pass: self.pass,
            collective: self.op,
            algorithm,
            protocol,
            group: self.group.into(),
            bytes: self.bytes,
            calls_per_step: self.calls,
            time_per_call,
            time: self.calls * time_per_call,
            exposed,
        }
    }
}

/// What an emitter has booked: the exposed seconds per kind, the part of them that recompute
/// runs again, and the scale-out network seconds beside each pass.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Booked {
    pub(super) exposed: [f64; 5],
    /// Exposed forward communication per kind that recompute runs again.
    pub(super) rc: [f64; 5],
    /// Seconds per micro-batch that collectives crossing the scale-out network (groups over
    /// more than one node) run beside the compute of the forward (0) and backward (1) pass:
    /// the network time a DP reduction hidden in the same pass cannot have (`dp.rs`).
    pub(super) net: [f64; 2],
}

impl Booked {
    /// `c`, `t` seconds of which `exposed` are exposed (`repeat`: recompute runs it again).
    #[inline]
    fn add(&mut self, c: &Comm, t: f64, exposed: f64, repeat: bool) {
        let k = c.kind.index();
        self.exposed[k] += exposed;
        if !c.group.intra_node() {
            // The part that runs beside compute (for the SM-sharing forms, less the compute's
            // slowdown, which `exposed` books: an undercount of the network's busy time).
            let beside = (t - exposed).max(0.0);
            // EP overlap's paired hiding (`Hide::Shared`, `Hide::Partitioned`) runs a pass's
            // transfers beside the other micro-batch's other pass (Megatron-Core's combined
            // 1F1B runs micro-batch i+1's forward with i's backward "so that EP all-to-all
            // hides behind compute", `combined_1f1b.py` @ core_v0.14.0 L34-63, frameworks.md
            // §1.2; DualPipe pairs chunks alike): a forward's all-to-alls fill the link while a
            // backward computes, and the backward's DP reduce-scatter finds it so (`dp.rs`).
            match (c.pass, c.hide.paired()) {
                (Pass::Forward, false) | (Pass::Backward, true) => self.net[0] += beside,
                (Pass::Backward, false) | (Pass::Forward, true) => self.net[1] += beside,
                (Pass::Recompute | Pass::Step, _) => {}
            }
        }
        if repeat {
            self.rc[k] += c.hide.recomputed(t, exposed);
        }
    }
}

/// Emits collectives of one class: costs them, accumulates exposed time per kind, and pushes
/// table rows when the sink wants them.
pub(super) struct Emitter<'a, S: Sink> {
    ev: &'a Evaluator,
    x: &'a Ctx,
    sink: &'a mut S,
    memo: &'a mut Memo,
    layer: LayerKind,
    mult: f64,
    /// Calls per step of the forward recomputation (the recomputed blocks).
    rc_mult: f64,
    pub(super) booked: Booked,
    /// With `Some`, each transfer hidden by an SM-sharing form of EP overlap
    /// ([`Hide::Shared`], [`Hide::Partitioned`]) is also booked unhidden (`[0]`, as at
    /// paired share 0) and under the other form with the same window, share and paired share
    /// (`[1]`); the others alike in all three. The floor prices the EP part's hidings in one
    /// pass so (`floor_parts.rs`).
    pub(super) other_forms: Option<[Booked; 2]>,
    /// The kinds (bits of `CommKind::index`) whose forward collectives recompute repeats.
    rc_kinds: u8,
    /// The paired share EP overlap's hiding takes instead of the schedule's
    /// (`ep_overlap::paired_share`): the floor prices the EP part at 0 and at 1
    /// (`floor_parts.rs`).
    pub(super) ep_paired: Option<f64>,
}

impl<'a, S: Sink> Emitter<'a, S> {
    /// An emitter for class `layer` whose rows are listed `mult` times per step (`rc_mult`
    /// times more for the forward collectives of kinds `rc_kinds` that recompute repeats).
    #[allow(clippy::too_many_arguments)]
    #[inline]
    pub(super) fn new(
        ev: &'a Evaluator,
        x: &'a Ctx,
        sink: &'a mut S,
        memo: &'a mut Memo,
        layer: LayerKind,
        mult: f64,
        rc_mult: f64,
        rc_kinds: u8,
    ) -> Self {
        Emitter {
            ev,
            x,
            sink,
            memo,
            layer,
            mult,
            rc_mult,
            booked: Booked::default(),
            other_forms: None,
            rc_kinds,
            ep_paired: None,
        }
    }

    /// Clears the per-kind sums (the floor prices one knob value after another).
    #[inline]
    pub(super) fn reset(&mut self) {
        self.booked = Booked::default();
        if let Some(o) = &mut self.other_forms {
            *o = [Booked::default(); 2];
        }
    }

    /// Prices `c` (once per distinct shape in the plan) and books it; nothing on a one-rank
    /// group or with no bytes.
    #[inline]
    pub(super) fn emit(&mut self, c: Comm) {
        self.emit_with(c, 0.0);
    }

    /// [`Emitter::emit`] with `local` seconds per call of work on the transferred rows priced
    /// with the call (as [`Emitter::emit_a2a_with`]).
    #[inline]
    pub(super) fn emit_with(&mut self, c: Comm, local: f64) {
        if c.group.size <= 1 || c.bytes <= 0.0 {
            return;
        }
        let mut cost = self.memo.get(self.ev, c.op, c.group, c.bytes, self.x.algo);
        cost.time += local;
        self.emit_priced(c, cost);
    }

    /// One unequal EP all-to-all (`max` bytes on the busiest rank, `c.bytes` on average),
    /// priced once per distinct shape within the plan.
    #[inline]
    pub(super) fn emit_a2a(&mut self, c: Comm, max: f64) {
        self.emit_a2a_with(c, max, 0.0);
    }

    /// [`Emitter::emit_a2a`] with `local` seconds per call of the dispatcher's own copy of the
    /// transferred rows in the same step of the layer (the `alltoall` dispatcher's sort by
    /// local expert), listed and hidden with the call.
    #[inline]
    pub(super) fn emit_a2a_with(&mut self, c: Comm, max: f64, local: f64) {
        if c.group.size <= 1 || c.bytes <= 0.0 {
            return;
        }
        let mut cost = self
            .memo
            .alltoall_unequal(self.ev, c.group, max, c.bytes, self.x.algo);
        cost.time += local;
        self.emit_priced(c, cost);
    }

    /// Books `c.calls` calls of the already-priced `cost`: its exposed part under `c.hide`
    /// goes to the kind's sum and is listed; a forward collective that recompute runs again
    /// (`rc_kinds`) is booked in `rc` too and listed as a recompute row.
    #[inline]
    pub(super) fn emit_priced(&mut self, c: Comm, cost: CollectiveCost) {
        let t = c.calls * cost.time;
        let exposed = c.hide.exposed(t);
        let k = c.kind.index();
        let repeat = c.pass == Pass::Forward && self.rc_kinds >> k & 1 == 1;
        self.booked.add(&c, t, exposed, repeat);
        if let Some([bare, other]) = &mut self.other_forms {
            let (b, o) = match c.hide {
                Hide::Shared {
                    window,
                    share,
                    paired,
                } => (
                    t,
                    Hide::Partitioned {
                        window,
                        share,
                        paired,
                    },
                ),
                Hide::Partitioned {
                    window,
                    share,
                    paired,
                } => (
                    t,
                    Hide::Shared {
                        window,
                        share,
                        paired,
                    },
                ),
                h => (exposed, h),
            };
            bare.add(&c, t, b, repeat);
            other.add(&c, t, o.exposed(t), repeat);
        }
        if S::ENABLED {
            // The table row of `pass` done `mult` times per step.
            let layer = Some(self.layer);
            let row = |pass, mult: f64| {
                let e = if pass == Pass::Recompute {
                    c.hide.recomputed(t, exposed)
                } else {
                    exposed
                };
                let c = Comm {
                    pass,
                    calls: c.calls * mult,
                    ..c
                };
                c.row(layer, cost.algorithm, cost.protocol, cost.time, e * mult)
            };
            if self.mult > 0.0 {
                self.sink.push(row(c.pass, self.mult));
            }
            if repeat && self.rc_mult > 0.0 {
                self.sink.push(row(Pass::Recompute, self.rc_mult));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Hide;

    #[test]
    fn overlap_never_exposes_more_than_the_transfer_nor_less_than_its_excess() {
        for &t in &[0.0, 1e-4, 1e-3, 5e-3, 2e-2] {
            for &w in &[0.0, 5e-4, 3e-3, 1e-2] {
                for &share in &[0.0, 20.0 / 132.0, 0.5] {
                    for h in [
                        Hide::Shared {
                            window: w,
                            share,
                            paired: 1.0,
                        },
                        Hide::Partitioned {
                            window: w,
                            share,
                            paired: 0.8,
                        },
                    ] {
                        let e = h.exposed(t);
                        assert!(e <= t + 1e-15, "{h:?} {t}: {e}");
                        assert!(e >= (t - w).max(0.0) - 1e-15, "{h:?} {t}: {e}");
                    }
                    // No SMs taken: both are `Behind`.
                    let behind = Hide::Behind(w).exposed(t);
                    let shared = Hide::Shared {
                        window: w,
                        share: 0.0,
                        paired: 1.0,
                    }
                    .exposed(t);
                    assert!((behind - shared).abs() < 1e-15);
                }
            }
        }
    }

    #[test]
    fn more_sms_for_communication_cost_the_compute_more() {
        let (t, w) = (4e-3, 6e-3);
        let at = |share, paired| {
            Hide::Shared {
                window: w,
                share,
                paired,
            }
            .exposed(t)
        };
        assert!(at(0.3, 1.0) > at(0.15, 1.0) && at(0.15, 1.0) > at(0.0, 1.0));
        let part = |share| {
            Hide::Partitioned {
                window: w,
                share,
                paired: 1.0,
            }
            .exposed(t)
        };
        assert!(part(0.3) >= part(0.15) && part(0.15) >= part(0.0));
        // A static partition over the whole window costs at least the shared one.
        assert!(part(0.15) >= at(0.15, 1.0));
        // Fewer paired calls (a longer warm-up and cool-down) hide less.
        assert!(at(0.15, 0.5) > at(0.15, 0.9) && at(0.15, 0.0) == t);
    }
}
