//! Random plans for the export tests: every knob drawn from values autoplan prices, valid or
//! not (the tests keep those `Plan::check` and the framework accept).
#![allow(dead_code)]

use autoplan::plan::offload_activations::ALL as ALL_LAYERS;
use autoplan::plan::{
    CpComm, Dim, Dispatcher, PipelineSplit, Plan, RankOrder, Recompute, RecomputeModules, Schedule,
    Zero,
};

/// A deterministic stream of numbers (SplitMix64).
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[(self.next() % xs.len() as u64) as usize]
    }
}

/// A random plan: every knob drawn from values autoplan prices (valid or not).
pub fn random_plan(r: &mut Rng) -> Plan {
    let schedule = r.pick(&[
        Schedule::OneF1B,
        Schedule::OneF1B,
        Schedule::Interleaved,
        Schedule::ZeroBubble,
        Schedule::DualPipe,
    ]);
    let vpp = if schedule == Schedule::Interleaved {
        r.pick(&[2, 3, 4])
    } else {
        1
    };
    let recompute = r.pick(&[Recompute::None, Recompute::Selective, Recompute::Full]);
    let stage = r.pick(&[0u8, 1, 2, 3, 3]);
    let mut zero = Zero::stage(stage);
    if stage == 3 && r.next().is_multiple_of(3) {
        zero = Zero::NORESHARD;
    }
    if stage >= 1 && r.next().is_multiple_of(4) {
        zero = zero.hsdp(r.pick(&[2, 4, 8]));
    }
    let uneven = r.next().is_multiple_of(4);
    Plan {
        tp: r.pick(&[1, 1, 2, 4, 8]),
        sp: !r.next().is_multiple_of(3),
        cp: r.pick(&[1, 1, 1, 2, 4]),
        cp_comm: r.pick(&[
            CpComm::Ring,
            CpComm::AllToAll,
            CpComm::AllGather,
            CpComm::Hierarchical { a2a: 2 },
        ]),
        dp: r.pick(&[1, 2, 4, 8, 16]),
        zero,
        pp: r.pick(&[1, 1, 2, 4, 8]),
        schedule,
        vpp,
        first_stage_layers: uneven.then(|| r.pick(&[1, 2, 3, 5])),
        last_stage_layers: uneven.then(|| r.pick(&[1, 2, 3, 5])),
        pipeline_split: r.pick(&[
            PipelineSplit::Blocks,
            PipelineSplit::Blocks,
            PipelineSplit::EmbeddingLoss,
            PipelineSplit::Embedding,
        ]),
        ep: r.pick(&[1, 2, 4, 8]),
        moe_tp: r.pick(&[1, 1, 2]),
        mbs: r.pick(&[1, 2, 4]),
        recompute,
        recompute_modules: RecomputeModules(r.pick(&[1u8, 1, 3, 9, 33, 17])),
        recompute_layers: (recompute == Recompute::Full && r.next().is_multiple_of(4)).then_some(1),
        dispatcher: r.pick(&[
            Dispatcher::AllToAll,
            Dispatcher::AllGather,
            Dispatcher::DeepEp,
        ]),
        order: r.pick(&[
            RankOrder::default(),
            RankOrder([Dim::Tp, Dim::Cp, Dim::Pp, Dim::Dp]),
            RankOrder([Dim::Tp, Dim::Dp, Dim::Cp, Dim::Pp]),
        ]),
        tp_overlap: r.next().is_multiple_of(2),
        ep_overlap: r.next().is_multiple_of(2),
        // Optimizer offload (percent in host memory): none half the time, else a fraction or
        // all of it.
        offload_optimizer: r.pick(&[0u8, 0, 0, 25, 50, 100]),
        // Parameter offload: valid with zero=3 and offload_optimizer=1 only.
        offload_params: r.next().is_multiple_of(6),
        // Activation offload (layers per stage): none most of the time, else a count or all
        // (Megatron-Core runs counts without PP and recompute, DeepSpeed `all` with full
        // recompute).
        offload_activations: if r.next().is_multiple_of(5) {
            r.pick(&[1u32, 3, ALL_LAYERS])
        } else {
            0
        },
        ..Plan::default()
    }
}
