"""Program IR -> a readable, standalone Python program plus its classifier weights CSV.

Paper style (Figure 4, Appendix A.3): one ``predicate_L_H`` per head made of ``if q in {...}:
return k == v`` branches, one ``mlp_L_M`` per MLP with ``if key in {...}: return v`` branches and
a default ``return``; values are typed labels (token strings, ints). ``compress=False`` writes
every module, one branch per query value and every MLP key (Table 4's "before" count).
``compress=True`` (default) follows :func:`tpcore.programs.compress.plan`, which is exact on
every framed input: branches no input reaches are removed (value sets of
:mod:`tpcore.programs.reach`), queries that match the same key share a branch, and in the
tpcore style modules no prediction depends on are not written, variables with one value (or
equal classifier rows) are literals, and an MLP reads the arguments its table depends on,
written as key sets with the default that takes the fewest lines, as tests on one argument
(:func:`tpcore.programs.rules.fit_sets`), or, numerical, as thresholds and straight cuts
(:func:`tpcore.programs.rules.fit`), whichever is shortest. Lines have at most 88 characters,
sets one element per line when they do not fit on one (black's layout).

Two styles: ``"tpcore"`` needs the standard library only and runs as ``python NAME.py 3 1 4 2``;
``"published"`` writes the authors' format (pandas classifier boilerplate, their
``select_closest``), which requires every categorical head to use the ``published`` rule.
Host-only code (NumPy and the standard library).
"""

from __future__ import annotations

import json
import keyword
import shlex
from pathlib import Path
from typing import Any

import numpy as np

from tpcore.counts import EXPERTS, only_expert
from tpcore.errors import TpcoreError
from tpcore.io import write_text
from tpcore.programs import library, rules, weights_csv
from tpcore.programs.compress import MlpPlan, Plan, mlp_plan, plan
from tpcore.programs.interpret import predict
from tpcore.programs.ir import (
    ExpertCount,
    Head,
    Label,
    Mlp,
    PrefixCount,
    Program,
    RunningCount,
    check_name,
    expert_rule,
)

WIDTH = 88
STYLES = ("tpcore", "published")
EXPERT_CODE = {"total_count": "len(tokens)", "token_count": "hist[tokens[t]]",
               "most_frequent": "int(hist[tokens[t]] == max(hist.values()))",
               "seen_once": "int(hist[tokens[t]] == 1)",
               "relative_frequency": "hist[tokens[t]] / len(tokens)"}
"""Each counting expert as a Python expression (``hist``: counts of the non-padding tokens)."""


def literal(x: Label) -> str:
    """Python literal for a label: double-quoted strings (escaped as JSON, which Python reads
    back as the same string), plain numbers. Labels enter generated code only through here."""
    if isinstance(x, str):
        return json.dumps(x)
    if isinstance(x, float) and x.is_integer():
        return str(int(x))
    return repr(x)


def _doc(text: str) -> str:
    """``text`` escaped for a docstring: backslashes and double quotes, so nothing in it can end
    the string."""
    return text.replace("\\", "\\\\").replace('"', '\\"')


def _singular(name: str) -> str:
    """``name`` without a trailing ``s`` (an argument name), unless that leaves no name."""
    short = library.stem(name)
    return short if short.isidentifier() and not keyword.iskeyword(short) else name


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


def _wrap(indent: int, head: str, items: list[str], tail: str, sep: str = ", ") -> list[str]:
    """``head + items + tail`` on one line if it fits, else one item per line (black style)."""
    pad = " " * indent
    one = f"{pad}{head}{sep.join(items)}{tail}"
    if len(one) <= WIDTH:
        return [one]
    inner = " " * (indent + 4)
    joined = f"{inner}{sep.join(items)}"
    if len(joined) <= WIDTH:
        return [f"{pad}{head}", joined, f"{pad}{tail.lstrip()}"]
    return [f"{pad}{head}", *(f"{inner}{it}," for it in items), f"{pad}{tail.lstrip()}"]


