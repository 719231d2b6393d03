//! What a plan assumed of NCCL, in NCCL's own configuration formats: the example tuner
//! plugin's CSV (`NCCL_TUNER_CONFIG_FILE`) and NCCL ≥ 2.24's per-function `NCCL_ALGO` /
//! `NCCL_PROTO` (frameworks.md §4.2, §4.3).

use crate::{Algorithm, Collective, Protocol};

/// The example tuner's `collective_type` (frameworks.md §4.3: exact lower case; an unknown
/// value silently becomes `allreduce`, so only these are written). `None`: not in NCCL's
/// tuning model (all-to-all, scatter, gather and send/recv run as point-to-point).
pub fn tuner_collective(op: Collective) -> Option<&'static str> {
    Some(match op {
        Collective::Broadcast => "broadcast",
        Collective::Reduce => "reduce",
        Collective::AllGather => "allgather",
        Collective::ReduceScatter => "reducescatter",
        Collective::AllReduce => "allreduce",
        _ => return None,
    })
}

/// The example tuner's `algorithm` spelling (frameworks.md §4.3, plugin.c L81-90).
pub fn tuner_algorithm(a: Algorithm) -> Option<&'static str> {
    Some(match a {
        Algorithm::Ring => "ring",
        Algorithm::DoubleBinaryTree => "tree",
        Algorithm::InSwitch => "nvls",
        Algorithm::NvlsTree => "nvls_tree",
        Algorithm::CollNetDirect => "collnet_direct",
        Algorithm::CollNetChain => "collnet_chain",
        Algorithm::Pat => "pat",
        _ => return None,
    })
}

/// `NCCL_ALGO`'s spelling of an algorithm (frameworks.md §4.1, init.cc L52-55).
pub fn env_algorithm(a: Algorithm) -> Option<&'static str> {
    Some(match a {
        Algorithm::Ring => "ring",
        Algorithm::DoubleBinaryTree => "tree",
        Algorithm::InSwitch => "nvls",
        Algorithm::NvlsTree => "nvlstree",
        Algorithm::CollNetDirect => "collnetdirect",
        Algorithm::CollNetChain => "collnetchain",
        Algorithm::Pat => "pat",
        _ => return None,
    })
}

/// One line of the example tuner's CSV: `collective_type,min_bytes,max_bytes,algorithm,
/// protocol,channels,nNodes,nRanks,numPipeOps,regBuff` (frameworks.md §4.3). `-1` = any.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TunerLine {
    pub collective: Collective,
    pub min_bytes: u64,
    pub max_bytes: u64,
    pub algorithm: Algorithm,
    pub protocol: Protocol,
    pub channels: i64,
    pub nodes: i64,
    pub ranks: i64,
    pub pipe_ops: i64,
    pub reg_buff: i64,
}

impl TunerLine {
    /// Whether NCCL's example plugin would match this line for a call.
    pub fn matches(&self, op: Collective, bytes: u64, nodes: u32, ranks: u32) -> bool {
        let any = |v: i64, x: u32| v == -1 || v == i64::from(x);
        self.collective == op
            && (self.min_bytes..=self.max_bytes).contains(&bytes)
            && any(self.nodes, nodes)
            && any(self.ranks, ranks)
    }
}

impl std::fmt::Display for TunerLine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{},{},{},{},{},{},{},{},{},{}",
            tuner_collective(self.collective).unwrap_or("?"),
            self.min_bytes,
            self.max_bytes,
            tuner_algorithm(self.algorithm).unwrap_or("?"),
            self.protocol.name(),
            self.channels,
            self.nodes,
            self.ranks,
            self.pipe_ops,
            self.reg_buff
        )
    }
}

/// The largest size the example's own documentation writes for "every size" (frameworks.md
/// §4.3: `0` and `4294967295` cover everything); a bigger call keeps its own upper bound.
pub const ALL_SIZES_MAX: u64 = 4_294_967_295;

/// One collective call a plan issues, as the evaluator booked it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Booked {
    pub collective: Collective,
    /// nccl-tests / NCCL `nBytes` convention (collectives.md §1).
    pub bytes: f64,
    pub nodes: u32,
    pub ranks: u32,
    pub algorithm: Algorithm,
    pub protocol: Protocol,
}

