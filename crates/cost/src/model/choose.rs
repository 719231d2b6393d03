//! Picking the algorithm: the cheapest allowed one (unrolled per collective, the hot path),
//! every valid one, the seed's rule, and the algorithms NCCL itself implements.

use autoplan_cluster::{CollectiveLibrary, GroupPlacement, IntraFabric, NetTopology};

use super::{
    algorithms_of, library_algorithms, Alternatives, CostModel, Shape, Terms, MAX_ALGORITHMS,
};
use crate::{AlgoMode, Algorithm, Collective, CollectiveCost, Protocol};

/// Every algorithm of the seeds' menu for `op`, in [`algorithms_of`] order, each passed with
/// its terms to the local macro `$consider` (one list for [`CostModel::cheapest`] and
/// [`CostModel::visit`]; unrolled so each formula inlines with its algorithm known).
macro_rules! each_algorithm {
    ($self:ident, $op:ident, $s:ident, $sz:ident, $mean:ident, $consider:ident) => {
        match $op {
            Collective::AllReduce => {
                $consider!(Ring, $self.allreduce(Ring, $s, $sz));
                $consider!(Direct, $self.allreduce(Direct, $s, $sz));
                $consider!(Tree, $self.allreduce(Tree, $s, $sz));
                $consider!(DoubleBinaryTree, $self.allreduce(DoubleBinaryTree, $s, $sz));
                $consider!(HalvingDoubling, $self.allreduce(HalvingDoubling, $s, $sz));
                $consider!(Hierarchical, $self.allreduce(Hierarchical, $s, $sz));
                $consider!(InSwitch, $self.allreduce(InSwitch, $s, $sz));
            }
            Collective::AllGather | Collective::ReduceScatter => {
                $consider!(Ring, $self.allgather(Ring, $s, $sz));
                $consider!(Direct, $self.allgather(Direct, $s, $sz));
                $consider!(HalvingDoubling, $self.allgather(HalvingDoubling, $s, $sz));
                $consider!(Hierarchical, $self.allgather(Hierarchical, $s, $sz));
                $consider!(InSwitch, $self.allgather(InSwitch, $s, $sz));
            }
            Collective::AllToAll => {
                $consider!(Direct, $self.alltoall(Direct, $s, $sz, $mean));
                $consider!(Ring, $self.alltoall(Ring, $s, $sz, $mean));
                $consider!(Bruck, $self.alltoall(Bruck, $s, $sz, $mean));
                $consider!(Hierarchical, $self.alltoall(Hierarchical, $s, $sz, $mean));
            }
            Collective::Broadcast | Collective::Reduce => {
                $consider!(Ring, $self.broadcast(Ring, $s, $sz));
                $consider!(Tree, $self.broadcast(Tree, $s, $sz));
            }
            Collective::Scatter | Collective::Gather => {
                $consider!(Ring, $self.scatter(Ring, $s, $sz));
                $consider!(Tree, $self.scatter(Tree, $s, $sz));
                $consider!(Direct, $self.scatter(Direct, $s, $sz));
            }
            Collective::SendRecv => $consider!(PointToPoint, $self.sendrecv(PointToPoint, $s, $sz)),
            Collective::Barrier => {
                $consider!(Tree, $self.barrier(Tree, $s));
                $consider!(Direct, $self.barrier(Direct, $s));
            }
        }
    };
}

impl CostModel {
    pub(super) fn alternatives_unequal(
        &self,
        op: Collective,
        group: GroupPlacement,
        smax: f64,
        smean: f64,
        extra: f64,
    ) -> Alternatives {
        let s = Shape::of(group);
        let mut out = Alternatives {
            items: [CollectiveCost::ZERO; MAX_ALGORITHMS],
            len: 0,
        };
        if s.n <= 1 {
            for &a in library_algorithms(op, self.library) {
                out.items[out.len] = CollectiveCost {
                    algorithm: a,
                    protocol: Protocol::LowLatency,
                    time: 0.0,
                };
                out.len += 1;
            }
            return out;
        }
        let push = |mut c: CollectiveCost| {
            c.time += extra;
            out.items[out.len] = c;
            out.len += 1;
        };
        match self.library {
            CollectiveLibrary::Nccl => self.nccl_visit(op, s, smax, smean, |_| true, push),
            CollectiveLibrary::Any => self.visit(op, s, smax, smean, |_| true, push),
        }
        out
    }

