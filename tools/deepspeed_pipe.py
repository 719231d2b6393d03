#!/usr/bin/env python3
"""DeepSpeed's pipeline TrainSchedule against Megatron's 1F1B, on identical stages.

DeepSpeed (deepspeed/runtime/pipe/schedule.py, TrainSchedule; frameworks.md §3.4) runs
2(m + p - 1) steps; stage s runs forwards on the steps of its own parity and backwards on the
others (`_even_step_forward_id` ... `_odd_step_backward_id`), and each step first sends and
receives with its neighbours, one blocking transfer after the other (SendGrad, RecvActivation on
a forward step; RecvGrad, SendActivation on a backward step), then computes. A transfer is a
rendezvous: both ranks leave it at max(arrivals) + c. Megatron's 1F1B takes (m + p - 1)(F + B)
plus its batched send/recv pairs.

    python3 tools/deepspeed_pipe.py M P F B C

M micro-batches, P stages, F and B seconds of one micro-batch's forward and backward (with its
recompute) on a stage, C seconds of one transfer. Prints both times.
"""
import sys


def micro_batch(step, s, p):
    """(micro-batch, is_forward) of stage s at a step, as TrainSchedule maps them."""
    even = lambda x: x % 2 == 0
    if even(step) and even(s):
        return step // 2 - s // 2, True
    if not even(step) and not even(s):
        return (step - 1) // 2 - s // 2, True
    if even(step) and not even(s):
        return step // 2 - p + (s + 1) // 2, False
    return (step - 1) // 2 - p + 1 + s // 2, False


def program(s, m, p):
    """Stage s's instructions, in TrainSchedule.steps()'s order."""
    ops, prev = [], -1
    valid = lambda j: 0 <= j < m
    for step in range(2 * (m + p - 1)):
        j, fwd = micro_batch(step, s, p)
        if fwd:
            if valid(prev) and s > 0:
                ops.append(("send", "grad", s - 1))
            if valid(j) and s > 0:
                ops.append(("recv", "act", s - 1))
        else:
            if valid(j) and s < p - 1:
                ops.append(("recv", "grad", s + 1))
            if valid(prev) and s < p - 1:
                ops.append(("send", "act", s + 1))
        if valid(j):
            ops.append(("F",) if fwd else ("B",))
        prev = j
    return ops


def deepspeed(m, p, f, b, c):
    progs = [program(s, m, p) for s in range(p)]
    pc, t, waiting = [0] * p, [0.0] * p, [None] * p
    count, posted = {}, {}
    while True:
        moved = False
        for s in range(p):
            while pc[s] < len(progs[s]) and waiting[s] is None:
                op = progs[s][pc[s]]
                if op[0] in ("F", "B"):
                    t[s] += f if op[0] == "F" else b
                    pc[s] += 1
                    moved = True
                    continue
                way, kind, peer = op
                src, dst = (s, peer) if way == "send" else (peer, s)
                n = count.get((s, kind, src, dst), 0)
                count[(s, kind, src, dst)] = n + 1
                key = (kind, src, dst, n)
                if key in posted:
                    q = posted.pop(key)
                    t[q] = t[s] = max(t[q], t[s]) + c
                    waiting[q] = None
                    pc[q] += 1
                    pc[s] += 1
                else:
                    posted[key], waiting[s] = s, key
                moved = True
        if all(pc[s] >= len(progs[s]) for s in range(p)):
            return max(t)
        if not moved:
            raise RuntimeError(f"deadlock at {pc}")


if __name__ == "__main__":
    m, p = int(sys.argv[1]), int(sys.argv[2])
    f, b, c = (float(x) for x in sys.argv[3:6])
    ds = deepspeed(m, p, f, b, c)
    print(f"deepspeed {ds:.3f} s, megatron 1f1b compute {(m + p - 1) * (f + b):.3f} s "
          f"+ its 2 transfers per micro-batch {2 * m * c:.3f} s")