/// Tuner lines for `calls`: per (collective, nodes, ranks) the calls sorted by size, runs of
/// one (algorithm, protocol) merged into one byte range; ranges meet half-way (geometrically)
/// between runs, the first starts at 0 and the last ends at [`ALL_SIZES_MAX`] or above, so
/// every size of the group's shape gets the choice of its nearest booked call. Calls NCCL's
/// tuner does not see (point-to-point) or with an algorithm NCCL lacks are returned apart.
pub fn tuner_lines(calls: &[Booked]) -> (Vec<TunerLine>, Vec<Booked>) {
    let mut tunable: Vec<Booked> = Vec::new();
    let mut other = Vec::new();
    for c in calls {
        if tuner_collective(c.collective).is_some() && tuner_algorithm(c.algorithm).is_some() {
            tunable.push(*c);
        } else {
            other.push(*c);
        }
    }
    tunable.sort_by(|a, b| {
        (a.collective, a.nodes, a.ranks)
            .cmp(&(b.collective, b.nodes, b.ranks))
            .then(a.bytes.total_cmp(&b.bytes))
    });
    let mut lines: Vec<TunerLine> = Vec::new();
    let mut i = 0;
    while i < tunable.len() {
        let key = (tunable[i].collective, tunable[i].nodes, tunable[i].ranks);
        let mut j = i;
        while j < tunable.len()
            && (tunable[j].collective, tunable[j].nodes, tunable[j].ranks) == key
        {
            j += 1;
        }
        // Runs of one choice within this shape: (first bytes, last bytes, algorithm, protocol).
        let mut runs: Vec<(f64, f64, Algorithm, Protocol)> = Vec::new();
        for c in &tunable[i..j] {
            match runs.last_mut() {
                Some(r) if r.2 == c.algorithm && r.3 == c.protocol => r.1 = c.bytes,
                _ => runs.push((c.bytes, c.bytes, c.algorithm, c.protocol)),
            }
        }
        let mut lo = 0u64;
        for (k, r) in runs.iter().enumerate() {
            let hi = match runs.get(k + 1) {
                // Geometric mean of this run's last and the next run's first size.
                Some(next) => ((r.1.max(1.0) * next.0.max(1.0)).sqrt().floor() as u64)
                    .max(r.1.ceil() as u64)
                    .min((next.0.floor() as u64).saturating_sub(1))
                    .max(lo),
                None => ALL_SIZES_MAX.max(r.1.ceil() as u64),
            };
            lines.push(TunerLine {
                collective: key.0,
                min_bytes: lo,
                max_bytes: hi,
                algorithm: r.2,
                protocol: r.3,
                channels: -1,
                nodes: i64::from(key.1),
                ranks: i64::from(key.2),
                pipe_ops: -1,
                reg_buff: -1,
            });
            lo = hi.saturating_add(1);
        }
        i = j;
    }
    (lines, other)
}

/// NCCL ≥ 2.24's per-function `NCCL_ALGO` and `NCCL_PROTO` values (frameworks.md §4.2, e.g.
/// `allreduce:ring;allgather:ring`), where every line of each function names one algorithm
/// (one protocol); `None` for that variable otherwise.
pub fn per_function_env(lines: &[TunerLine]) -> (Option<String>, Option<String>) {
    let mut algo: Vec<(Collective, Algorithm)> = Vec::new();
    let mut proto: Vec<(Collective, Protocol)> = Vec::new();
    let (mut algo_ok, mut proto_ok) = (true, true);
    for l in lines {
        match algo.iter().find(|(c, _)| *c == l.collective) {
            Some((_, a)) if *a != l.algorithm => algo_ok = false,
            Some(_) => {}
            None => algo.push((l.collective, l.algorithm)),
        }
        match proto.iter().find(|(c, _)| *c == l.collective) {
            Some((_, p)) if *p != l.protocol => proto_ok = false,
            Some(_) => {}
            None => proto.push((l.collective, l.protocol)),
        }
    }
    let join = |v: Vec<String>| (!v.is_empty()).then(|| v.join(";"));
    let a = algo_ok
        .then(|| {
            join(
                algo.iter()
                    .map(|(c, a)| {
                        format!(
                            "{}:{}",
                            tuner_collective(*c).unwrap_or("?"),
                            env_algorithm(*a).unwrap_or("?")
                        )
                    })
                    .collect(),
            )
        })
        .flatten();
    let p = proto_ok
        .then(|| {
            join(
                proto
                    .iter()
                    .map(|(c, p)| format!("{}:{}", tuner_collective(*c).unwrap_or("?"), p.name()))
                    .collect(),
            )
        })
        .flatten();
    (a, p)
}