    #[inline]
    pub(super) fn choose(
        &self,
        op: Collective,
        group: GroupPlacement,
        smax: f64,
        smean: f64,
        mode: AlgoMode,
    ) -> CollectiveCost {
        let s = Shape::of(group);
        if s.n <= 1 {
            let first = match mode {
                AlgoMode::Cheapest => library_algorithms(op, self.library)[0],
                AlgoMode::NcclTuner => library_algorithms(op, CollectiveLibrary::Nccl)[0],
                _ => algorithms_of(op)[0],
            };
            return CollectiveCost {
                algorithm: first,
                protocol: Protocol::LowLatency,
                time: 0.0,
            };
        }
        // docs/cost-model.md "Collective library": `cheapest` picks within the cluster's
        // library; `nccl-tuner` within NCCL's whatever the library; `any` and the seed rule
        // over the seeds' full menu; a fixed algorithm is priced by the library that has it.
        use CollectiveLibrary::{Any, Nccl};
        match mode {
            AlgoMode::Cheapest => self.cheapest_in(self.library, op, s, smax, smean, |_| true),
            AlgoMode::Any => self.cheapest(op, s, smax, smean, |_| true),
            AlgoMode::Fixed(a) => {
                let lib = if self.nccl_has(op, a) { Nccl } else { Any };
                self.only(lib, op, a, s, smax, smean)
            }
            AlgoMode::NcclLike => self.only(Any, op, self.seed_rule(op, s), s, smax, smean),
            AlgoMode::NcclTuner => self.nccl_cheapest(op, s, smax, smean, |_| true),
        }
    }

    /// `a` where `lib` has it and it is valid, otherwise `lib`'s cheapest valid algorithm.
    #[inline]
    pub(super) fn only(
        &self,
        lib: CollectiveLibrary,
        op: Collective,
        a: Algorithm,
        s: Shape,
        smax: f64,
        smean: f64,
    ) -> CollectiveCost {
        let c = self.cheapest_in(lib, op, s, smax, smean, |x| x == a);
        if c.algorithm == a && c.time < f64::INFINITY {
            c
        } else {
            self.cheapest_in(lib, op, s, smax, smean, |_| true)
        }
    }

    /// The cheapest allowed algorithm of `lib`.
    #[inline]
    pub(super) fn cheapest_in(
        &self,
        lib: CollectiveLibrary,
        op: Collective,
        s: Shape,
        smax: f64,
        smean: f64,
        allowed: impl Fn(Algorithm) -> bool,
    ) -> CollectiveCost {
        match lib {
            CollectiveLibrary::Nccl => self.nccl_cheapest(op, s, smax, smean, allowed),
            CollectiveLibrary::Any => self.cheapest(op, s, smax, smean, allowed),
        }
    }

    /// The cheapest allowed algorithm. Unrolled per collective so that each formula is
    /// inlined with its algorithm known and shared subexpressions are computed once (this is
    /// the search's hot path: `cargo bench --bench cost`). Same list and order as
    /// [`CostModel::visit`] (a property test checks they agree); a shared closure-based
    /// version measured 40% slower.
    #[inline]
    pub(super) fn cheapest(
        &self,
        op: Collective,
        s: Shape,
        smax: f64,
        smean: f64,
        allowed: impl Fn(Algorithm) -> bool,
    ) -> CollectiveCost {
        use Algorithm::*;
        let mut best = CollectiveCost {
            algorithm: algorithms_of(op)[0],
            protocol: Protocol::Simple,
            time: f64::INFINITY,
        };
        let sz = smax.max(0.0);
        let mean = smean.max(0.0);
        macro_rules! consider {
            ($a:expr, $terms:expr) => {
                if allowed($a) {
                    if let Some(t) = $terms {
                        let (time, protocol) = self.finish(t);
                        if time < best.time {
                            best = CollectiveCost {
                                algorithm: $a,
                                protocol,
                                time,
                            };
                        }
                    }
                }
            };
        }
        // Same order as `algorithms_of` (ties keep the earlier one).
        each_algorithm!(self, op, s, sz, mean, consider);
        best
    }