def _packed(indent: int, head: str, items: list[str], tail: str) -> list[str]:
    """:func:`_wrap`, except that items that need several lines fill each line."""
    lines = _wrap(indent, head, items, tail)
    if len(lines) <= 3:
        return lines
    rows: list[str] = []
    for it in items:
        if rows and len(f"{rows[-1]} {it},") <= WIDTH:
            rows[-1] += f" {it},"
        else:
            rows.append(f"{' ' * (indent + 4)}{it},")
    return [lines[0], *rows, lines[-1]]


def _banner(indent: int, name: str) -> str:
    text = f"{' ' * indent}# {name} "
    return text + "#" * max(4, 72 - len(text))


def _branches(indent: int, subject: str, groups: list[tuple[list[str], str]]) -> list[str]:
    """``if subject in {...}: <stmt>`` / ``elif`` chain; ``groups``: (literals, statement)."""
    lines: list[str] = []
    for n, (items, stmt) in enumerate(groups):
        kw = "if" if n == 0 else "elif"
        lines += _wrap(indent, f"{kw} {subject} in {{", items, "}:")
        lines.append(f"{' ' * (indent + 4)}{stmt}")
    return lines


class _Writer:
    """Builds the body of ``run`` module by module for one program and one style."""

    def __init__(self, program: Program, style: str, compress: bool):
        self.p, self.style, self.compress = program, style, compress
        self.plan: Plan | None = plan(program) if compress else None
        self.reach = self.plan.reach if self.plan is not None else {
            n: np.ones(v.size, dtype=bool) for n, v in program.variables.items()}
        rules = tuple(sorted({m.rule for m in program.modules
                              if isinstance(m, Head) and m.kind == "categorical"}))
        self.extra: dict[str, str] = {}  # helpers the modules written so far need: name -> text
        self._literals: dict[str, list[str]] = {}
        if style == "published":
            if any(isinstance(m, ExpertCount) for m in program.modules):
                raise TpcoreError("the published format has no expert gate (expert_count)")
            if rules and rules != ("published",):
                raise TpcoreError("the published format only has the 'published' select_closest "
                                  f"rule; this program uses {list(rules)}")
            self.helpers = {n: (src, "published" if n == "select_closest" else "")
                            for n, src in library.published_helpers(program.causal).items()}
        else:
            self.helpers = library.tpcore_helpers(rules, program.causal)
        self.select_name = {r: n for n, (_, r) in self.helpers.items() if r}
        self.pruned = self.plan if style == "tpcore" else None
        """The plan whose unwritten modules and constants the source follows (tpcore style)."""
        self.sections: dict[str, int] = {}
        """Lines written per module."""

    def constants(self) -> list[str]:
        """Compressed tpcore style: the variables written as one literal (constants, then the
        features whose classifier rows are equal on every value they take)."""
        if self.pruned is None:
            return []
        lines = []
        v = self.p.variables
        for fixed, title in ((True, "constant on every input"),
                             (False, "one of its values: equal classifier rows on all")):
            names = [n for n in v if n in self.pruned.constant
                     and (int(self.reach[n].sum()) == 1) == fixed]
            if names:
                lines.append(_banner(4, title))
            for n in names:
                lines.append(f"    {n} = [{literal(v[n].values[self.pruned.constant[n]])}]"
                             " * len(tokens)")
                module = self.p.producer(n)
                self.sections[module.name if module else n] = 1
        return lines + [""] if lines else []

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
        """Published style: the classifier-score boilerplate line(s) for ``var``."""
        if self.style != "published":
            return []
        frame = library.scores_name(var)
        if self.p.variables[var].kind == "numerical":
            return [f"    {frame} = classifier_weights.loc[",
                    f'        [("{var}", "_") for v in {var}]',
                    f"    ].mul({var}, axis=0)"]
        return _wrap(4, f"{frame} = classifier_weights.loc[",
                     [f'[("{var}", str(v)) for v in {var}]'], "]", sep="")

    def head(self, h: Head) -> list[str]:
        """``def predicate_L_H(q, k)`` and the head's two lines. Compressed: queries that look
        for one key value share a branch, and in pruned sources the queries that look for
        their own value (``return k == q``) too, when that takes fewer lines."""
        v = self.p.variables
        q, k = v[h.query], v[h.key]
        qa, ka = _singular(h.query), _singular(h.key)
        if qa == ka:
            qa, ka = f"q_{qa}", f"k_{ka}"
        fn = h.name.replace("attn", "predicate", 1)
        groups: dict[int, list[int]] = {}
        for qi, kj in enumerate(h.predicate.tolist()):
            if kj < 0 or self.compress and not (self.reach[h.query][qi] and self.reach[h.key][kj]):
                continue
            groups.setdefault(kj if self.compress else -2 - qi, []).append(qi)

        def branches(same: list[int]) -> list[str]:
            out = [([literal(q.values[i]) for i in same], f"return {ka} == {qa}")] if same else []
            for members in groups.values():
                rest = [i for i in members if i not in same]
                if rest:
                    kj = int(h.predicate[rest[0]])
                    out.append(([literal(q.values[i]) for i in rest],
                                f"return {ka} == {literal(k.values[kj])}"))
            return _branches(8, qa, out) or ["        return False"]

        body = branches([])
        own = [qi for members in groups.values() for qi in members
               if _same_label(q.values[qi], k.values[h.predicate[qi]])]
        if self.pruned is not None and len(own) > 1:
            body = min(body, branches(own), key=len)
        lines = [_banner(4, h.name), f"    def {fn}({qa}, {ka}):", *body]
        lines.append("")
        if h.kind == "categorical":
            sel, agg = self.select_name[h.rule], "aggregate"
        else:
            sel, agg = "select", "aggregate_sum"
        lines += _wrap(4, f"{h.name}_pattern = {sel}(", [h.key, h.query, fn], ")")
        lines += _wrap(4, f"{h.output} = {agg}(", [f"{h.name}_pattern", h.value], ")")
        return lines + self.scores(h.output) + [""]

    def prefix_count(self, m: PrefixCount) -> list[str]:
        """``out = [tokens[:i].count(token) ...]`` (PrefixSumCounts)."""
        lines = [_banner(4, m.name)]
        lines += _wrap(4, f"{m.output} = [", [f"tokens[:i].count({literal(m.token)}) for i in "
                                              "range(len(tokens))"], "]")
        return lines + self.scores(m.output) + [""]

    def running_count(self, m: RunningCount) -> list[str]:
        """``out = [tokens[:i + 1].count(tokens[i]) ...]`` (the own token's running count)."""
        lines = [_banner(4, m.name)]
        lines += _wrap(4, f"{m.output} = [", ["tokens[:i + 1].count(tokens[i]) for i in "
                                              "range(len(tokens))"], "]")
        return lines + self.scores(m.output) + [""]

    def expert_count(self, m: ExpertCount) -> list[str]:
        """The expert gate: the token counts and the expert's expression when the gate picks
        one expert for every framed input, else the gate's scores with its weights written
        out, the first highest score's expert, and the five experts' expressions."""
        p = self.p
        rule = expert_rule(m, p.tokens, p.bos, p.eos, p.pad, p.max_len)
        fixed = only_expert(rule)
        lines = [_banner(4, m.name), *(f"    # {text}" for text in rule_text(rule))]
        if fixed != "total_count":
            lines.append("    hist = {t: tokens.count(t) for t in VOCAB}")
        if fixed is not None:
            return lines + self.expert_line(4, m, fixed) + self.scores(m.output) + [""]
        self.extra["gate_score"] = library.GATE_SCORE
        lines.append("    gate = {  # expert: (bias, weight of each VOCAB token)")
        for e, b, row in zip(EXPERTS, m.bias.tolist(), m.weights.tolist()):
            lines += _packed(8, f'"{e}": ({literal(b)}, [', [literal(x) for x in row], "]),")
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
        return _wrap(indent, f"{m.output} = [", [f"{code} for t in range(len(tokens))"], "]")

    def mlp(self, m: Mlp) -> list[str]:
        """``def mlp_L_M(...)`` and its application. Full: every key of the table a branch, the
        IR's default last. Compressed: the arguments, table and keys of the MLP's plan
        (:func:`tpcore.programs.compress.mlp_plan`) as key sets with the default that takes the
        fewest lines, or, for a numerical MLP in the tpcore style, as rules
        (:func:`tpcore.programs.rules.fit`) when those are shorter; where an input may leave its
        listed values, every other output is a branch and the IR's default stays last."""
        v = self.p.variables
        if self.plan is None:
            mp = MlpPlan(m.inputs, m.table, np.ones(m.table.shape, dtype=bool))
        else:
            mp = self.plan.mlps.get(m.name) or mlp_plan(m, self.plan.sets)
        keys = [tuple(ix) for ix in np.argwhere(mp.domain).tolist()]
        inputs = list(mp.inputs)
        args = [_singular(x) for x in inputs]
        if len(args) == 2 and args[0] == args[1]:
            args[1] += "_2"
        fixed = self.plan is None or any(x in self.plan.sets.outside for x in m.inputs)
        options = []
        if not fixed and self.style == "tpcore" and keys:
            at = tuple(np.asarray(keys).T)
            labels = mp.table[at]
            if len(inputs) == 2 and len(keys) <= rules.MAX_SET_KEYS:
                options.append(self.set_lines(*rules.fit_sets(np.asarray(keys), labels),
                                              inputs, args, v[m.output].values))
            if m.kind == "numerical":
                values = np.stack([np.asarray(v[x].values)[i] for x, i in zip(inputs, at)], 1)
                fitted = rules.fit(values, labels)
                if fitted is not None:
                    options.append(self.rule_lines(fitted, args, v[m.output].values))
        if not options or _fewest_key_set_lines(mp.table, keys) < min(map(len, options)):
            options.append(self.key_sets(m, mp, keys, args, fixed))
        body = min(options, key=len)
        lines = [_banner(4, m.name), f"    def {m.name}({', '.join(args)}):"]
        lines += [f"        {line}" for line in body] + [""]
        if len(inputs) == 1:
            call, loop = f"{m.name}(k0)", f"k0 in {inputs[0]}"
        else:
            call, loop = f"{m.name}(k0, k1)", f"k0, k1 in zip({', '.join(inputs)})"
        if len(f"        {call} for {loop}") <= WIDTH:
            lines += _wrap(4, f"{m.output} = [", [f"{call} for {loop}"], "]")
        else:
            lines += [f"    {m.output} = [", f"        {call}", f"        for {loop}", "    ]"]
        return lines + self.scores(m.output) + [""]

    def key_sets(self, m: Mlp, mp: MlpPlan, keys: list[tuple[int, ...]], args: list[str],
                 fixed: bool) -> list[str]:
        """The body ``key = ...``, ``if key in {...}: return v`` per output, then the default
        return (lines as indented in the function, less 8): when ``fixed`` the IR's default
        (every other output a branch; full: every output), else the output whose branch would
        take the most lines."""
        out = self.p.variables[m.output]
        groups = {}
        for o, members in _by_output(mp.table, keys).items():
            labels = [self.key_literal(list(mp.inputs), ix) for ix in members]
            groups[o] = [x[8:] for x in _wrap(8, "if key in {", labels, "}:")] + [
                f"    return {literal(out.values[o])}"]
        if fixed:
            default = m.default
            if self.compress:
                groups.pop(default, None)
        else:
            default = max(groups, key=lambda o: (len(groups[o]), -o)) if groups else m.default
            groups.pop(default, None)
        body = ["key = " + (args[0] if len(args) == 1 else f"({', '.join(args)})")]
        for n, group in enumerate(groups.values()):
            body += [group[0] if n == 0 else "el" + group[0], *group[1:]]
        return body + [f"return {literal(out.values[default])}"]

    def key_literal(self, inputs: list[str], ix: tuple[int, ...]) -> str:
        vals = [self.literals(x)[i] for x, i in zip(inputs, ix)]
        return vals[0] if len(vals) == 1 else f"({', '.join(vals)})"

    def literals(self, name: str) -> list[str]:
        """The literals of variable ``name``'s values (computed once)."""
        if name not in self._literals:
            self._literals[name] = [literal(x) for x in self.p.variables[name].values]
        return self._literals[name]

    def set_lines(self, tests: list[rules.SetTest], default: int, inputs: list[str],
                  args: list[str], labels: tuple) -> list[str]:
        """The body of a two-argument MLP written as :func:`tpcore.programs.rules.fit_sets`'s
        decision list (lines as indented in the function, less 8)."""
        body: list[str] = []
        for t in tests:
            if t.arg is None:
                subject = f"({', '.join(args)})"
                items = [self.key_literal(inputs, ix) for ix in t.values]
            else:
                subject = args[t.arg]
                items = [self.literals(inputs[t.arg])[i] for i in t.values]
            body += [x[8:] for x in _wrap(8, f"if {subject} in {{", items, "}:")]
            body.append(f"    return {literal(labels[t.out])}")
        return body + [f"return {literal(labels[default])}"]

    def rule_lines(self, r: rules.Rules, args: list[str], labels: tuple) -> list[str]:
        """The body of a numerical MLP written as rules (indented by 8 in the function)."""
        body: list[str] = []
        by_output: dict[int, list[str]] = {}
        for key, o in r.exceptions:
            by_output.setdefault(o, []).append(
                literal(key[0]) if len(key) == 1 else f"({', '.join(map(literal, key))})")
        subject = args[0] if len(args) == 1 else f"({', '.join(args)})"
        for o, keys in by_output.items():
            body += [x[8:] for x in _wrap(8, f"if {subject} in {{", keys, "}:")]
            body.append(f"    return {literal(labels[o])}")
        outer = args[r.outer] if r.outer is not None else None
        inner = args[1 - r.outer] if r.outer is not None else args[0]
        for band in r.bands:
            pad = ""
            if band.upto is not None:
                body.append(f"if {outer} <= {literal(band.upto)}:")
                pad = "    "
            for cut in band.cuts:
                body += [f"{pad}if {_cut_text(cut, inner, outer)}:",
                         f"{pad}    return {literal(labels[cut.out])}"]
            body.append(f"{pad}return {literal(labels[band.last])}")
        return body