/// Parse one line of the example tuner's CSV as the plugin reads it (8, 9 or 10 fields,
/// trimmed); unlike the plugin, an unknown collective, algorithm or protocol is an error
/// rather than a silent default.
pub fn parse_tuner_line(line: &str) -> Result<TunerLine, String> {
    let f: Vec<&str> = line
        .split(',')
        .map(|t| t.trim_matches([' ', '\t']))
        .collect();
    if !(8..=10).contains(&f.len()) {
        return Err(format!("{} fields, expected 8 to 10: {line:?}", f.len()));
    }
    let collective = [
        Collective::Broadcast,
        Collective::Reduce,
        Collective::AllGather,
        Collective::ReduceScatter,
        Collective::AllReduce,
    ]
    .into_iter()
    .find(|c| tuner_collective(*c) == Some(f[0]))
    .ok_or_else(|| format!("unknown collective_type {:?}", f[0]))?;
    let algorithm = Algorithm::ALL
        .into_iter()
        .find(|a| tuner_algorithm(*a) == Some(f[3]))
        .ok_or_else(|| format!("unknown algorithm {:?}", f[3]))?;
    let protocol = Protocol::ALL
        .into_iter()
        .find(|p| p.name() == f[4])
        .ok_or_else(|| format!("unknown protocol {:?}", f[4]))?;
    let num = |i: usize, what: &str| -> Result<i64, String> {
        match f.get(i) {
            None => Ok(-1),
            Some(t) => t
                .parse()
                .map_err(|_| format!("{what} {t:?} is not an integer")),
        }
    };
    let bytes = |i: usize, what: &str| -> Result<u64, String> {
        f[i].parse()
            .map_err(|_| format!("{what} {:?} is not a byte count", f[i]))
    };
    Ok(TunerLine {
        collective,
        min_bytes: bytes(1, "min_bytes")?,
        max_bytes: bytes(2, "max_bytes")?,
        algorithm,
        protocol,
        channels: num(5, "channels")?,
        nodes: num(6, "nNodes")?,
        ranks: num(7, "nRanks")?,
        pipe_ops: num(8, "numPipeOps")?,
        reg_buff: num(9, "regBuff")?,
    })
}

/// Parse a tuner config: `#` comments in column 0 and empty lines skipped (frameworks.md
/// §4.3); errors name the line.
pub fn parse_tuner_config(text: &str) -> Result<Vec<TunerLine>, String> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        out.push(parse_tuner_line(line).map_err(|e| format!("line {}: {e}", i + 1))?);
    }
    Ok(out)
}

/// The first line NCCL's example plugin would apply to a call (file order, frameworks.md §4.3).
pub fn lookup(
    lines: &[TunerLine],
    op: Collective,
    bytes: u64,
    nodes: u32,
    ranks: u32,
) -> Option<&TunerLine> {
    lines.iter().find(|l| l.matches(op, bytes, nodes, ranks))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(op: Collective, bytes: f64, a: Algorithm, p: Protocol) -> Booked {
        Booked {
            collective: op,
            bytes,
            nodes: 2,
            ranks: 16,
            algorithm: a,
            protocol: p,
        }
    }

    #[test]
    fn lines_round_trip_and_cover_each_call() {
        let calls = [
            call(
                Collective::AllReduce,
                4096.0,
                Algorithm::Ring,
                Protocol::LowLatency,
            ),
            call(
                Collective::AllReduce,
                8192.0,
                Algorithm::Ring,
                Protocol::LowLatency,
            ),
            call(
                Collective::AllReduce,
                64e6,
                Algorithm::NvlsTree,
                Protocol::Simple,
            ),
            call(Collective::AllGather, 1e6, Algorithm::Ring, Protocol::Ll128),
            call(
                Collective::AllToAll,
                1e6,
                Algorithm::Direct,
                Protocol::Simple,
            ),
        ];
        let (lines, other) = tuner_lines(&calls);
        assert_eq!(other.len(), 1);
        assert_eq!(lines.len(), 3);
        let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
        let back = parse_tuner_config(&text).unwrap();
        assert_eq!(back, lines);
        for c in &calls[..4] {
            let l = lookup(&back, c.collective, c.bytes as u64, c.nodes, c.ranks).unwrap();
            assert_eq!(
                (l.algorithm, l.protocol),
                (c.algorithm, c.protocol),
                "{c:?}"
            );
        }
        let (algo, proto) = per_function_env(&lines);
        assert_eq!(algo, None); // all-reduce uses two algorithms
        assert_eq!(proto, None);
        let last: Vec<TunerLine> = lines
            .iter()
            .filter(|l| l.algorithm != Algorithm::Ring || l.collective != Collective::AllReduce)
            .copied()
            .collect();
        let (algo, proto) = per_function_env(&last);
        assert_eq!(algo.as_deref(), Some("allgather:ring;allreduce:nvlstree"));
        assert_eq!(proto.as_deref(), Some("allgather:ll128;allreduce:simple"));
    }

    #[test]
    fn bad_lines_say_why() {
        assert!(parse_tuner_line("allreduce,0,10,ring,simple,-1,1")
            .unwrap_err()
            .contains("7 fields"));
        assert!(parse_tuner_line("allreduce,0,10,hd,simple,-1,1,8")
            .unwrap_err()
            .contains("algorithm"));
        let l = parse_tuner_line("allgather, 0, 4294967295, pat, simple, 4, 8, 8").unwrap();
        assert_eq!(
            (l.algorithm, l.pipe_ops, l.reg_buff),
            (Algorithm::Pat, -1, -1)
        );
    }
}
