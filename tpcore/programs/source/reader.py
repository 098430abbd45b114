"""Import a program file (the published format, or a tpcore-generated one) into the IR without
executing it.

The file is parsed with :mod:`ast` and accepted only when it has the grammar of such programs:
the library helpers (each must equal a known text, which fixes the ``select_closest`` rule and
causality), ``run(tokens)`` made of the input lines, one ``predicate_L_H`` function per head with
``if q in {...}: return k == v`` branches (:mod:`~tpcore.programs.source.predicates`) and its
``select_closest``/``select`` + ``aggregate``/``aggregate_sum`` lines, one ``mlp_L_M`` function
per MLP made of ``if`` tests and returns of literals (:mod:`~tpcore.programs.source.mlps`),
applied by a comprehension, variables of one value (``X_outputs = [<literal>] *
len(tokens)``, read as a one-entry table over ``ones``), the classifier boilerplate (replaced
by reading the weights CSV beside the file), the BOS/EOS pass-through, a trailing examples
block, and tpcore's prefix and running counts (``prefix_count_X = [tokens[:i].count("t")
for i in range(len(tokens))]``, ``running_count = [tokens[:i + 1].count(tokens[i]) for i in
range(len(tokens))]``). The lines one format only has are read by that format's module
(:mod:`~tpcore.programs.source.tpcore_style`, :mod:`~tpcore.programs.source.published_style`).
Anything else (other imports, calls to anything else, other statements) is refused with an
error naming the file and line. The records the pass yields are built into the IR by
:mod:`~tpcore.programs.source.build`. Host-only code.
"""

from __future__ import annotations

import ast
import keyword
import re
from pathlib import Path

from tpcore.errors import TpcoreError
from tpcore.programs.ir import LIMITS, Program, read_limited
from tpcore.programs.source import published_style, templates, tpcore_style, weights_csv
from tpcore.programs.source.build import build
from tpcore.programs.source.grammar import Reader, canon, dump, is_name
from tpcore.programs.source.parsed import Constant, Count, Lookup, Pattern

HEAD_NAME = re.compile(r"(num_)?attn_\d+_\d+$")
MLP_NAME = re.compile(r"(num_)?mlp_\d+_\d+$")
PREDICATE_NAME = re.compile(r"(num_)?predicate_\d+_\d+")
PREFIX_NAME = re.compile(r"prefix_count_\w+$")
RUNNING_NAME = "running_count"
IMPORTS = {"published": published_style.IMPORTS, "tpcore": tpcore_style.IMPORTS}
"""The modules each format imports (a file importing ``os`` alone is taken as published)."""
RETURNS = {"published": published_style.RETURN, "tpcore": tpcore_style.RETURN}
"""The last line of ``run`` in each format (tpcore's while no line has told the format)."""
FIXED = {"positions": templates.POSITIONS, "ones": templates.ONES,
         "logits": published_style.LOGITS, "classes": published_style.CLASSES}
"""Lines of ``run`` that are always written the same, by the variable they define."""
PREDICTIONS = (published_style.PREDICTIONS, tpcore_style.PREDICTIONS)
"""Either format's ``predictions`` line."""


def _known_helpers() -> dict[str, dict[tuple[str, ...], tuple[str, str, bool]]]:
    """``{name: {dump: (style, rule, causal)}}`` for every accepted helper text."""
    out: dict[str, dict[tuple[str, ...], tuple[str, str, bool]]] = {}
    for style, texts in (("published", published_style.helper_texts()),
                         ("tpcore", tpcore_style.helper_texts())):
        for name, text, rule, causal in texts:
            out.setdefault(name, {})[canon(text)] = (style, rule, causal)
    return out