def _same_label(a: Label, b: Label) -> bool:
    """Whether labels ``a`` and ``b`` are equal in the generated program (``a == b``, both
    strings or both numbers)."""
    return isinstance(a, str) == isinstance(b, str) and a == b


def _cut_text(cut: rules.Cut, inner: str, outer: str | None) -> str:
    """``inner <= r`` or ``q * inner <= p * outer + r`` with the terms that are not zero."""
    left = inner if cut.q == 1 else f"{cut.q} * {inner}"
    if cut.p == 0:
        return f"{left} <= {literal(cut.r)}"
    right = outer if cut.p == 1 else f"-{outer}" if cut.p == -1 else f"{cut.p} * {outer}"
    if cut.r:
        right += f" + {literal(cut.r)}" if cut.r > 0 else f" - {literal(-cut.r)}"
    return f"{left} <= {right}"


def _fewest_key_set_lines(table: np.ndarray, keys: list[tuple[int, ...]]) -> int:
    """A lower bound on the lines of :meth:`_Writer.key_sets`: two per output but one, plus
    one per key of an output with more keys than fit on a line (44 of two characters)."""
    if not keys:
        return 0
    counts = np.bincount(table[tuple(np.asarray(keys).T)])
    counts = np.sort(counts[counts > 0])[:-1]
    return 2 + int(np.sum(np.where(counts > 44, counts + 2, 2)))


