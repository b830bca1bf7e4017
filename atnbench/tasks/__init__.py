"""atnbench.tasks: the paper's synthetic sequence tasks (Pospisil et al. 2024, Sect. 4.1).

    from atnbench.tasks import get_task, batch_generator
    spec = get_task("copying")
    x, y = spec.make_batch(batch_generator(seed=0, stream="train"), 128, 100)

Every generator is a pure function of the ``torch.Generator`` it is given (no global RNG), and
returns time-first tensors: x is (seq_len(T), batch, input_size).
"""

from atnbench.tasks.lookup import get_task, load_task_preset, task_for, task_names, task_of, tasks
from atnbench.tasks.registry import STREAMS, TaskSpec, batch_generator

__all__ = ["STREAMS", "TaskSpec", "batch_generator", "get_task", "load_task_preset", "task_for", "task_names",
           "task_of", "tasks"]
