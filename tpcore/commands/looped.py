"""``tpcore looped run PROGRAM``: run a SUBLEQ program on the looped transformer and on the
interpreter side by side (``tpcore reproduce looped`` is the lambda sweep and the
differentiable-execution study).

PROGRAM is an example name (``multiply``, ``factorial``, ``reverse``, ``search``, ``minsky``), an
assembler file (``*.asm``/``*.s``), or a commands CSV (header ``a,b,c``) given with ``--mem`` (a
memory CSV with header ``mem``), ``--s`` and ``--N``.
"""

from __future__ import annotations

import argparse

from tpcore.commands.options import (
    has_module,
    nonnegative_float,
    positive_float,
    positive_int,
)
from tpcore.commands.output import add_json_option, emit
from tpcore.errors import missing_package
from tpcore.subleq.lockstep import run as run_lockstep


def _fmt_mem(memory: dict[str, int]) -> str:
    return "  ".join(f"{name}={value}" for name, value in memory.items())


def run(args: argparse.Namespace) -> int:
    if args.kernel and not has_module("numba"):
        raise missing_package("numba", "--kernel")
    r = run_lockstep(args.program, lam=args.lam, schedule=args.schedule, snap=not args.no_snap,
                     sparse="kernel" if args.kernel else args.sparse, max_steps=args.max_steps,
                     tol=args.tol, N=args.N, s=args.s, mem=args.mem)
    program, lo = r.program, r.program.layout
    names = {col - program.s: name for name, col in program.names.items()}
    steps = []
    for t in range(1, r.steps + 1 if args.trace else 1):
        pc = r.interpreter.pcs[t - 1]
        a, b, c = (int(v) for v in program.commands[pc - lo.first_instruction])
        steps.append({"step": t, "pc": int(pc), "a": str(names.get(a - lo.s, a)),
                      "b": str(names.get(b - lo.s, b)), "c": c,
                      "value": int(r.interpreter.mems[t][b - lo.s]),
                      "next": int(r.interpreter.pcs[t]), "transformer_agrees": r.agrees_at(t)})
    report = {
        "layout": {"s": lo.s, "m": lo.m, "instructions": lo.k, "n": lo.n, "N": lo.N, "L": lo.L,
                   "d": lo.d, "d_paper": lo.d_paper},
        "machine": {**r.machine.size(), "names": list(r.machine.names), "lam": args.lam},
        **({"trace": steps} if args.trace else {}),
        "interpreter": {"steps": r.steps, "memory": r.memory("interpreter")},
        "transformer": {"steps": int(r.transformer.steps[0]),
                        "iterations": r.transformer.iterations, "seconds": r.seconds,
                        "memory": r.memory("transformer")},
        "agree": r.agree}
    emit(args, report, lambda: _text(report))
    return 0 if report["agree"] else 1


def _text(report: dict) -> str:
    """What ``looped run`` prints of ``report``."""
    lo, m = report["layout"], report["machine"]
    interp, trans = report["interpreter"], report["transformer"]
    attention = "hardmax" if m["lam"] is None else f"softmax lam={m['lam']}"
    lines = [f"layout: s={lo['s']} m={lo['m']} instructions={lo['instructions']} n={lo['n']} "
             f"N={lo['N']} L={lo['L']}; X is {lo['d']} x {lo['n']} (paper count "
             f"{lo['d_paper']} without temporaries)",
             f"machine: {m['layers']} layers ({', '.join(m['names'])}), heads per layer "
             f"{m['heads']}, FF widths {m['ff_hidden']}; {attention}"]
    lines += [f"  {r['step']:5d}  pc={r['pc']:4d}  subleq {r['a']}, {r['b']}, {r['c']}  ->  "
              f"{r['b']}={r['value']}  next={r['next']}"
              f"{'' if r['transformer_agrees'] else '  (transformer differs)'}"
              for r in report.get("trace", ())]
    lines += [f"interpreter: {interp['steps']} steps; memory {_fmt_mem(interp['memory'])}",
              f"transformer: {trans['steps']} steps ({trans['iterations']} loop iterations, "
              f"{trans['seconds']:.3f} s); memory {_fmt_mem(trans['memory'])}",
              f"agree after every step: {'yes' if report['agree'] else 'NO'}"]
    return "\n".join(lines)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("looped", help="SUBLEQ compiled into looped-transformer weights")
    verbs = p.add_subparsers(dest="looped_verb", metavar="VERB")
    r = verbs.add_parser("run", help="run a program on the looped transformer and the interpreter")
    r.add_argument("program", help="example name, assembler file, or commands CSV")
    r.add_argument("--mem", help="memory CSV (header 'mem') for a commands CSV")
    r.add_argument("--s", type=positive_int, default=1, help="scratchpad columns (default 1)")
    r.add_argument("--N", type=int, default=None, help="bits per integer, 2..48 (default 8; "
                   "examples have their own)")
    r.add_argument("--lam", type=positive_float, default=None, help="softmax inverse "
                   "temperature (default: exact hardmax)")
    r.add_argument("--schedule", choices=("fused", "paper"), default="fused",
                   help="5 fused layers or 8 one-block layers")
    r.add_argument("--no-snap", action="store_true", help="drop the error-correction layer")
    r.add_argument("--sparse", action="store_true", help="scratchpad-only global attention")
    r.add_argument("--kernel", action="store_true", help="the sparse path in the numba kernel")
    r.add_argument("--max-steps", type=positive_int, default=10_000,
                   help="step limit (default 10000)")
    r.add_argument("--tol", type=nonnegative_float, default=1e-9,
                   help="fixed-point tolerance on X")
    r.add_argument("--trace", action="store_true", help="print every executed instruction")
    add_json_option(r)
    r.set_defaults(func=run)
