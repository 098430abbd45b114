"""Pipelines from data to model to program: :mod:`~tpcore.pipelines.learn` (train a Transformer
Program on a task into a run directory; its configuration in
:mod:`~tpcore.pipelines.learn_config`, the tasks' recipes in
:mod:`~tpcore.pipelines.learn_recipes`, run directories and records in
:mod:`~tpcore.pipelines.learn_runs`), :mod:`~tpcore.pipelines.sweep` (grids of such runs),
:mod:`~tpcore.pipelines.decompile` (a trained or saved model -> its program files),
:mod:`~tpcore.pipelines.fidelity` (does the program predict what the model does) and
:mod:`~tpcore.pipelines.score` (a program's accuracy on a generated task),
:mod:`~tpcore.pipelines.roundtrip` (a written program compiled, fine-tuned, decompiled and
compared) and :mod:`~tpcore.pipelines.compile_task` (a written task program compiled into a
folder)."""