def _by_output(table: np.ndarray, keys: list[tuple[int, ...]]) -> dict[int, list]:
    """``{output index: [keys]}`` in order of first appearance."""
    out: dict[int, list] = {}
    for ix in keys:
        out.setdefault(int(table[ix]), []).append(ix)
    return out


def source(program: Program, style: str = "tpcore", compress: bool = True,
           weights_file: str | None = None) -> str:
    """The program's Python source (see the module docstring for styles and compression)."""
    return _render(program, style, compress, weights_file)[0]


def _render(program: Program, style: str, compress: bool,
            weights_file: str | None) -> tuple[str, Plan | None, dict[str, int]]:
    """The source, the plan its classifier follows when modules were pruned, and the lines of
    each module written (its function and lines, or its literal)."""
    if style not in STYLES:
        raise TpcoreError(f"unknown style {style!r}; expected one of {STYLES}")
    p = program
    w = _Writer(p, style, compress)
    weights_file = weights_file or f"{p.name}_weights.csv"
    body: list[str] = ["def run(tokens):"]
    if style == "published":
        body += ["    # classifier weights ##########################################",
                 *_wrap(4, "classifier_weights = pd.read_csv(",
                        [library.weights_beside(literal(weights_file)), "index_col=[0, 1]",
                         'dtype={"feature": str}'], ")"),
                 "    # inputs #####################################################",
                 *w.scores("tokens"), ""]
    else:
        body += ['    """Predictions for one input framed as the task frames it, e.g.',
                 f'    {_doc(_example(p))}."""']
    body.append("    positions = list(range(len(tokens)))")
    body += w.scores("positions") + [""] if style == "published" else []
    body.append("    ones = [1 for _ in range(len(tokens))]")
    body += w.scores("ones")
    body.append("")
    body += w.constants()
    for m in p.modules:
        if w.pruned is not None and m.name not in w.pruned.written:
            continue
        if isinstance(m, Head):
            lines = w.head(m)
        elif isinstance(m, PrefixCount):
            lines = w.prefix_count(m)
        elif isinstance(m, RunningCount):
            lines = w.running_count(m)
        elif isinstance(m, ExpertCount):
            lines = w.expert_count(m)
        else:
            lines = w.mlp(m)
        w.sections[m.name] = len(lines)
        body += lines
    if style == "published":
        frames = [library.scores_name(f) for f in published_features(p)]
        body += ["    feature_logits = pd.concat(",
                 "        [",
                 "            df.reset_index()",
                 "            for df in [",
                 *(f"                {x}," for x in frames),
                 "            ]",
                 "        ]",
                 "    )",
                 "    logits = feature_logits.groupby(level=0).sum(numeric_only=True).to_numpy()",
                 "    classes = classifier_weights.columns.to_numpy()",
                 "    predictions = classes[logits.argmax(-1)]"]
    else:
        feats = [f'("{f}", {f})' for f in w.features()]
        body += _wrap(4, "features = [", feats, "]")
        body.append("    predictions = classify(features)")
    if p.passthrough and p.bos is not None:
        body += [f"    if tokens[0] == {literal(p.bos)}:",
                 f"        predictions[0] = {literal(p.bos)}"]
    if p.passthrough and p.eos is not None:
        body += [f"    if tokens[-1] == {literal(p.eos)}:",
                 f"        predictions[-1] = {literal(p.eos)}"]
    body.append("    return predictions.tolist()" if style == "published"
                else "    return predictions")
    helpers = [src.strip("\n") for name, (src, _) in w.helpers.items() if w.uses(name)]
    helpers += [src.strip("\n") for src in w.extra.values()]
    if style == "published":
        head = ["import os", "", "import numpy as np", "import pandas as pd"]
    else:
        run = " ".join(shlex.quote(t) for t in _user_tokens(p))
        head = [f'"""{p.name}: a Transformer Program generated by tpcore.',
                "",
                _doc(f"Run: python {p.name}.py {run}"),
                _doc(f"Classifier weights: {weights_file} beside this file."),
                '"""',
                "",
                "import csv",
                "import functools",
                "import os",
                *(["import struct"] if "float32" in w.extra else []),
                "import sys",
                "",
                f"WEIGHTS = {literal(weights_file)}",
                *_wrap(0, "VOCAB = [", [literal(t) for t in p.tokens.values], "]"),
                f"MAX_LEN = {p.max_len}",
                f"BOS, EOS = {_opt(p.bos)}, {_opt(p.eos)}"]
        helpers += [library.LOAD_WEIGHTS.strip("\n"), library.CLASSIFY.strip("\n")]
    parts = ["\n".join(head), *helpers, "\n".join(body).rstrip("\n")]
    text = "\n\n\n".join(parts) + "\n"
    if style == "tpcore":
        text += "\n\n" + library.MAIN.strip("\n") + "\n"
    else:
        text += "\n\n" + "\n".join(_published_examples(p)) + "\n"
    return text, w.pruned, w.sections


