"""What ``tpcore learn TASK`` trains: each task's recipe (:data:`TASK_RECIPES`) on top of
:class:`~tpcore.pipelines.learn_config.LearnConfig`'s defaults, made into a run's settings by
:func:`task_config`."""

from __future__ import annotations

from typing import Any

from tpcore.pipelines.learn_config import LearnConfig
from tpcore.tasks.registry import task_name

__all__ = ["TASK_RECIPES", "task_config"]

TASK_RECIPES: dict[str, dict[str, int]] = {
    "double_hist": dict(n_cat_mlps=1, n_num_mlps=1, candidates=6, select_after=100),
    "induction": dict(n_layers=2, n_cat_heads=1, n_num_heads=0, n_cat_mlps=0, n_num_mlps=0,
                      grow=4, candidates=16, select_after=10),
}
"""The settings ``tpcore learn TASK`` trains with where they differ from :class:`LearnConfig`'s
defaults (3 layers of 4 + 4 heads and 2 + 2 MLPs, one candidate); each trains the paper's model
for its task, chosen so that one run reliably gets the paper's accuracy.

- ``double_hist``: the paper's 1 + 1 MLPs per layer. Only about a third of single runs come
  within a point of the paper's accuracy, and those are ahead by epoch 100, so a run keeps the
  best of 6 candidates after 100 epochs.
- ``induction`` (the in-context task): the paper's 2 layers of one categorical head and no
  MLPs. Its program needs two heads that only pay together (a previous-token head and a head
  keyed on its output), which one head per layer seldom finds; so a run first trains 4 heads
  per layer, the best of 16 candidates after 10 epochs, and cuts the pair it found down into
  the one-head model (``grow``, :func:`~tpcore.pipelines.learn.grow_then_prune`).

The measurements behind these choices: docs/programs_model.md ("Candidates" and "Growing, then
pruning")."""


def task_config(task: str, **fields: Any) -> LearnConfig:
    """The :class:`LearnConfig` of ``task`` (a name or alias): its :data:`TASK_RECIPES`
    entry, then ``fields``. A run too short for the recipe's selection (``epochs`` at most its
    ``select_after``, none of ``candidates``, ``select_after`` and ``grow`` given) trains one
    candidate of the model it names, without growing."""
    name = task_name(task)
    recipe = dict(TASK_RECIPES.get(name, {}))
    epochs = fields.get("epochs", LearnConfig.epochs)
    if (recipe.get("select_after", 0) >= epochs
            and not {"candidates", "select_after", "grow"} & set(fields)):
        for selecting in ("candidates", "select_after", "grow"):
            recipe.pop(selecting, None)
    return LearnConfig(task=name, **{**recipe, **fields})
