"""One rank of the two-process test of the guard's agreed stop (tests/guard/test_guard_distributed.py):

    python -m tests.guard_ranks RANK WORLD_SIZE INIT_FILE OUT_DIR

A gloo process group on CPU; rank 1's readings leak, rank 0's are healthy. Each step runs an
all-reduce, as a data-parallel step does, then the guard; the loop ends when the guard says stop.
What each rank saw goes to OUT_DIR/rank<R>.json."""

from __future__ import annotations

import datetime
import json
import sys
from pathlib import Path

import torch
import torch.distributed as dist

from memlog.guard import Guard
from tests.guard_readings import Clock, healthy, leaking, ticking

STEPS = 1000
TIMEOUT = datetime.timedelta(seconds=60)  # a rank left alone in a collective fails after this, instead of hanging


def main(rank: int, world_size: int, init_file: str, out: Path) -> None:
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world_size, timeout=TIMEOUT)
    clock = Clock()
    guard = Guard(ticking(leaking() if rank == 1 else healthy(), clock), report_dir=out, background=False, clock=clock)
    gradient, saved, stopped = torch.ones(4), [], None
    for step in range(1, STEPS + 1):
        dist.all_reduce(gradient)  # the training step's own collective: a rank that stopped alone leaves the other here
        gradient.fill_(1.0)
        decision = guard.step(step)
        if decision.should_save:
            saved.append(step)
        if decision.should_stop:
            stopped = step
            break
    guard.close()
    dist.barrier()
    (out / f"rank{rank}.json").write_text(
        json.dumps({"stopped": stopped, "saved": saved, "decision": decision.to_json(), "world_size": guard.agreement.world_size})
    )
    dist.destroy_process_group()


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], Path(sys.argv[4]))
