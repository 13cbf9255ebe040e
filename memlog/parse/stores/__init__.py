"""Metrics stores: runs whose memory was never printed to a text log but kept by a metrics
library. Each store is one module that turns a store's run into the records a log's steps give
(generic/structured.py keyed_records: key names mapped to columns as the generic reader maps them,
units from the key, what was read said as a guess). The engine reads such an input through it
instead of the line parser (memlog/engine/reader.py).

- tensorboard.py: TensorBoard event files (`events.out.tfevents.*`), through the `tensorboard`
  package's own event loader (the `memlog[tensorboard]` extra);
- mlflow.py: MLflow runs (an `mlruns/` file store, `mlflow.db`, a tracking server), through
  MLflow's own client (the `memlog[mlflow]` extra).

May import: memlog.base, memlog.read, memlog.tables, memlog.parse.
"""

from memlog.parse.stores.mlflow import MlflowRun, is_mlflow_input, mlflow_runs, read_mlflow_run
from memlog.parse.stores.tensorboard import is_event_file, read_event_file

__all__ = ["MlflowRun", "is_event_file", "is_mlflow_input", "mlflow_runs", "read_event_file", "read_mlflow_run"]