def _published_examples(p: Program) -> list[str]:
    """The published format's closing block: one example input and, as its ``y``, what this
    program predicts for it (the interpreter's answer), then the loop that prints ``run``'s."""
    x = p.frame(_user_tokens(p))
    rows = [[literal(t) for t in row] for row in (x, predict(p, [x], "numpy")[0])]
    one = f"examples = [([{', '.join(rows[0])}], [{', '.join(rows[1])}])]"
    if len(one) <= WIDTH:
        lines = [one]
    else:
        lines = ["examples = [", "    (", *(line for r in rows for line in
                                           _wrap(8, "[", r, "],")), "    ),", "]"]
    return lines + library.PUBLISHED_EXAMPLES.strip("\n").splitlines()


def _opt(x: str | None) -> str:
    return "None" if x is None else literal(x)


def _user_tokens(p: Program) -> list[str]:
    specials = {p.bos, p.eos, p.pad}
    return [t for t in map(str, p.tokens.values) if t not in specials][:4]


def _example(p: Program) -> str:
    return "run([" + ", ".join(repr(t) for t in p.frame(_user_tokens(p))[:6]) + "])"


def published_features(program: Program) -> tuple[str, ...]:
    """The classifier features the published format sums: the program's, and ``ones`` too when
    the classifier has a nonzero bias (that format has no bias: it goes into the ``ones`` row,
    and ``ones`` is 1 at every position)."""
    c = program.classifier
    extra = ("ones",) if np.any(c.bias[c.kept()] != 0) and "ones" not in c.features else ()
    return c.features + extra


