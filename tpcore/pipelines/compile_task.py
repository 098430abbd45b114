"""A written task program compiled into a folder: the model, its program and its verification.

:func:`compile_task` compiles the program of :data:`tpcore.rasp.library.TASKS` ``name``, verifies
it five ways (:func:`tpcore.rasp.verify`) and writes into ``out``: ``model.npz`` and
``model.json`` (an ordinary saved tpcore model, with the task's vocabulary and classes, which
``tpcore.models.load`` and every ``tpcore program`` command read), ``program.json`` (its IR in
the model's names), ``program/<task>.py`` with its weights CSV (the generated program) and
``verification.json``. Nothing is written when compiling or verifying fails.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tpcore.io import write_json
from tpcore.nn.module import save
from tpcore.programs import ir
from tpcore.programs.source import writer
from tpcore.rasp import compile, verify
from tpcore.rasp.library import task
from tpcore.rasp.weights import MARGIN
from tpcore.rundir import check_out_dir


def compile_task(name: str, out: Path, layers: int | None = None, margin: float = MARGIN,
                 exhaustive: int = 100_000, sample: int = 5_000, seed: int = 0
                 ) -> dict[str, Any]:
    """Compile, verify (on every input when there are at most ``exhaustive``, else on ``sample``
    random ones) and write task ``name``'s program (module docstring); returns what was measured
    and written."""
    t = task(name)
    compiled = compile(t.program(), layers=layers, margin=margin, seed=seed)
    check = verify(compiled, exhaustive=exhaustive, sample=sample, seed=seed)
    out = check_out_dir(out)
    save(compiled.model, out / "model", {"task": name, "vocab": list(t.vocab()),
                                         "classes": list(t.classes())})
    ir.save(compiled.ir, out / "program.json")
    py, _ = writer.write(compiled.ir, out / "program" / f"{name}.py")
    cfg = compiled.model.config
    result = {"task": name, "layers": cfg.n_layers, "width": cfg.width, "d_mlp": cfg.d_mlp,
              "margin": margin, "placed": compiled.placed, "compile_seconds": compiled.seconds,
              "verified": check.summary(), "ok": check.ok, "first_disagreement": check.first,
              "inputs": check.inputs, "domain": check.domain, "exhaustive": check.exhaustive,
              "model": str(out / "model.npz"), "program": str(py)}
    write_json(out / "verification.json", result)
    return result
