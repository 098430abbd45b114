"""Pipelines from data to model to program: :mod:`~tpcore.pipelines.learn` (train a Transformer
Program on a task into a run directory), :mod:`~tpcore.pipelines.sweep` (grids of such runs),
:mod:`~tpcore.pipelines.decompile` (a trained or saved model -> its program files),
:mod:`~tpcore.pipelines.fidelity` (does the program predict what the model does) and
:mod:`~tpcore.pipelines.score` (a program's accuracy on a generated task)."""
