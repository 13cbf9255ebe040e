"""Guard: memlog's judgement inside the training process. A loop (or a framework callback: hf.py
for Hugging Face Trainer, lightning.py for Lightning) calls Guard.step(step) once per step; the
guard reads the local device's allocator and the host, judges the readings as watch judges a log,
and says whether to warn, save or stop, agreed across ranks. snapshot.py reads allocator snapshots
safely and names the allocation sites that grew (`memlog snapshot`).

torch, transformers and lightning are never imported by `import memlog` nor `import memlog.guard`:
the readers use the torch the training script imported, and the callbacks are modules of their own.

May import: watch (its judging), the engine and every stage below it.
"""

from memlog.guard.guard import Decision, Guard
from memlog.guard.readings import CudaReader, HostReader, Reading, ReplayReader

__all__ = ["CudaReader", "Decision", "Guard", "HostReader", "Reading", "ReplayReader"]