    /// Calls `f` with every valid allowed algorithm's cost, in [`algorithms_of`] order
    /// (unrolled like [`CostModel::cheapest`]).
    #[inline(always)]
    pub(super) fn visit(
        &self,
        op: Collective,
        s: Shape,
        smax: f64,
        smean: f64,
        allowed: impl Fn(Algorithm) -> bool,
        mut f: impl FnMut(CollectiveCost),
    ) {
        use Algorithm::*;
        let sz = smax.max(0.0);
        let mean = smean.max(0.0);
        macro_rules! consider {
            ($a:expr, $terms:expr) => {
                if allowed($a) {
                    if let Some(t) = $terms {
                        let (time, protocol) = self.finish(t);
                        f(CollectiveCost {
                            algorithm: $a,
                            protocol,
                            time,
                        });
                    }
                }
            };
        }
        each_algorithm!(self, op, s, sz, mean, consider);
    }

    /// Seed 000 §6.6 "选择建议" (AllReduce) and §6.7 "NCCL 的实际选择" (All-to-All); the seed
    /// gives no rule for the other collectives, so they take what NCCL uses: ring (seed §7.2
    /// recommends ring for AllGather/ReduceScatter), tree for Barrier, point-to-point for SendRecv.
    pub(super) fn seed_rule(&self, op: Collective, s: Shape) -> Algorithm {
        use Algorithm::*;
        let full_mesh =
            !s.multi() && matches!(self.fabric, IntraFabric::Nvswitch | IntraFabric::FullMesh);
        match op {
            Collective::AllReduce => {
                if s.n <= 8 {
                    if full_mesh {
                        Direct
                    } else {
                        Ring
                    }
                } else if s.n <= 32 {
                    if self.topology == NetTopology::FatTree && s.n.is_power_of_two() {
                        HalvingDoubling
                    } else {
                        Ring
                    }
                } else if s.multi() {
                    DoubleBinaryTree
                } else {
                    Ring
                }
            }
            Collective::AllToAll => {
                // "异构网络：拓扑感知算法（NVLink 内用 Pairwise，跨节点用 Ring）" first, then by size.
                if s.multi() && s.r > 1 {
                    Hierarchical
                } else if s.n <= 8 {
                    Direct
                } else if s.n <= 32 {
                    Bruck
                } else {
                    Ring
                }
            }
            Collective::SendRecv => PointToPoint,
            Collective::Barrier => Tree,
            _ => Ring,
        }
    }

    #[inline]
    pub(super) fn eval(
        &self,
        op: Collective,
        a: Algorithm,
        s: Shape,
        smax: f64,
        smean: f64,
    ) -> Option<CollectiveCost> {
        if s.n <= 1 {
            return if algorithms_of(op).contains(&a)
                || library_algorithms(op, self.library).contains(&a)
            {
                Some(CollectiveCost {
                    algorithm: a,
                    protocol: Protocol::LowLatency,
                    time: 0.0,
                })
            } else {
                None
            };
        }
        let (time, protocol) = if self.nccl_has(op, a) {
            let (t, p) = self.nccl_terms(op, a, s, smax.max(0.0), smean.max(0.0))?;
            self.finish_nccl(t, p)
        } else {
            self.finish(self.terms_of(op, a, s, smax, smean)?)
        };
        Some(CollectiveCost {
            algorithm: a,
            protocol,
            time,
        })
    }

    pub(super) fn terms_of(
        &self,
        op: Collective,
        a: Algorithm,
        s: Shape,
        smax: f64,
        smean: f64,
    ) -> Option<Terms> {
        let bytes = smax.max(0.0);
        match op {
            Collective::AllReduce => self.allreduce(a, s, bytes),
            Collective::AllGather | Collective::ReduceScatter => self.allgather(a, s, bytes),
            Collective::AllToAll => self.alltoall(a, s, bytes, smean.max(0.0)),
            Collective::Broadcast | Collective::Reduce => self.broadcast(a, s, bytes),
            Collective::Scatter | Collective::Gather => self.scatter(a, s, bytes),
            Collective::SendRecv => self.sendrecv(a, s, bytes),
            Collective::Barrier => self.barrier(a, s),
        }
    }
}
