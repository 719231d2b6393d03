use autoplan_cluster::Cluster;
use autoplan_evaluate::validate::{case_of, cluster_name_for, score, PublishedRun};
use autoplan_evaluate::AttentionKernel;
use autoplan_plan::{Recompute, Zero};

fn rows(file: &str) -> Vec<PublishedRun> {
    let path = format!("{}/../../data/{file}", env!("CARGO_MANIFEST_DIR"));
    let mut rdr = csv::Reader::from_path(&path).expect(file);
    rdr.deserialize().filter_map(Result::ok).collect()
}
fn cluster_for(gpu: &str, n: u32, _gpn: u32) -> Option<Cluster> {
    autoplan_cluster::resolve_cluster(cluster_name_for(gpu)?).ok()?.with_gpus(n).ok()
}
#[test]
fn scratch() {
    let mut all = rows("published_runs.csv");
    all.extend(rows("published_runs_2.csv"));
    for r in &all {
        let Ok(c) = case_of(r, &|n| autoplan_graph::resolve_model(n).ok(), &cluster_for) else { continue };
        let e = |c: &autoplan_evaluate::validate::Case| score(c).map(|x| format!("{:+.1}", 100.0*x.error)).unwrap_or_else(|e| format!("{e}").chars().take(12).collect());
        let mut a = c.clone(); a.options.dp_overlap = false;
        let mut b = c.clone(); b.plan.tp_overlap = false;
        let mut d = c.clone(); d.options.attention = AttentionKernel::Unfused;
        let mut f = c.clone(); f.plan.recompute = Recompute::Full;
        let mut g = c.clone(); g.plan.tp_overlap=false; g.options.dp_overlap=false; g.options.attention = AttentionKernel::Unfused;
        let mut h = g.clone(); h.plan.zero = Zero::NONE;
        let mut i = g.clone(); i.plan.recompute = Recompute::Full;
        println!("{:50} base {:>7} nodp {:>7} notp {:>7} unf {:>7} full {:>7} legacy {:>7} legacy0 {:>7} legacyfull {:>7}  {}", r.id, e(&c), e(&a), e(&b), e(&d), e(&f), e(&g), e(&h), e(&i), c.plan.zero);
    }
}