class ProgramReader(Reader):
    """One pass over a program file: its module-level statements, then ``run``'s, each
    checked as it comes; the predicate and MLP bodies are read when the IR is built."""

    # module level ---------------------------------------------------------------------------

    def module(self) -> None:
        known = _known_helpers()
        body = self.tree.body
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                and isinstance(body[0].value.value, str):
            body = body[1:]
        seen_run = False
        for node in body:
            if isinstance(node, ast.Import):
                self.imports(node)
            elif isinstance(node, ast.FunctionDef) and node.name == "run" and not seen_run:
                self.run(node)
                seen_run = True
            elif isinstance(node, ast.FunctionDef) and node.name in known and not seen_run:
                match = known[node.name].get(dump(node))
                if match is None:
                    self.fail(node, f"helper {node.name!r} differs from the known library text")
                style, rule, causal = match
                self.set_style(style, node)
                if rule:
                    self.rules[node.name] = rule
                if node.name in ("select_closest", "select_closest_published", "select"):
                    self.causal.add(causal)
                self.funcs[node.name] = node
            elif isinstance(node, ast.Assign) and not seen_run:
                tpcore_style.read_constant(self, node)
            elif seen_run and self.trailer(node):
                continue
            else:
                self.fail(node, f"statement not allowed here ({type(node).__name__})")
        if not seen_run:
            self.fail(None, "no run(tokens) function")
        if len(self.causal) > 1:
            self.fail(None, "helpers disagree on causal masking")

    def imports(self, node: ast.Import) -> None:
        for alias in node.names:
            styles = [st for st in ([self.style] if self.style else IMPORTS)
                      if IMPORTS[st].get(alias.name, "-") == alias.asname]
            if not styles:
                self.fail(node, f"import of {alias.name!r} is not allowed in a program")
            self.set_style(styles[0], node)

    def trailer(self, node: ast.AST) -> bool:
        """The published examples block, or tpcore's ``__main__`` block."""
        if isinstance(node, ast.If):
            tpcore_style.read_main(self, node)
            return True
        return published_style.read_trailer(self, node)

    # run ------------------------------------------------------------------------------------

    def run(self, fn: ast.FunctionDef) -> None:
        if dump(fn.args) != dump(ast.parse(f"{templates.RUN} pass").body[0].args) \
                or fn.decorator_list or fn.returns:
            self.fail(fn, f"run must be declared as {templates.RUN}")
        body = fn.body
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            body = body[1:]
        for node in body:
            if isinstance(node, ast.FunctionDef):
                self.local_function(node)
            elif isinstance(node, ast.Assign):
                self.assign(node)
            elif isinstance(node, ast.If):
                self.passthrough_if(node)
            elif isinstance(node, ast.Return):
                want = RETURNS[self.style or "tpcore"]
                if dump(node) != canon(want):
                    self.fail(node, f"expected {want!r}")
            else:
                self.fail(node, f"statement not allowed in run ({type(node).__name__})")

    def local_function(self, fn: ast.FunctionDef) -> None:
        args = fn.args
        names = [a.arg for a in args.args]
        if (args.posonlyargs or args.vararg or args.kwonlyargs or args.kwarg or args.defaults
                or fn.decorator_list or fn.returns or any(a.annotation for a in args.args)):
            self.fail(fn, f"function {fn.name!r} must take plain positional arguments")
        if PREDICATE_NAME.fullmatch(fn.name) and len(names) == 2:
            self.funcs[fn.name] = fn
        elif MLP_NAME.match(fn.name) and len(names) in (1, 2) and len(set(names)) == len(names):
            self.funcs[fn.name] = fn
        else:
            self.fail(fn, f"unexpected function {fn.name!r}({', '.join(names)})")

    def assign(self, node: ast.Assign) -> None:
        if len(node.targets) != 1 or not isinstance(node.targets[0], ast.Name):
            self.fail(node, "only assignments to a single name are allowed in run")
        name = node.targets[0].id
        value = node.value
        if name in FIXED:
            if dump(node) != canon(FIXED[name]):
                self.fail(node, f"unexpected definition of {name!r}")
        elif name == "predictions":
            if dump(node) not in [canon(text) for text in PREDICTIONS]:
                self.fail(node, "unexpected definition of 'predictions'")
        elif name == "classifier_weights":
            published_style.read_csv(self, node)
        elif name.endswith("_scores") and name != "feature_scores":
            published_style.read_scores(self, node, name)
        elif name == "feature_logits":
            published_style.read_concat(self, node)
        elif name == "features":
            tpcore_style.read_features(self, node)
        elif PREFIX_NAME.match(name):
            self.prefix_count(node, name)
        elif name == RUNNING_NAME:
            self.running_count(node, name)
        elif name.endswith("_outputs") and isinstance(value, ast.BinOp):
            self.constant_output(node, name)
        elif name.endswith("_pattern") and HEAD_NAME.match(name[: -len("_pattern")]):
            self.pattern(node, name[: -len("_pattern")], value)
        elif name.endswith("_outputs"):
            self.outputs(node, name, value)
        else:
            self.fail(node, f"unexpected assignment to {name!r}")

    def constant_output(self, node: ast.Assign, name: str) -> None:
        """``NAME_outputs = [<literal>] * len(tokens)``: a variable with one value."""
        value = node.value
        if not (isinstance(value.op, ast.Mult) and isinstance(value.left, ast.List)
                and len(value.left.elts) == 1 and isinstance(value.right, ast.Call)
                and is_name(value.right.func, "len") and not value.right.keywords
                and len(value.right.args) == 1 and is_name(value.right.args[0], "tokens")):
            self.fail(node, f"{name} must be [<literal>] * len(tokens)")
        if name in self.defined:
            self.fail(node, f"{name} is defined twice")
        self.modules.append(Constant(name[: -len("_outputs")], node,
                                     self.const(value.left.elts[0])))
        self.defined.add(name)

    def pattern(self, node: ast.Assign, head: str, value: ast.AST) -> None:
        numerical = head.startswith("num_")
        fn_name = templates.predicate_name(head)
        call = value
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name)
                and len(call.args) == 3 and not call.keywords
                and all(isinstance(a, ast.Name) for a in call.args)):
            self.fail(node, f"{head}_pattern must be select_closest/select(keys, queries, "
                      f"{fn_name})")
        sel = call.func.id
        keys, queries, pred = (a.id for a in call.args)
        if numerical and sel != templates.SELECT or not numerical and sel not in self.rules:
            self.fail(node, f"{head} may not call {sel!r} here")
        if sel not in self.funcs:
            self.fail(node, f"helper {sel!r} is not defined")
        if pred != fn_name or fn_name not in self.funcs:
            self.fail(node, f"{head}_pattern must use the function {fn_name} defined above")
        for v in (keys, queries):
            if v not in self.defined:
                self.fail(node, f"{v!r} is not defined above")
        self.modules.append(Pattern(head, node, queries, keys, self.rules.get(sel, ""),
                                    self.funcs[fn_name]))

    def prefix_count(self, node: ast.Assign, name: str) -> None:
        """``prefix_count_X = [tokens[:i].count("t") for i in range(len(tokens))]``."""
        try:
            token = node.value.elt.args[0].value
        except (AttributeError, IndexError):
            self.fail(node, f"{name} must be [tokens[:i].count(TOKEN) for i in ...]")
        want = templates.prefix_count(name, repr(token)).text
        if not isinstance(token, str) or dump(node) != canon(want) or name in self.defined:
            self.fail(node, f"{name} must be [tokens[:i].count(TOKEN) for i in ...]")
        self.modules.append(Count(name, node, token))
        self.defined.add(name)

    def running_count(self, node: ast.Assign, name: str) -> None:
        """``running_count = [tokens[:i + 1].count(tokens[i]) for i in range(len(tokens))]``."""
        if dump(node) != canon(templates.running_count(name).text) or name in self.defined:
            self.fail(node, f"{name} must be [tokens[:i + 1].count(tokens[i]) for i in ...]")
        self.modules.append(Count(name, node, None))
        self.defined.add(name)

    def outputs(self, node: ast.Assign, name: str, value: ast.AST) -> None:
        mod = name[: -len("_outputs")]
        if HEAD_NAME.match(mod):
            agg = templates.AGGREGATE["numerical" if mod.startswith("num_") else "categorical"]
            last = self.modules[-1] if self.modules else None
            if not (isinstance(last, Pattern) and last.name == mod and last.value is None):
                self.fail(node, f"{name} must follow {mod}_pattern")
            vals = getattr(value, "args", [None, None])
            val = getattr(vals[-1], "id", None) if len(vals) == 2 else None
            if val is None or dump(node) != canon(templates.aggregated(name, agg, mod, val).text):
                self.fail(node, f"{name} must be {agg}({mod}_pattern, VALUES)")
            if val not in self.defined or agg not in self.funcs:
                self.fail(node, f"{val!r} or {agg!r} is not defined above")
            last.value = val
        elif MLP_NAME.match(mod):
            fn = self.funcs.get(mod)
            if fn is None:
                self.fail(node, f"{name} needs the function {mod} defined above")
            try:
                if len(fn.args.args) == 1:
                    inputs = [value.generators[0].iter.id]
                else:
                    inputs = [a.id for a in value.generators[0].iter.args]
            except (AttributeError, IndexError):
                self.fail(node, f"unexpected application of {mod}")
            call, loop = templates.applied(mod, len(fn.args.args), inputs)
            if dump(node) != canon(templates.listed(name, f"{call} for {loop}").text):
                self.fail(node, f"unexpected application of {mod}")
            for v in inputs:
                if v not in self.defined:
                    self.fail(node, f"{v!r} is not defined above")
            self.modules.append(Lookup(mod, node, inputs, fn))
        else:
            self.fail(node, f"unexpected variable {name!r}")
        self.defined.add(name)

    def passthrough_if(self, node: ast.If) -> None:
        for index, role in (("0", "bos"), ("-1", "eos")):
            try:
                tok = node.test.comparators[0].value
            except (AttributeError, IndexError):
                break
            want = "\n".join(templates.passthrough(index, repr(tok)))
            if isinstance(tok, str) and dump(node) == canon(want) and role not in \
                    self.passthrough:
                self.passthrough[role] = tok
                return
        self.fail(node, "only the BOS/EOS pass-through if-statements are allowed in run")


