"""The generated tasks Transformer Programs learn, by name: the RASP and Dyck tasks
(:mod:`tpcore.tasks.rasp`) and the in-context task (:mod:`tpcore.tasks.induction`).

Every task is made the same way, ``make_task(name, vocab_size, max_len, n_samples, seed,
min_len)``, with the paper's small-scale size where ``vocab_size`` or ``max_len`` is not given.
Host-only (NumPy).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from tpcore.errors import unknown_name
from tpcore.tasks import rasp
from tpcore.tasks.data import BOS, PAD, TaskData
from tpcore.tasks.induction import make_induction


@dataclass(frozen=True)
class TaskGenerator:
    """How one task is made: ``make(vocab_size, max_len, n_samples, seed, min_len)``, its
    default ``size`` ``(vocab_size, max_len)``, the special tokens it uses besides its
    content symbols, and whether its models are ``causal`` (the ``causal`` of the data made)."""

    make: Callable[[int, int, int, int, int], TaskData]
    size: tuple[int, int]
    specials: tuple[str, ...]
    causal: bool


def _induction(vocab_size: int, max_len: int, n_samples: int, seed: int,
               min_len: int) -> TaskData:
    """The induction task: its vocabulary is fixed and every input has ``max_len`` tokens, so
    ``vocab_size`` and ``min_len`` do not apply."""
    return make_induction(n_samples=n_samples, length=max_len, seed=seed)


RASP_SIZES = {**{name: (8, 8) for name in rasp.RASP}, "dyck1": (2, 16), "dyck2": (4, 16)}
"""Default ``(vocab_size, max_len)`` of the RASP and Dyck tasks (the paper's small scale)."""
TASKS: dict[str, TaskGenerator] = {
    **{name: TaskGenerator(partial(rasp.make_rasp, name), size, tuple(rasp.special_tokens(name)),
                           rasp.causal(name))
       for name, size in RASP_SIZES.items()},
    "induction": TaskGenerator(_induction, (8, 10), (PAD, BOS), True),
}
TASK_NAMES = tuple(TASKS)
ALIASES = {"double-hist": "double_hist", "hist2": "double_hist", "most-freq": "most_freq",
           "dyck-1": "dyck1", "dyck-2": "dyck2", "in-context": "induction"}
DEFAULTS = {name: task.size for name, task in TASKS.items()}
"""``(vocab_size, max_len)`` of each task at the paper's small scale."""


def task_name(name: str) -> str:
    """Canonical task name; an unknown one raises listing the known tasks."""
    canon = ALIASES.get(name, name)
    if canon not in TASKS:
        raise unknown_name("task", name, TASK_NAMES)
    return canon


def special_tokens(name: str) -> list[str]:
    """The token ids task ``name`` uses besides its content symbols."""
    return list(TASKS[task_name(name)].specials)


def is_causal(name: str) -> bool:
    """Whether task ``name``'s models attend only to their own and earlier positions."""
    return TASKS[task_name(name)].causal


def make_task(name: str, vocab_size: int | None = None, max_len: int | None = None,
              n_samples: int = 20000, seed: int = 0, min_len: int = 1) -> TaskData:
    """Generate task ``name`` (see :data:`TASK_NAMES`) with ``vocab_size`` token ids and
    ``max_len`` positions, special tokens and framing included, the task's :data:`DEFAULTS`
    where not given."""
    task = TASKS[task_name(name)]
    dv, dn = task.size
    return task.make(vocab_size or dv, max_len or dn, n_samples, seed, min_len)
