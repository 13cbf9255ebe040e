"""TensorBoard event files: the scalars a run logged (torchtitan's `metrics.enable_tensorboard`,
Lightning's default logger, Hugging Face's `report_to="tensorboard"`, any SummaryWriter), by tag
and step, read through the `tensorboard` package's record loader and protobuf classes, never a parser of ours.

Scalars come as `simple_value` (torch's and tensorboardX's writers) or as a rank-0 tensor (TF2's
`tf.summary.scalar`); other summaries (histograms, images, text) are skipped. The tags are mapped
to columns by name as the generic reader maps keys (`memory/max_reserved(GiB)`, `train/loss`,
`grad_norm`), units from the tag; a tag of a share (`(%)`) is never read as memory. A step logged
again lower than before (a resumed run writing on into the file) starts a new segment, as a step
counter going back does in a log. A damaged or cut file is read up to the damage, and says where.
"""

from __future__ import annotations

import os
from pathlib import PurePath

import polars as pl

from memlog.base.errors import InputError
from memlog.parse.generic.guessed import Guessed
from memlog.parse.generic.structured import keyed_records

READER = "tensorboard"
RECORD_FRAMING = 16  # a TFRecord's length (8 bytes) and two CRCs (4 each) around each event


def is_event_file(name: str) -> bool:
    """An event file by its name, as every writer names them: `events.out.tfevents.<time>.<host>...`."""
    return ".tfevents." in PurePath(name).name or PurePath(name).name.startswith("events.out.tfevents")


def read_event_file(path: str, source: str) -> tuple[list[pl.DataFrame], Guessed | None, str | None, int]:
    """The records of one event file (`source`: its name in reports): frames, what was read (in
    words), the damage that ended reading (None when read to its end) and the events read."""
    try:
        from tensorboard.backend.event_processing.event_file_loader import RawEventFileLoader
        from tensorboard.compat.proto.event_pb2 import Event
        from tensorboard.util import tensor_util
    except ImportError:
        raise InputError(f"{path}: a TensorBoard event file; reading it needs the extra: pip install 'memlog[tensorboard]'") from None
    segments: list[dict[int, dict]] = [{}]
    last_step: dict[str, int] = {}
    damage, events, read_bytes = None, 0, 0
    try:
        for record in RawEventFileLoader(path).Load():
            events += 1
            read_bytes += RECORD_FRAMING + len(record)
            event = Event.FromString(record)
            for value in event.summary.value:
                number = _scalar(value, tensor_util)
                if number is None:
                    continue
                step = int(event.step)
                if step < last_step.get(value.tag, step):
                    segments.append({})  # resumed from a checkpoint: the steps go back
                    last_step.clear()
                last_step[value.tag] = step
                entry = segments[-1].setdefault(step, {"step": step, "_seconds": float(event.wall_time)})
                entry[value.tag] = number
    except Exception as exc:
        damage = f"damaged after {events:,} events ({type(exc).__name__}); read up to the damage"
    # The loader stops quietly at a record cut short or failing its checksum: what is left says so.
    left = os.path.getsize(path) - read_bytes
    if damage is None and left > 0:
        damage = f"cut or damaged after {events:,} events ({left:,} bytes are not whole event records); read up to there"
    entries = [entry for segment in segments for _, entry in sorted(segment.items())]
    frames, said = keyed_records(entries, source, READER, "each event", "scalars")
    return frames, said, damage, events


def _scalar(value, tensor_util) -> float | None:
    """A summary value's number when it is a scalar, else None."""
    kind = value.WhichOneof("value")
    if kind == "simple_value":
        number = float(value.simple_value)
    elif kind == "tensor" and not value.tensor.tensor_shape.dim and value.metadata.plugin_data.plugin_name in ("scalars", ""):
        try:
            number = float(tensor_util.make_ndarray(value.tensor).item())
        except (ValueError, TypeError):
            return None
    else:
        return None
    return number  # (a non-finite loss is news; a non-finite memory reading is a corrupt one: both are read)