def _parsed(text: str, filename: str) -> ProgramReader:
    p = ProgramReader(text, filename)
    p.module()
    return p


def _with_weights(p: ProgramReader, weights: str, name: str) -> Program:
    classes, rows = weights_csv.read(weights, f"weights of {p.file}")
    return build(p, classes, rows, name)


def parse_source(text: str, weights: str, filename: str = "<program>",
                 name: str | None = None) -> Program:
    """Import program source ``text`` with its weights CSV text ``weights`` (nothing is run)."""
    return _with_weights(_parsed(text, filename), weights,
                         name or program_name(Path(filename).stem))


def _weights_beside(path: Path, p: ProgramReader) -> Path:
    beside = path.with_name(templates.weights_csv_name(path.stem))
    if beside.exists() or p.weights_name is None:
        return beside
    return path.with_name(p.weights_name)


def parse_file(path: str | Path) -> Program:
    """Import the program file ``path`` and the weights CSV beside it (each at most
    ``LIMITS.file_bytes``); the program is named after the file (:func:`program_name`)."""
    path = Path(path)
    p = _parsed(read_limited(path, "program file"), str(path))
    csv_path = _weights_beside(path, p)
    if not csv_path.is_file():
        raise TpcoreError(f"{path}: weights file {csv_path} not found")
    return _with_weights(p, read_limited(csv_path, "weights file"), program_name(path.stem))


def program_name(stem: str) -> str:
    """A program name from a file name: its ASCII letters, digits and underscores, anything
    else as ``_``, at most ``LIMITS.name_chars`` characters, ``p_`` in front when it would
    start with a digit or be a keyword."""
    name = re.sub(r"[^A-Za-z0-9_]", "_", stem)
    if not name or name[0].isdigit() or keyword.iskeyword(name):
        name = f"p_{name}"
    return name[: LIMITS.name_chars]
