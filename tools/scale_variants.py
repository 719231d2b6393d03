#!/usr/bin/env python3
"""Write to stdout a CSV of the public rows and copies of them at other scales: each row that
gives dp, its GPU count and global batch with dp doubled (`__dpx2`: twice the GPUs and batch)
and halved (`__dpd2`), and with its sequence doubled at half the batch (`__seqx2`: the tokens per
step unchanged). It checks that the held-out rows of the same families at other scales and
sequence lengths are read, priced and fit as the published ones are: compare each copy's
prediction with its original's (a copy's error is not meaningful, it keeps the original's
measurement).

    python3 tools/scale_variants.py > /tmp/scale.csv
    autoplan validate --runs /tmp/scale.csv --format csv
"""

import csv
import os
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
        if seq and batch and batch % 2 == 0:
            copy("seqx2", seq_len=seq * 2, global_batch=batch // 2)
    w = csv.DictWriter(sys.stdout, fieldnames=list(first[0].keys()), lineterminator="\n")
    w.writeheader()
    w.writerows(out)


if __name__ == "__main__":
    main()
