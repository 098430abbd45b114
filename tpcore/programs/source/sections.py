"""The sections of ``run`` that every program file has, whatever its format: for each module a
banner, its function (predicate or MLP) and the lines that compute its output, followed by the
format's lines for that variable (:meth:`tpcore.programs.source.style.Style.scores`); and, in a
compressed program of a style that prunes, the variables of one value as literals.

``compress=False`` writes every module, one branch per query value and every MLP key (Table 4's
"before" count). ``compress=True`` follows :func:`tpcore.programs.compress.plan`, which is
exact on every framed input: branches no input reaches are removed (value sets of
:mod:`tpcore.programs.reach`), queries that match the same key share a branch, and in a style
that prunes, modules no prediction depends on are not written, variables with one value (or
equal classifier rows) are literals, and MLPs are written as
:mod:`~tpcore.programs.source.mlps` says. Host-only code (NumPy and the standard library).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tpcore.counts import EXPERTS, only_expert
from tpcore.programs.compress import MlpPlan, Plan, mlp_plan, plan
from tpcore.programs.ir import (
    ExpertCount,
    Head,
    Mlp,
    PrefixCount,
    Program,
    ProgramModule,
    RunningCount,
    expert_rule,
)
from tpcore.programs.source import library, predicates
from tpcore.programs.source.layout import WIDTH, banner, literal, packed
from tpcore.programs.source.mlps import MlpWriter
from tpcore.programs.source.style import Style
from tpcore.programs.source.templates import (
    AGGREGATE,
    SELECT,
    aggregated,
    applied,
    constant,
    listed,
    pattern,
    prefix_count,
    running_count,
)

EXPERT_CODE = {"total_count": "len(tokens)", "token_count": "hist[tokens[t]]",
               "most_frequent": "int(hist[tokens[t]] == max(hist.values()))",
               "seen_once": "int(hist[tokens[t]] == 1)",
               "relative_frequency": "hist[tokens[t]] / len(tokens)"}
"""Each counting expert as a Python expression (``hist``: counts of the non-padding tokens)."""


def rule_text(rule: dict[int, str | None]) -> list[str]:
    """A :func:`tpcore.counts.length_rule` as comment text, one line per run of consecutive
    lengths with one choice, e.g. ``1..6 content tokens: always token_count``."""
    spans: list[list[Any]] = []
    for length, choice in rule.items():
        if spans and spans[-1][2] == choice and spans[-1][1] == length - 1:
            spans[-1][1] = length
        else:
            spans.append([length, length, choice])
    lines = []
    for lo, hi, choice in spans:
        what = (f"always {choice}" if choice is not None
                else "expert = argmax(W @ hist + b), depends on the input")
        lines.append(f"{lo if lo == hi else f'{lo}..{hi}'} content tokens: {what}")
    return lines


class Sections:
    """Writes the sections of ``run`` for one program in one style, module by module."""

    def __init__(self, program: Program, style: Style, compress: bool):
        self.p, self.style, self.compress = program, style, compress
        self.plan: Plan | None = plan(program) if compress else None
        self.reach = self.plan.reach if self.plan is not None else {
            n: np.ones(v.size, dtype=bool) for n, v in program.variables.items()}
        self.extra: dict[str, str] = {}  # helpers the modules written so far need: name -> text
        self.helpers = style.helpers(program)
        self.select_name = {r: n for n, (_, r) in self.helpers.items() if r}
        self.pruned = self.plan if style.prunes else None
        """The plan whose unwritten modules and constants the source follows (a style that
        prunes)."""
        self.sections: dict[str, int] = {}
        """Lines written per module."""
        self.mlps = MlpWriter(program, compress)

    def written(self) -> list[ProgramModule]:
        """The modules the source writes, in order."""
        return [m for m in self.p.modules if self.pruned is None or m.name in self.pruned.written]

    def constants(self) -> list[str]:
        """Compressed, in a style that prunes: the variables written as one literal (constants,
        then the features whose classifier rows are equal on every value they take)."""
        if self.pruned is None:
            return []
        lines = []
        v = self.p.variables
        for fixed, title in ((True, "constant on every input"),
                             (False, "one of its values: equal classifier rows on all")):
            names = [n for n in v if n in self.pruned.constant
                     and (int(self.reach[n].sum()) == 1) == fixed]
            if names:
                lines.append(banner(4, title))
            for n in names:
                lines.append("    " + constant(n, literal(v[n].values[self.pruned.constant[n]])))
                module = self.p.producer(n)
                self.sections[module.name if module else n] = 1
        return lines + [""] if lines else []

    def module(self, m: ProgramModule) -> list[str]:
        """The section of module ``m``; records its length. (A switch over the kinds: how a
        kind is written as code is the source writer's business, not the IR's.)"""
        if isinstance(m, Head):
            lines = self.head(m)
        elif isinstance(m, PrefixCount):
            lines = self.prefix_count(m)
        elif isinstance(m, RunningCount):
            lines = self.running_count(m)
        elif isinstance(m, ExpertCount):
            lines = self.expert_count(m)
        else:
            lines = self.mlp(m)
        self.sections[m.name] = len(lines)
        return lines

    def uses(self, helper: str) -> bool:
        """Whether the source calls library function ``helper`` (pruned sources define only
        those; the others define every helper of their style)."""
        if self.pruned is None:
            return True
        heads = [m for m in self.p.modules if isinstance(m, Head) and m.name in
                 self.pruned.written]
        if helper in ("select", "aggregate_sum"):
            return any(h.kind == "numerical" for h in heads)
        if helper == "aggregate":
            return any(h.kind == "categorical" for h in heads)
        return any(h.kind == "categorical" and self.select_name[h.rule] == helper
                   for h in heads)

    def features(self) -> tuple[str, ...]:
        """The classifier features the source sums."""
        return self.p.classifier.features if self.pruned is None else self.pruned.features

    def scores(self, var: str) -> list[str]:
        """The style's lines after the definition of ``var``."""
        return self.style.scores(self.p, var)

    def head(self, h: Head) -> list[str]:
        """``def predicate_L_H(q, k)`` (:func:`tpcore.programs.source.predicates.write`) and
        the head's two lines."""
        v = self.p.variables
        lines = [banner(4, h.name), *predicates.write(
            h, v[h.query], v[h.key], self.reach, self.compress, self.pruned is not None), ""]
        select = self.select_name[h.rule] if h.kind == "categorical" else SELECT
        lines += pattern(h.name, select, h.key, h.query).wrapped(4)
        lines += aggregated(h.output, AGGREGATE[h.kind], h.name, h.value).wrapped(4)
        return lines + self.scores(h.output) + [""]

    def prefix_count(self, m: PrefixCount) -> list[str]:
        """``out = [tokens[:i].count(token) ...]`` (PrefixSumCounts)."""
        lines = [banner(4, m.name), *prefix_count(m.output, literal(m.token)).wrapped(4)]
        return lines + self.scores(m.output) + [""]

    def running_count(self, m: RunningCount) -> list[str]:
        """``out = [tokens[:i + 1].count(tokens[i]) ...]`` (the own token's running count)."""
        lines = [banner(4, m.name), *running_count(m.output).wrapped(4)]
        return lines + self.scores(m.output) + [""]

    def expert_count(self, m: ExpertCount) -> list[str]:
        """The expert gate: the token counts and the expert's expression when the gate picks
        one expert for every framed input, else the gate's scores with its weights written
        out, the first highest score's expert, and the five experts' expressions."""
        p = self.p
        rule = expert_rule(m, p.tokens, p.bos, p.eos, p.pad, p.max_len)
        fixed = only_expert(rule)
        lines = [banner(4, m.name), *(f"    # {text}" for text in rule_text(rule))]
        if fixed != "total_count":
            lines.append("    hist = {t: tokens.count(t) for t in VOCAB}")
        if fixed is not None:
            return lines + self.expert_line(4, m, fixed) + self.scores(m.output) + [""]
        self.extra["gate_score"] = library.GATE_SCORE
        lines.append("    gate = {  # expert: (bias, weight of each VOCAB token)")
        for e, b, row in zip(EXPERTS, m.bias.tolist(), m.weights.tolist()):
            lines += packed(8, f'"{e}": ({literal(b)}, [', [literal(x) for x in row], "]),")
        lines += ["    }",
                  "    expert = max(gate, key=lambda e: gate_score(*gate[e], hist.values()))"]
        for k, e in enumerate(EXPERTS):
            lines.append(f'    {"if" if k == 0 else "elif"} expert == "{e}":')
            lines += self.expert_line(8, m, e)
        return lines + self.scores(m.output) + [""]

    def expert_line(self, indent: int, m: ExpertCount, expert: str) -> list[str]:
        """``expert_count = [<the expert at t> for t in ...]``; relative frequencies rounded to
        float32 when the model divides in float32."""
        code = EXPERT_CODE[expert]
        if expert == "relative_frequency" and m.dtype == "float32":
            self.extra["float32"] = library.FLOAT32
            code = f"float32({code})"
        return listed(m.output, f"{code} for t in range(len(tokens))").wrapped(indent)

    def mlp(self, m: Mlp) -> list[str]:
        """``def mlp_L_M(...)`` (:class:`tpcore.programs.source.mlps.MlpWriter`) and its
        application. Full: every key of the table a branch, the IR's default last.
        Compressed: the arguments, table and keys of the MLP's plan
        (:func:`tpcore.programs.compress.mlp_plan`); where an input may leave its listed
        values, every other output is a branch and the IR's default stays last."""
        if self.plan is None:
            mp = MlpPlan(m.inputs, m.table, np.ones(m.table.shape, dtype=bool))
        else:
            mp = self.plan.mlps.get(m.name) or mlp_plan(m, self.plan.sets)
        fixed = self.plan is None or any(x in self.plan.sets.outside for x in m.inputs)
        lines = [banner(4, m.name), *self.mlps.function(m, mp, fixed, self.style.fits_rules), ""]
        call, loop = applied(m.name, len(mp.inputs), list(mp.inputs))
        if len(f"        {call} for {loop}") <= WIDTH:
            lines += listed(m.output, f"{call} for {loop}").wrapped(4)
        else:
            lines += [f"    {m.output} = [", f"        {call}", f"        for {loop}", "    ]"]
        return lines + self.scores(m.output) + [""]
