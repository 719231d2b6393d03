#!/usr/bin/env python3
"""Write to stdout a CSV of the public rows and copies of them at other scales: each row that
gives dp, its GPU count and global batch with dp doubled (`__dpx2`: twice the GPUs and batch)
and halved (`__dpd2`), and with its sequence doubled (`__seqx2`: twice the tokens per micro-batch and
step). It checks that the held-out rows of the same families at other scales and
sequence lengths are read, priced and fit as the published ones are: compare each copy's
prediction with its original's (a copy's error is not meaningful, it keeps the original's
measurement).

    python3 tools/scale_variants.py > /tmp/scale.csv
    autoplan validate --runs /tmp/scale.csv --format csv > /tmp/scale_out.csv
    python3 tools/scale_variants.py --compare /tmp/scale_out.csv

`--compare` prints, per kind of copy, the range of the copies' predicted figures over their
originals' (a step time as the rate per token and GPU it implies) where the plan is the original's but for the degrees changed, then each copy whose
plan the model chose otherwise (a recompute the row does not give) and each copy not scored.
"""

import csv
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "data")


def rows(name):
    with open(os.path.join(DATA, name), newline="") as f:
        return list(csv.DictReader(f))


def whole(cell):
    try:
        return int(float(cell))
    except ValueError:
        return None


def main():
    first = rows("published_runs.csv")
    out = []
    for r in first + rows("published_runs_2.csv"):
        out.append(dict(r))
        dp, gpus = whole(r["dp"]), whole(r["num_gpus"])
        batch, seq = whole(r["global_batch"]), whole(r["seq_len"])

        def copy(tag, **cells):
            v = dict(r)
            v["id"] = f"{r['id']}__{tag}"
            v.update({k: str(x) for k, x in cells.items()})
            out.append(v)

        if dp and gpus and batch:
            copy("dpx2", dp=dp * 2, num_gpus=gpus * 2, global_batch=batch * 2)
            if dp % 2 == 0 and batch % 2 == 0:
                copy("dpd2", dp=dp // 2, num_gpus=gpus // 2, global_batch=batch // 2)
        if seq:
            copy("seqx2", seq_len=seq * 2)
    w = csv.DictWriter(sys.stdout, fieldnames=list(first[0].keys()), lineterminator="\n")
    w.writeheader()
    w.writerows(out)


def compare(path):
    with open(path, newline="") as f:
        out = list(csv.DictReader(f))
    scored = {r["id"]: r for r in out if r["status"] == "used"}
    bare = lambda plan: re.sub(r"(dp|cp)=\d+,?", "", plan)
    ratios, chosen, lost = {}, [], []
    for r in out:
        if "__" not in r["id"]:
            continue
        base, kind = r["id"].rsplit("__", 1)
        if base not in scored:
            continue
        if r["status"] != "used":
            lost.append(f"{r['id']}: {r['status']}, {r['note'][:100]}")
            continue
        ratio = float(r["predicted"]) / float(scored[base]["predicted"])
        if r["figure"].startswith("step time"):
            # A rate per token and GPU: a doubled sequence is twice the tokens a step.
            ratio = (2.0 if kind == "seqx2" else 1.0) / ratio
        if bare(r["plan"]) == bare(scored[base]["plan"]):
            ratios.setdefault(kind, []).append((ratio, r["id"]))
        else:
            chosen.append(f"{r['id']}: {ratio:.3f} ({r['plan']})")
    for kind, xs in sorted(ratios.items()):
        xs.sort()
        print(f"{kind}: {len(xs)} copies, prediction / original's {xs[0][0]:.3f} "
              f"({xs[0][1]}) to {xs[-1][0]:.3f} ({xs[-1][1]})")
    print(f"plan chosen otherwise ({len(chosen)}):")
    print("\n".join("  " + c for c in chosen))
    print(f"not scored ({len(lost)}):")
    print("\n".join("  " + c for c in lost))


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--compare":
        compare(sys.argv[2])
    else:
        main()