def write(program: Program, path: str | Path, style: str = "tpcore",
          compress: bool = True) -> tuple[Path, Path]:
    """Write ``NAME.py`` and ``NAME_weights.csv`` atomically; ``path`` is the ``.py`` file or a
    folder (then ``<folder>/<program name>.py``, which must resolve to a file inside it).
    Returns both paths."""
    path = Path(path)
    if path.suffix != ".py":
        folder, path = path, path / f"{check_name(program.name, 'program name')}.py"
        for p in (path, path.with_name(f"{path.stem}_weights.csv")):
            if p.resolve().parent != folder.resolve():
                raise TpcoreError(f"{p} resolves outside the output folder {folder}")
    csv_path = path.with_name(f"{path.stem}_weights.csv")
    text, pruned, _ = _render(program, style, compress, csv_path.name)
    write_text(csv_path, weights_csv.write(
        program, published=style == "published", features=None if pruned is None else
        pruned.features, reach=None if pruned is None else pruned.reach))
    write_text(path, text)
    return path, csv_path


def line_counts(program: Program) -> dict[str, int]:
    """Program length in lines before and after compression (the paper's Table 4)."""
    return {k: v["total"] for k, v in module_lines(program).items()}


def module_lines(program: Program) -> dict[str, dict[str, int]]:
    """Lines of the source before (``"full"``) and after (``"pruned"``) compression: per
    module (0 when not written), ``"other"`` (header, library functions, inputs, classifier,
    ``__main__``) and ``"total"``."""
    out: dict[str, dict[str, int]] = {}
    for key, compress in (("full", False), ("pruned", True)):
        text, _, sections = _render(program, "tpcore", compress, None)
        total = len(text.splitlines())
        out[key] = {**{m.name: sections.get(m.name, 0) for m in program.modules},
                    "other": total - sum(sections.values()), "total": total}
    return out
