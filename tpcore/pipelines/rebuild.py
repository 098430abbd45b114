"""Rebuild a recorded learn run: train its recorded configuration again into a fresh folder and
compare what comes out with the record.

Committed results keep each run's record (``metrics.json``: its configuration, seed, metrics and
training history; in its folder or packed into a ``runs.json.gz`` above it,
:mod:`tpcore.pipelines.records`) but not its weights or program. :func:`rebuild` reads the
configuration back (:func:`tpcore.pipelines.records.find_record`), trains it with
:func:`tpcore.pipelines.learn.learn` into ``out`` and lists every recorded result the new run
does not repeat exactly
(:func:`differences`): the steps, the selected step, every evaluation of the history, the
train / validation / test metrics of the selected model, and the program's length and fidelity.

Float32 training is a deterministic function of the configuration on one kind of machine: the
array backend, the processor, the BLAS threads, the subnormal mode and the versions of tpcore
and NumPy (``metrics["machine"]``, :func:`tpcore.cpu.training_machine`). On the machine a record
names, the rebuilt run equals it bit for bit; elsewhere the products may round differently and
the run come back within seed noise instead, which the report says.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tpcore.errors import TpcoreError
from tpcore.io import json_value
from tpcore.pipelines.learn import learn, recorded_config
from tpcore.pipelines.records import find_record

COMPARED = ("steps", "steps_per_epoch", "selected_at_step", "history", "train", "val", "test")
"""Keys of ``metrics.json`` a rebuilt run must repeat exactly (timings and paths are left out)."""
PROGRAM_COMPARED = ("lines", "fidelity")
"""Keys of ``metrics["program"]`` compared."""
MAX_LISTED = 20
"""Differences listed at most (their number is always given)."""


def _walk(recorded: Any, rebuilt: Any, where: str, out: list[dict[str, Any]]) -> None:
    """Append to ``out`` each leaf where the JSON values ``recorded`` and ``rebuilt`` differ."""
    if isinstance(recorded, dict) and isinstance(rebuilt, dict):
        for key in sorted(set(recorded) | set(rebuilt)):
            _walk(recorded.get(key), rebuilt.get(key), f"{where}.{key}", out)
    elif (isinstance(recorded, list) and isinstance(rebuilt, list)
          and len(recorded) == len(rebuilt)):
        for i, (a, b) in enumerate(zip(recorded, rebuilt)):
            _walk(a, b, f"{where}[{i}]", out)
    elif recorded != rebuilt:
        out.append({"key": where.lstrip("."), "recorded": recorded, "rebuilt": rebuilt})


def differences(recorded: dict[str, Any], rebuilt: dict[str, Any]) -> list[dict[str, Any]]:
    """Every value of :data:`COMPARED` and :data:`PROGRAM_COMPARED` where two runs' metrics
    differ, as ``{"key": "test.acc", "recorded": ..., "rebuilt": ...}`` (lists of another length
    count as one difference). ``rebuilt`` is compared as JSON reads it back, as the record was."""
    rebuilt = json_value(rebuilt)
    found: list[dict[str, Any]] = []
    for key in COMPARED:
        _walk(recorded.get(key), rebuilt.get(key), key, found)
    programs = [m.get("program") if isinstance(m.get("program"), dict) else {}
                for m in (recorded, rebuilt)]
    for key in PROGRAM_COMPARED:
        _walk(programs[0].get(key), programs[1].get(key), f"program.{key}", found)
    return found


def rebuild(run: str | Path, out: str | Path, quiet: bool = True,
            threads: int | None = None) -> dict[str, Any]:
    """Train the configuration recorded for the run at ``run`` (its ``metrics.json``, or its
    packed record, :func:`tpcore.pipelines.records.find_record`) into ``out`` (a fresh folder,
    or one holding that configuration's finished run, which is reused) and compare the two.

    Returns ``{"run", "out", "identical", "differences"`` (:func:`differences`), ``"compared"``
    (the keys), ``"recorded_on"``, ``"rebuilt_on"`` (the machines, None for a record without
    one) and ``"same_machine"``. ``threads`` defaults to the record's."""
    run, out = Path(run), Path(out)
    if out.resolve() == run.resolve():
        raise TpcoreError(f"--out {out} is the recorded run itself; expected another folder")
    recorded, where = find_record(run)
    cfg = recorded_config(recorded, where)
    machine = recorded.get("machine") if isinstance(recorded.get("machine"), dict) else None
    if threads is None and machine is not None and type(machine.get("threads")) is int:
        threads = max(1, machine["threads"])
    rebuilt = learn(cfg, out, quiet=quiet, threads=threads)
    found = differences(recorded, rebuilt)
    made = rebuilt.get("machine")
    return {"run": str(run), "out": str(out), "identical": not found, "differences": found,
            "compared": [*COMPARED, *(f"program.{k}" for k in PROGRAM_COMPARED)],
            "recorded_on": machine, "rebuilt_on": made, "same_machine": machine == made}


def _value(value: Any) -> str:
    text = json.dumps(value)
    return text if len(text) <= 60 else text[:57] + "..."


def report(result: dict[str, Any]) -> str:
    """What ``tpcore rebuild`` prints: the verdict, the machines, then each difference."""
    n = len(result["differences"])
    lines = [f"rebuilt {result['run']} into {result['out']}: "
             + ("identical" if n == 0 else f"{n} recorded value{'s' * (n != 1)} not repeated")
             + f" ({', '.join(result['compared'])})"]
    for label, key in (("recorded on", "recorded_on"), ("rebuilt on", "rebuilt_on")):
        m = result[key]
        lines.append(f"{label}: " + ("not recorded" if m is None else ", ".join(
            f"{k} {m[k]}" for k in m)))
    if n and not result["same_machine"]:
        lines.append("the machines differ: float32 products may round differently there, so "
                     "expect the same run within seed noise rather than bit for bit")
    for d in result["differences"][:MAX_LISTED]:
        lines.append(f"  {d['key']}: recorded {_value(d['recorded'])}, "
                     f"rebuilt {_value(d['rebuilt'])}")
    if n > MAX_LISTED:
        lines.append(f"  ... and {n - MAX_LISTED} more")
    return "\n".join(lines)
