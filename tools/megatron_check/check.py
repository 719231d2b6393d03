#!/usr/bin/env python3
"""Feed autoplan's `--emit megatron` exports through Megatron-LM's own argument checks.

Usage: check.py CASES.jsonl

Each line of CASES.jsonl is one exported plan:
  {"name": str, "world_size": int, "gpu": [major, minor], "env": {str: str}, "argv": [str]}
where argv = the model's flags + the exported plan flags + the run's boilerplate (data,
tokenizer, schedule), as the Rust test `tests/megatron_check.rs` writes them.

For each case, in a fresh process (Megatron keeps global state):
  1. megatron.training.arguments.parse_args()   -- the flags parse (unknown flags fail);
  2. validate_args(args)                          -- Megatron's argument checks
     (megatron/training/arguments.py);
  3. core_transformer_config_from_args(args)      -- TransformerConfig.__post_init__ and
     ModelParallelConfig's checks (megatron/core/transformer/transformer_config.py).
No GPU is needed: torch.cuda's device queries are answered with the target GPU's compute
capability (the case's "gpu"), and Megatron's Transformer Engine version queries with
TE_VERSION (TE's PyTorch extension builds against CUDA and is not installed here; the argument
checks only compare its version). Nothing else is stubbed.

Prints one line per case (PASS/FAIL name: reason) and a closing "N passed, M failed" line;
exits 1 if any case failed.
"""

import json
import multiprocessing as mp
import os
import sys
import traceback

# The Transformer Engine release Megatron's version checks are answered with: the newest on the
# Python package registry when this was written.
TE_VERSION = "2.20.2"


def run_case(case, queue):
    """In a forked child: Megatron's modules are imported once by the parent."""
    import io
    import types
    from contextlib import redirect_stdout

    import megatron.core.utils as mcore_utils
    import torch
    from megatron.training.arguments import (core_transformer_config_from_args, parse_args,
                                             validate_args)

    os.environ.pop("CUDA_DEVICE_MAX_CONNECTIONS", None)
    os.environ.update({"WORLD_SIZE": str(case["world_size"]), "RANK": "0", "LOCAL_RANK": "0"})
    os.environ.update(case.get("env", {}))
    major, minor = case["gpu"]
    props = types.SimpleNamespace(major=major, minor=minor, name="autoplan-target",
                                  total_memory=80 << 30, multi_processor_count=132)
    torch.cuda.get_device_capability = lambda *a, **k: (major, minor)
    torch.cuda.get_device_properties = lambda *a, **k: props
    from packaging.version import Version

    mcore_utils._te_version = Version(TE_VERSION)
    try:
        sys.argv = ["pretrain_gpt.py"] + case["argv"]
        with redirect_stdout(io.StringIO()):
            args = parse_args()
            validate_args(args)
            core_transformer_config_from_args(args)
        queue.put((True, ""))
    except SystemExit as e:  # argparse: unknown or malformed flag
        queue.put((False, f"argparse exit {e.code}"))
    except BaseException as e:  # noqa: BLE001 - every check failure is reported
        tb = traceback.extract_tb(e.__traceback__)
        where = next((f"{os.path.basename(f.filename)}:{f.lineno}" for f in reversed(tb)
                      if "megatron" in f.filename), "?")
        queue.put((False, f"{type(e).__name__} at {where}: {e}".replace("\n", " ")))


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    with open(sys.argv[1]) as f:
        cases = [json.loads(line) for line in f if line.strip()]
    import warnings

    warnings.filterwarnings("ignore")
    import megatron.training.arguments  # noqa: F401 - imported once, before forking
    ctx = mp.get_context("fork")
    passed = failed = 0
    for case in cases:
        q = ctx.Queue()
        p = ctx.Process(target=run_case, args=(case, q))
        p.start()
        p.join(300)
        ok, why = q.get() if not q.empty() else (False, f"no result (exit {p.exitcode})")
        if ok:
            passed += 1
            print(f"PASS {case['name']}")
        else:
            failed += 1
            print(f"FAIL {case['name']}: {why}")
        sys.stdout.flush()
    print(f"megatron_check: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
