"""Import a program file (the published format, or a tpcore-generated one) into the IR without
executing it.

The file is parsed with :mod:`ast` and accepted only when it has the grammar of such programs:
the library helpers (each must equal a known text, which fixes the ``select_closest`` rule and
causality), ``run(tokens)`` made of the input lines, one ``predicate_L_H`` function per head with
``if q in {...}: return k == v`` branches and its ``select_closest``/``select`` +
``aggregate``/``aggregate_sum`` lines, one ``mlp_L_M`` function per MLP made of ``if`` tests
(``x in {...}`` on the key or an argument, ``<=`` between sums of literals and arguments times
literals) and returns of literals, ending in a default ``return`` (:meth:`_Parser.mlp`),
applied by a comprehension, variables of one value (``X_outputs = [<literal>] *
len(tokens)``, read as a one-entry table over ``ones``), the classifier boilerplate (replaced
by reading the weights CSV beside the file), the BOS/EOS pass-through, a trailing examples
block, and tpcore's prefix and running counts (``prefix_count_X = [tokens[:i].count("t")
for i in range(len(tokens))]``, ``running_count = [tokens[:i + 1].count(tokens[i]) for i in
range(len(tokens))]``). Anything else (other imports, calls
to anything else, other statements) is refused with an error naming the file and line.
Host-only code.
"""

from __future__ import annotations

import ast
import csv
import io
import keyword
import math
import re
from pathlib import Path
from typing import Any, NoReturn

import numpy as np

from tpcore.errors import TpcoreError
from tpcore.programs import library
from tpcore.programs.ir import (
    LIMITS,
    Classifier,
    Head,
    Label,
    Mlp,
    Module,
    PrefixCount,
    Program,
    RunningCount,
    Variable,
    check_label,
    check_size,
    numerical_range,
    read_limited,
    shorten,
)

SAME = object()
"""A predicate branch ``return k == q``: the key value equal to the query value."""
PLACEHOLDER = "_"
"""The weights CSV's value for a numerical feature's row, and the authors' unnamed values."""
HEAD_NAME = re.compile(r"(num_)?attn_\d+_\d+$")
MLP_NAME = re.compile(r"(num_)?mlp_\d+_\d+$")
PREFIX_NAME = re.compile(r"prefix_count_\w+$")
RUNNING_NAME = "running_count"
IMPORTS = {"published": {"numpy": "np", "os": None, "pandas": "pd"},
           "tpcore": {"csv": None, "functools": None, "os": None, "sys": None}}


class ProgramSyntaxError(TpcoreError):
    """The file is not a program in an accepted format; the message names the file and line."""


def _dump(node: ast.AST) -> tuple[str, ...]:
    """The tree under ``node`` without docstrings or positions, for comparing with canonical
    texts: node types, list lengths and constant values in pre-order (which determine the tree).
    Iterative, so any depth the parser accepts is safe."""
    if isinstance(node, ast.FunctionDef | ast.Module) and node.body and isinstance(
            node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant) and isinstance(
            node.body[0].value.value, str):
        node = type(node)(**{**{f: getattr(node, f) for f in node._fields},
                             "body": node.body[1:]})
    out: list[str] = []
    stack: list[Any] = [node]
    while stack:
        x = stack.pop()
        if isinstance(x, ast.AST):
            out.append(type(x).__name__)
            stack.extend(getattr(x, f, None) for f in reversed(x._fields))
        elif isinstance(x, list):
            out.append(f"[{len(x)}]")
            stack.extend(reversed(x))
        else:
            out.append(f"{type(x).__name__}:{x!r}")
    return tuple(out)


def _depth(tree: ast.AST) -> int:
    """Nesting depth of ``tree``; an ``elif`` continues its ``if`` at the same depth (iterative,
    as the chains of branches of long programs are deep)."""
    deepest = 0
    stack = [(tree, 0)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        for child in ast.iter_child_nodes(node):
            same = isinstance(node, ast.If) and node.orelse == [child]
            stack.append((child, depth if same else depth + 1))
    return deepest


def _canon(text: str) -> tuple[str, ...]:
    tree = ast.parse(text.strip("\n"))
    return _dump(tree.body[0]) if len(tree.body) == 1 else _dump(tree)


def _known_helpers() -> dict[str, dict[str, tuple[str, str, bool]]]:
    """``{name: {dump: (style, rule, causal)}}`` for every accepted helper text."""
    out: dict[str, dict[str, tuple[str, str, bool]]] = {}
    for causal in (False, True):
        for name, text in library.published_helpers(causal).items():
            rule = "published" if name == "select_closest" else ""
            out.setdefault(name, {})[_canon(text)] = ("published", rule, causal)
        for rules in (("closest",), ("published",), ("closest", "published")):
            for name, (text, rule) in library.tpcore_helpers(rules, causal).items():
                out.setdefault(name, {})[_canon(text)] = ("tpcore", rule, causal)
    for name, text in (("load_weights", library.LOAD_WEIGHTS), ("classify", library.CLASSIFY)):
        out[name] = {_canon(text): ("tpcore", "", False)}
    return out


class _Parser:
    def __init__(self, text: str, filename: str):
        self.file = filename
        try:
            self.tree = ast.parse(text, filename)
        except SyntaxError as exc:
            raise ProgramSyntaxError(f"{filename}:{exc.lineno}: not valid Python ({exc.msg})") \
                from None
        except (RecursionError, MemoryError, ValueError) as exc:
            hint = (f"; nesting is limited to {LIMITS.depth} levels"
                    if isinstance(exc, RecursionError) else "")
            raise ProgramSyntaxError(f"{filename}: cannot be parsed ({type(exc).__name__}: "
                                     f"{str(exc)[:100]}){hint}") from None
        depth = _depth(self.tree)
        if depth > LIMITS.depth:
            raise ProgramSyntaxError(f"{filename}: nested {depth} levels deep; the limit is "
                                     f"{LIMITS.depth}")
        self.style: str | None = None
        self.rules: dict[str, str] = {}
        self.causal: set[bool] = set()
        self.consts: dict[str, Any] = {}
        self.weights_name: str | None = None
        self.funcs: dict[str, ast.FunctionDef] = {}
        self.defined = {"tokens", "positions", "ones"}
        self.modules: list[tuple[str, ast.AST, dict[str, Any]]] = []
        self.features: list[str] = []
        self.passthrough: dict[str, Label] = {}
        self.scores: dict[str, str] = {}

    def fail(self, node: ast.AST | None, msg: str) -> NoReturn:
        line = getattr(node, "lineno", 0)
        raise ProgramSyntaxError(f"{self.file}:{line}: {msg}")

    def bounded(self, node: ast.AST | None, n: int, limit: int, what: str) -> None:
        """Fail naming ``what`` when ``n`` exceeds ``limit``."""
        if n > limit:
            self.fail(node, f"{what}: {n:,} exceeds the limit of {limit:,}")

    def label(self, node: ast.AST | None, x: Any) -> Label:
        """``x`` checked as a label (:func:`tpcore.programs.ir.check_label`)."""
        try:
            return check_label(x, "literal")
        except TpcoreError as exc:
            self.fail(node, str(exc))

    def set_style(self, style: str, node: ast.AST) -> None:
        if self.style not in (None, style):
            self.fail(node, f"mixes the {self.style} and {style} program formats")
        self.style = style

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
                match = known[node.name].get(_dump(node))
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
                self.constant(node)
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

    def constant(self, node: ast.Assign) -> None:
        """tpcore header constants: WEIGHTS, VOCAB, MAX_LEN, ``BOS, EOS``."""
        self.set_style("tpcore", node)
        if len(node.targets) != 1:
            self.fail(node, "chained assignment not allowed")
        target = node.targets[0]
        names = ([e.id for e in target.elts if isinstance(e, ast.Name)]
                 if isinstance(target, ast.Tuple) else
                 [target.id] if isinstance(target, ast.Name) else [])
        try:
            value = ast.literal_eval(node.value)
        except (ValueError, TypeError):
            self.fail(node, "module-level values must be literals")
        if names == ["WEIGHTS"] and isinstance(value, str) and re.fullmatch(r"[\w.-]+", value) \
                and not value.startswith("."):
            self.weights_name = value
        elif names == ["VOCAB"] and isinstance(value, list) and all(
                isinstance(t, str) for t in value):
            self.bounded(node, len(value), LIMITS.vocabulary, "VOCAB tokens")
            self.consts["VOCAB"] = [self.label(node, t) for t in value]
        elif names == ["MAX_LEN"] and type(value) is int and value > 0:
            self.bounded(node, value, LIMITS.max_len, "MAX_LEN")
            self.consts["MAX_LEN"] = value
        elif names == ["BOS", "EOS"] and isinstance(value, tuple) and all(
                t is None or isinstance(t, str) for t in value):
            self.consts["BOS"], self.consts["EOS"] = value
        else:
            self.fail(node, f"unexpected module-level assignment to {names}")

    def trailer(self, node: ast.AST) -> bool:
        """The examples block, ``print(run(...))`` lines, or the tpcore ``__main__`` block."""
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == [
                "examples"]:
            try:
                ast.literal_eval(node.value)
            except (ValueError, TypeError):
                self.fail(node, "examples must be a literal list")
            return True
        if isinstance(node, ast.For):
            return _dump(node) == _canon(library.PUBLISHED_EXAMPLES) or self.fail(
                node, "only the examples printing loop is allowed after run")
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            call = node.value
            ok = (_is_name(call.func, "print") and len(call.args) == 1 and not call.keywords
                  and isinstance(call.args[0], ast.Call) and _is_name(call.args[0].func, "run")
                  and len(call.args[0].args) == 1 and not call.args[0].keywords)
            if ok:
                try:
                    ast.literal_eval(call.args[0].args[0])
                    return True
                except (ValueError, TypeError):
                    pass
            self.fail(node, "only print(run([...literal tokens...])) is allowed after run")
        if isinstance(node, ast.If):
            if _dump(node) != _canon(library.MAIN):
                self.fail(node, "the __main__ block differs from the generated one")
            self.set_style("tpcore", node)
            return True
        return False

    # run ------------------------------------------------------------------------------------

    def run(self, fn: ast.FunctionDef) -> None:
        if _dump(fn.args) != _dump(ast.parse("def run(tokens): pass").body[0].args) \
                or fn.decorator_list or fn.returns:
            self.fail(fn, "run must be declared as def run(tokens):")
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
                want = "return predictions.tolist()" if self.style == "published" else \
                    "return predictions"
                if _dump(node) != _canon(want):
                    self.fail(node, f"expected {want!r}")
            else:
                self.fail(node, f"statement not allowed in run ({type(node).__name__})")

    def local_function(self, fn: ast.FunctionDef) -> None:
        args = fn.args
        names = [a.arg for a in args.args]
        if (args.posonlyargs or args.vararg or args.kwonlyargs or args.kwarg or args.defaults
                or fn.decorator_list or fn.returns or any(a.annotation for a in args.args)):
            self.fail(fn, f"function {fn.name!r} must take plain positional arguments")
        if re.fullmatch(r"(num_)?predicate_\d+_\d+", fn.name) and len(names) == 2:
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
        fixed = {
            "positions": "positions = list(range(len(tokens)))",
            "ones": "ones = [1 for _ in range(len(tokens))]",
            "logits": "logits = feature_logits.groupby(level=0).sum(numeric_only=True)"
                      ".to_numpy()",
            "classes": "classes = classifier_weights.columns.to_numpy()",
        }
        if name in fixed:
            if _dump(node) != _canon(fixed[name]):
                self.fail(node, f"unexpected definition of {name!r}")
        elif name == "predictions":
            if _dump(node) not in (_canon("predictions = classes[logits.argmax(-1)]"),
                                   _canon("predictions = classify(features)")):
                self.fail(node, "unexpected definition of 'predictions'")
        elif name == "classifier_weights":
            self.read_csv(node)
        elif name.endswith("_scores") and name != "feature_scores":
            self.score_line(node, name)
        elif name == "feature_logits":
            self.concat(node)
        elif name == "features":
            self.feature_list(node)
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
                and _is_name(value.right.func, "len") and not value.right.keywords
                and len(value.right.args) == 1 and _is_name(value.right.args[0], "tokens")):
            self.fail(node, f"{name} must be [<literal>] * len(tokens)")
        if name in self.defined:
            self.fail(node, f"{name} is defined twice")
        self.modules.append((name[: -len("_outputs")], node,
                             {"constant": self.const(value.left.elts[0])}))
        self.defined.add(name)

    def read_csv(self, node: ast.Assign) -> None:
        """``pd.read_csv("PATH", ...)`` (the authors' files), or of the file ``NAME`` beside the
        program (:func:`tpcore.programs.library.weights_beside`, what tpcore writes)."""
        self.set_style("published", node)
        call = node.value
        where = call.args[0] if isinstance(call, ast.Call) and call.args else None
        if isinstance(where, ast.Call) and len(where.args) == 2:
            where = where.args[1]  # os.path.join(<this file's folder>, "NAME")
        if not (isinstance(where, ast.Constant) and isinstance(where.value, str)):
            self.fail(node, "classifier_weights must be read with pd.read_csv(\"PATH\", ...)")
        name = where.value
        path = repr(name)
        if where is not call.args[0]:
            if not re.fullmatch(r"[\w-][\w.-]*", name):
                self.fail(node, f"weights file {shorten(name)} must be a file name")
            path = library.weights_beside(path)
        want = (f"classifier_weights = pd.read_csv({path}, index_col=[0, 1], "
                'dtype={"feature": str})')
        if _dump(node) != _canon(want):
            self.fail(node, "unexpected pd.read_csv call")
        self.weights_name = Path(name).name

    def score_line(self, node: ast.Assign, name: str) -> None:
        self.set_style("published", node)
        for var in sorted(self.defined):
            if library.scores_name(var) != name:
                continue
            cat = f'{name} = classifier_weights.loc[[("{var}", str(v)) for v in {var}]]'
            num = (f'{name} = classifier_weights.loc[[("{var}", "_") for v in {var}]]'
                   f".mul({var}, axis=0)")
            if _dump(node) in (_canon(cat), _canon(num)):
                self.scores[name] = var
                return
        self.fail(node, f"unexpected classifier boilerplate for {name!r}")

    def concat(self, node: ast.Assign) -> None:
        try:
            frames = node.value.args[0].generators[0].iter.elts
            names = [f.id for f in frames]
        except (AttributeError, IndexError):
            self.fail(node, "unexpected feature_logits expression")
        want = ("feature_logits = pd.concat([df.reset_index() for df in [" + ", ".join(names)
                + "]])")
        if _dump(node) != _canon(want):
            self.fail(node, "unexpected feature_logits expression")
        for n in names:
            if n not in self.scores:
                self.fail(node, f"{n!r} is not a classifier score defined above")
            self.features.append(self.scores[n])

    def feature_list(self, node: ast.Assign) -> None:
        self.set_style("tpcore", node)
        try:
            names = [e.elts[1].id for e in node.value.elts]
        except (AttributeError, IndexError):
            self.fail(node, "features must be a list of (\"name\", name) pairs")
        want = "features = [" + ", ".join(f'("{n}", {n})' for n in names) + "]"
        if _dump(node) != _canon(want):
            self.fail(node, "features must be a list of (\"name\", name) pairs")
        for n in names:
            if n not in self.defined:
                self.fail(node, f"feature {n!r} is not defined above")
        self.features = names

    def pattern(self, node: ast.Assign, head: str, value: ast.AST) -> None:
        numerical = head.startswith("num_")
        fn_name = head.replace("attn", "predicate", 1)
        call = value
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name)
                and len(call.args) == 3 and not call.keywords
                and all(isinstance(a, ast.Name) for a in call.args)):
            self.fail(node, f"{head}_pattern must be select_closest/select(keys, queries, "
                      f"{fn_name})")
        sel = call.func.id
        keys, queries, pred = (a.id for a in call.args)
        if numerical and sel != "select" or not numerical and sel not in self.rules:
            self.fail(node, f"{head} may not call {sel!r} here")
        if sel not in self.funcs:
            self.fail(node, f"helper {sel!r} is not defined")
        if pred != fn_name or fn_name not in self.funcs:
            self.fail(node, f"{head}_pattern must use the function {fn_name} defined above")
        for v in (keys, queries):
            if v not in self.defined:
                self.fail(node, f"{v!r} is not defined above")
        self.modules.append((head, node, {"key": keys, "query": queries,
                                          "rule": self.rules.get(sel, ""),
                                          "fn": self.funcs[fn_name]}))

    def prefix_count(self, node: ast.Assign, name: str) -> None:
        """``prefix_count_X = [tokens[:i].count("t") for i in range(len(tokens))]``."""
        try:
            token = node.value.elt.args[0].value
        except (AttributeError, IndexError):
            self.fail(node, f"{name} must be [tokens[:i].count(TOKEN) for i in ...]")
        want = f"{name} = [tokens[:i].count({token!r}) for i in range(len(tokens))]"
        if not isinstance(token, str) or _dump(node) != _canon(want) or name in self.defined:
            self.fail(node, f"{name} must be [tokens[:i].count(TOKEN) for i in ...]")
        self.modules.append((name, node, {"token": token}))
        self.defined.add(name)

    def running_count(self, node: ast.Assign, name: str) -> None:
        """``running_count = [tokens[:i + 1].count(tokens[i]) for i in range(len(tokens))]``."""
        want = f"{name} = [tokens[:i + 1].count(tokens[i]) for i in range(len(tokens))]"
        if _dump(node) != _canon(want) or name in self.defined:
            self.fail(node, f"{name} must be [tokens[:i + 1].count(tokens[i]) for i in ...]")
        self.modules.append((name, node, {"running": True}))
        self.defined.add(name)

    def outputs(self, node: ast.Assign, name: str, value: ast.AST) -> None:
        mod = name[: -len("_outputs")]
        if HEAD_NAME.match(mod):
            agg = "aggregate_sum" if mod.startswith("num_") else "aggregate"
            if not (self.modules and self.modules[-1][0] == mod and "value" not in
                    self.modules[-1][2]):
                self.fail(node, f"{name} must follow {mod}_pattern")
            vals = getattr(value, "args", [None, None])
            val = getattr(vals[-1], "id", None) if len(vals) == 2 else None
            if val is None or _dump(node) != _canon(f"{name} = {agg}({mod}_pattern, {val})"):
                self.fail(node, f"{name} must be {agg}({mod}_pattern, VALUES)")
            if val not in self.defined or agg not in self.funcs:
                self.fail(node, f"{val!r} or {agg!r} is not defined above")
            self.modules[-1][2]["value"] = val
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
            if len(fn.args.args) == 1:
                want = f"{name} = [{mod}(k0) for k0 in {inputs[0]}]"
            else:
                want = f"{name} = [{mod}(k0, k1) for k0, k1 in zip({', '.join(inputs)})]"
            if _dump(node) != _canon(want):
                self.fail(node, f"unexpected application of {mod}")
            for v in inputs:
                if v not in self.defined:
                    self.fail(node, f"{v!r} is not defined above")
            self.modules.append((mod, node, {"inputs": inputs, "fn": fn}))
        else:
            self.fail(node, f"unexpected variable {name!r}")
        self.defined.add(name)

    def passthrough_if(self, node: ast.If) -> None:
        for index, role in (("0", "bos"), ("-1", "eos")):
            try:
                tok = node.test.comparators[0].value
            except (AttributeError, IndexError):
                break
            want = f"if tokens[{index}] == {tok!r}:\n    predictions[{index}] = {tok!r}"
            if isinstance(tok, str) and _dump(node) == _canon(want) and role not in \
                    self.passthrough:
                self.passthrough[role] = tok
                return
        self.fail(node, "only the BOS/EOS pass-through if-statements are allowed in run")

    # function bodies --------------------------------------------------------------------------

    def const(self, node: ast.AST) -> Label:
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            v = self.const(node.operand)
            if isinstance(v, str):
                self.fail(node, "cannot negate a string")
            return -v
        if isinstance(node, ast.Constant) and type(node.value) in (str, int, float):
            return self.label(node, node.value)
        self.fail(node, "expected a string or number literal")
        raise AssertionError

    def key_const(self, node: ast.AST, arity: int) -> tuple[Label, ...]:
        if arity == 1:
            return (self.const(node),)
        if isinstance(node, ast.Tuple) and len(node.elts) == arity:
            return tuple(self.const(e) for e in node.elts)
        self.fail(node, f"expected a {arity}-tuple of literals")
        raise AssertionError

    def chain(self, fn: ast.FunctionDef, stmts: list[ast.stmt], subject: str,
              arity: int) -> tuple[list[tuple[list[tuple[Label, ...]], ast.AST]], list[ast.stmt]]:
        """Branches ``if subject in {...}: <return>`` / ``elif`` -> [(keys, return value node)]."""
        branches = []
        rest = stmts
        while rest and isinstance(rest[0], ast.If):
            node = rest[0]
            test = node.test
            ok = (isinstance(test, ast.Compare) and _is_name(test.left, subject)
                  and len(test.ops) == 1 and isinstance(test.ops[0], ast.In)
                  and isinstance(test.comparators[0], ast.Set)
                  and len(node.body) == 1 and isinstance(node.body[0], ast.Return))
            if not ok:
                self.fail(node, f"{fn.name}: expected 'if {subject} in {{...}}: return ...'")
            keys = [self.key_const(e, arity) for e in test.comparators[0].elts]
            branches.append((keys, node.body[0].value))
            if len(node.orelse) == 1 and isinstance(node.orelse[0], ast.If):
                rest = node.orelse + rest[1:]
            elif node.orelse:
                self.fail(node, f"{fn.name}: else branches are not allowed")
            else:
                rest = rest[1:]
        return branches, rest

    def predicate(self, fn: ast.FunctionDef) -> list[tuple[list[Label], Any]]:
        """The branches ``if q in {...}: return k == <literal>`` (or ``k == q``: the key value
        equal to the query's, :data:`SAME`) as ``(queries, key label)``."""
        q, k = (a.arg for a in fn.args.args)
        if len(fn.body) == 1 and _dump(fn.body[0]) == _canon("return False"):
            return []
        branches, rest = self.chain(fn, fn.body, q, 1)
        if rest:
            self.fail(rest[0], f"{fn.name}: only if/elif branches are allowed")
        out = []
        for keys, ret in branches:
            if not (isinstance(ret, ast.Compare) and _is_name(ret.left, k) and len(ret.ops) == 1
                    and isinstance(ret.ops[0], ast.Eq)):
                self.fail(ret, f"{fn.name}: branches must return {k} == <literal> or {k} == {q}")
            same = _is_name(ret.comparators[0], q)
            out.append(([key[0] for key in keys],
                        SAME if same else self.const(ret.comparators[0])))
        return out

    def mlp(self, fn: ast.FunctionDef) -> list[Any]:
        """An MLP body as a decision list: an optional ``key = ARG`` or ``key = (A, B)``, then
        ``if TEST: ...`` statements (``elif`` allowed) and ``return <literal>``, ending in a
        ``return``. Tests: ``SUBJECT in {literals}`` (the key, an argument, or a tuple of the
        arguments) and ``LINEAR <= LINEAR`` over the arguments (literals, names, ``N * NAME``,
        ``+``, ``-``). Returns the statements as ``("if", test, body, orelse)`` and
        ``("return", label)`` with tests as ``("in", names, rows)`` and ``("le", coefficients,
        constant)`` (``sum coefficient * argument <= constant``)."""
        args = [a.arg for a in fn.args.args]
        body = fn.body
        alias: tuple[str, ...] | None = None
        if body and isinstance(body[0], ast.Assign) and _is_name(body[0].targets[-1], "key"):
            key = args[0] if len(args) == 1 else f"({', '.join(args)})"
            if _dump(body[0]) != _canon(f"key = {key}"):
                self.fail(body[0], f"{fn.name}: key must be {key}")
            alias, body = tuple(args), body[1:]
        if not body or not isinstance(body[-1], ast.Return):
            self.fail(fn, f"{fn.name}: must end with a default 'return <literal>'")
        return self.decisions(fn.name, body, args, alias)

    def decisions(self, name: str, stmts: list[ast.stmt], args: list[str],
                  alias: tuple[str, ...] | None) -> list[Any]:
        out: list[Any] = []
        for node in stmts:
            if isinstance(node, ast.Return) and node.value is not None:
                out.append(("return", self.const(node.value)))
            elif isinstance(node, ast.If):
                orelse = self.decisions(name, node.orelse, args, alias)
                if orelse and not (len(node.orelse) == 1 and isinstance(node.orelse[0], ast.If)):
                    self.fail(node, f"{name}: else branches are not allowed")
                out.append(("if", self.test(name, node.test, args, alias),
                            self.decisions(name, node.body, args, alias), orelse))
            else:
                self.fail(node, f"{name}: only if-statements and returns of literals are "
                          "allowed")
        return out

    def test(self, name: str, node: ast.expr, args: list[str],
             alias: tuple[str, ...] | None) -> tuple:
        """An MLP test (see :meth:`mlp`)."""
        if not (isinstance(node, ast.Compare) and len(node.ops) == 1):
            self.fail(node, f"{name}: tests must be 'x in {{...}}' or a comparison with <=")
        left, op, right = node.left, node.ops[0], node.comparators[0]
        if isinstance(op, ast.In) and isinstance(right, ast.Set):
            if alias is not None and _is_name(left, "key"):
                names = alias
            elif isinstance(left, ast.Tuple) and all(isinstance(e, ast.Name) for e in left.elts):
                names = tuple(e.id for e in left.elts)
            elif isinstance(left, ast.Name):
                names = (left.id,)
            else:
                names = ()
            if not names or any(n not in args for n in names) or len(set(names)) < len(names):
                self.fail(node, f"{name}: tests name the function's arguments")
            self.bounded(node, len(right.elts), LIMITS.table, f"{name}: set elements")
            return ("in", names, [self.key_const(e, len(names)) for e in right.elts])
        if isinstance(op, ast.LtE):
            return ("le", self.linear(name, left, args), self.linear(name, right, args))
        self.fail(node, f"{name}: tests must be 'x in {{...}}' or a comparison with <=")
        raise AssertionError

    def linear(self, name: str, node: ast.expr, args: list[str]) -> tuple:
        """A sum of number literals, arguments, ``-argument`` and ``literal * argument`` as a
        tree: ``("+" | "-", a, b)``, ``("*", number, argument)``, ``("arg", name)``,
        ``("num", number)``."""
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)):
            return ("+" if isinstance(node.op, ast.Add) else "-",
                    self.linear(name, node.left, args), self.linear(name, node.right, args))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(
                node.operand, ast.Name):
            return ("*", -1, self.linear(name, node.operand, args)[1])
        if isinstance(node, ast.Name):
            if node.id not in args:
                self.fail(node, f"{name}: {node.id!r} is not an argument")
            return ("arg", node.id)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
            return ("*", self.number(name, node.left), self.linear(name, node.right, args)[1]) \
                if isinstance(node.right, ast.Name) else self.fail(
                    node, f"{name}: products are 'number * argument'")
        return ("num", self.number(name, node))

    def number(self, name: str, node: ast.expr) -> int | float:
        c = self.const(node)
        if isinstance(c, str):
            self.fail(node, f"{name}: comparisons are between numbers")
        return c


def _is_name(node: ast.AST, name: str) -> bool:
    return isinstance(node, ast.Name) and node.id == name


def _tests(stmts: list[Any], kind: str = "in") -> int:
    """How many tests of ``kind`` (``"in"`` or ``"le"``) a decision list makes."""
    return sum(0 if st[0] == "return" else
               (st[1][0] == kind) + _tests(st[2], kind) + _tests(st[3], kind) for st in stmts)


def _returns(stmts: list[Any]) -> list[Label]:
    """Every returned label of a decision list, in order."""
    out: list[Label] = []
    for st in stmts:
        out += [st[1]] if st[0] == "return" else _returns(st[2]) + _returns(st[3])
    return out


def _value(tree: tuple, columns: dict[str, np.ndarray]) -> Any:
    """A :meth:`_Parser.linear` tree evaluated per key, in Python's order of operations."""
    op = tree[0]
    if op == "num":
        return tree[1]
    if op == "arg":
        return columns[tree[1]]
    if op == "*":
        return tree[1] * columns[tree[2]]
    a, b = _value(tree[1], columns), _value(tree[2], columns)
    return a + b if op == "+" else a - b


def _decide(stmts: list[Any], args: dict[str, tuple[Variable, np.ndarray]],
            active: np.ndarray, out: np.ndarray) -> np.ndarray:
    """Run a decision list (:meth:`_Parser.mlp`) on every table entry at once, as Python would
    on each: ``args[name]`` is the argument's variable and its value index per entry; ``out``
    gets the label returned at the ``active`` entries. Returns the entries that returned. A
    set is looked up through the variables' labels (Python's ``in``: equal numbers match)."""
    done = np.zeros_like(active)
    for st in stmts:
        todo = active & ~done
        if st[0] == "return":
            out[todo] = st[1]
            return done | todo
        _, test, body, orelse = st
        if test[0] == "in":
            variables = [args[n][0] for n in test[1]]
            member = np.zeros([x.size for x in variables], dtype=bool)
            for row in test[2]:
                at = [x.lookup.get(label) for x, label in zip(variables, row)]
                if None not in at:
                    member[tuple(at)] = True
            hit = member[tuple(args[n][1] for n in test[1])]
        else:
            columns = {n: np.asarray(x.values)[i] for n, (x, i) in args.items()}
            hit = np.asarray(_value(test[1], columns) <= _value(test[2], columns)) & active
        done |= _decide(body, args, todo & hit, out)
        done |= _decide(orelse, args, todo & ~hit, out)
    return done


def _read_weights(text: str, where: str) -> tuple[list[str], dict[tuple[str, str], np.ndarray]]:
    """The rows of a weights CSV ``feature,value,<classes>``: ``{(feature, value): (C,)}``.

    ``_`` is the value of a numerical feature's one row (and of the ``bias`` row). A feature with
    other values is categorical, and its ``_`` rows stand for values without a name (the authors'
    decompiler writes ``_`` for an unnamed value, e.g. the unused vocabulary slots of their Dyck
    programs): no input reaches them, and they are dropped. Any other repeated row, a weight that
    is not a finite number, or a row of another width is refused naming the line.
    """
    try:
        rows = list(csv.reader(io.StringIO(text)))
    except csv.Error as exc:
        raise TpcoreError(f"{where}: not a CSV file ({exc})") from None
    if not rows or len(rows[0]) < 3 or rows[0][:2] != ["feature", "value"]:
        raise TpcoreError(f"{where}: expected a header 'feature,value,<classes...>'")
    classes = rows[0][2:]
    check_size(len(classes), LIMITS.classes, f"{where}: classes")
    weights: dict[tuple[str, str], np.ndarray] = {}
    line: dict[tuple[str, str], int] = {}
    unnamed: dict[str, list[int]] = {}
    for n, row in enumerate(rows[1:], start=2):
        if len(row) != len(rows[0]):
            raise TpcoreError(f"{where}:{n}: expected {len(rows[0])} columns, got {len(row)}")
        try:
            w = np.asarray([float(x) for x in row[2:]])
        except ValueError:
            raise TpcoreError(f"{where}:{n}: weights must be numbers") from None
        key = (row[0], row[1])
        bad = np.flatnonzero(~(np.abs(w) <= LIMITS.number))
        if bad.size:
            raise TpcoreError(f"{where}:{n}: row {key}: weight {shorten(row[2 + bad[0]])} of "
                              f"class {shorten(classes[bad[0]])} is not a finite number of "
                              f"magnitude at most {LIMITS.number:.0f}")
        if key[1] == PLACEHOLDER:
            unnamed.setdefault(key[0], []).append(n)
        elif key in weights:
            raise TpcoreError(f"{where}:{n}: row {key} repeats line {line[key]}")
        weights.setdefault(key, w)
        line.setdefault(key, n)
    named = {f for f, v in weights if v != PLACEHOLDER}
    for f, lines in unnamed.items():
        if f in named:
            del weights[(f, PLACEHOLDER)]
        elif len(lines) > 1:
            raise TpcoreError(f"{where}:{lines[1]}: row ({f!r}, '_') repeats line {lines[0]} "
                              "(a numerical feature has one '_' row)")
    return classes, weights


def parse_source(text: str, weights: str, filename: str = "<program>",
                 name: str | None = None) -> Program:
    """Import program source ``text`` with its weights CSV text ``weights`` (nothing is run)."""
    p = _Parser(text, filename)
    p.module()
    classes, rows = _read_weights(weights, f"weights of {filename}")
    return _build(p, classes, rows, name or program_name(Path(filename).stem))


def weights_path(path: str | Path) -> Path:
    """The weights CSV of a program file: the name its header gives, else ``NAME_weights.csv``."""
    path = Path(path)
    p = _Parser(read_limited(path, "program file"), str(path))
    p.module()
    beside = path.with_name(f"{path.stem}_weights.csv")
    if beside.exists() or p.weights_name is None:
        return beside
    return path.with_name(p.weights_name)


def parse_file(path: str | Path) -> Program:
    """Import the program file ``path`` and the weights CSV beside it (each at most
    ``LIMITS.file_bytes``); the program is named after the file (:func:`program_name`)."""
    path = Path(path)
    csv_path = weights_path(path)
    if not csv_path.is_file():
        raise TpcoreError(f"{path}: weights file {csv_path} not found")
    return parse_source(read_limited(path, "program file"),
                        read_limited(csv_path, "weights file"), str(path),
                        program_name(path.stem))


def program_name(stem: str) -> str:
    """A program name from a file name: its ASCII letters, digits and underscores, anything
    else as ``_``, at most ``LIMITS.name_chars`` characters, ``p_`` in front when it would
    start with a digit or be a keyword."""
    name = re.sub(r"[^A-Za-z0-9_]", "_", stem)
    if not name or name[0].isdigit() or keyword.iskeyword(name):
        name = f"p_{name}"
    return name[: LIMITS.name_chars]


def _typed(label: str, like: Label) -> Label:
    """A CSV value label converted to the type of ``like``."""
    if isinstance(like, str):
        return label
    try:
        return int(label) if isinstance(like, int) else float(label)
    except ValueError:
        return label


def _build(p: _Parser, classes: list[str], rows: dict[tuple[str, str], np.ndarray],
           name: str) -> Program:
    """The program of a parsed file, sized by :data:`LIMITS` before each table is built."""
    values: dict[str, list[str]] = {}
    for f, x in rows:
        values.setdefault(f, []).append(x)
    if p.style == "tpcore":
        vocab = tuple(p.consts.get("VOCAB", ()))
        max_len = p.consts.get("MAX_LEN", 0)
    else:
        vocab = tuple(values.get("tokens", ()))
        max_len = len(values.get("positions", ()))
    if not vocab or max_len <= 0:
        raise TpcoreError(f"{p.file}: cannot tell the vocabulary and maximum length")
    check_size(len(vocab), LIMITS.vocabulary, f"{p.file}: vocabulary")
    check_size(max_len, LIMITS.max_len, f"{p.file}: maximum length")
    check_size(len(p.modules) + 3, LIMITS.variables, f"{p.file}: variables")
    v: dict[str, Variable] = {}
    total = 0

    def define(var: Variable) -> None:
        nonlocal total
        v[var.name] = var
        total += var.size
        check_size(total, LIMITS.total_values, f"{p.file}: values of all variables")

    define(Variable("tokens", "categorical", vocab))
    define(Variable("positions", "categorical", tuple(range(max_len))))
    define(Variable("ones", "numerical", (1,)))
    modules: list[Module] = []
    for mod, node, info in p.modules:
        out = f"{mod}_outputs"
        if "token" in info:
            define(Variable(mod, "numerical", tuple(range(max_len))))
            modules.append(PrefixCount(mod, info["token"], mod))
        elif "running" in info:
            define(Variable(mod, "numerical", tuple(range(1, max_len + 1))))
            modules.append(RunningCount(mod, mod))
        elif "constant" in info:  # one value: a one-entry table over ``ones``
            c = info["constant"]
            ov = Variable(out, "categorical", tuple(dict.fromkeys(
                [c] + [_typed(x, c) for x in values.get(out, ())])))
            define(ov)
            modules.append(Mlp(mod, "numerical", ("ones",), out,
                               np.full((1,), ov.index(c), dtype=np.int64), ov.index(c)))
        elif "key" in info:
            if "value" not in info:
                p.fail(node, f"{mod}_pattern has no {mod}_outputs line")
            numerical = mod.startswith("num_")
            q, k = v[info["query"]], v[info["key"]]
            val = v[info["value"]]
            pred = np.full(q.size, -1, dtype=np.int64)
            for qs, kl in reversed(p.predicate(info["fn"])):
                for ql in qs:
                    if ql in q.lookup:
                        pred[q.lookup[ql]] = k.lookup.get(ql if kl is SAME else kl, -1)
            kind = "numerical" if numerical else "categorical"
            if val.kind != kind:
                p.fail(node, f"{mod} reads {val.kind} {val.name!r} as its value")
            labels = numerical_range(val, max_len) if numerical else val.values
            define(Variable(out, kind, labels))
            modules.append(Head(mod, kind, q.name, k.name, val.name, out, pred,
                                info["rule"] or "closest"))
        else:
            decisions = p.mlp(info["fn"])
            ins = [v[x] for x in info["inputs"]]
            kind = ins[0].kind
            if any(x.kind != kind for x in ins):
                p.fail(node, f"{mod} mixes categorical and numerical inputs")
            shape = [x.size for x in ins]
            check_size(math.prod(shape), LIMITS.table, f"{p.file}: {mod}: table entries")
            if kind == "categorical" and _tests(decisions, "le"):
                p.fail(node, f"{mod}: comparisons with <= need numerical inputs")
            check_size((_tests(decisions) + _tests(decisions, "le")) * math.prod(shape),
                       LIMITS.decisions, f"{p.file}: {mod}: tests times table entries")
            returned = _returns(decisions)
            default = decisions[-1][1]
            try:
                returned = sorted(set(returned))
            except TypeError:
                pass
            found = [_typed(x, default) for x in values.get(out, ())] + returned
            ov = Variable(out, "categorical", tuple(dict.fromkeys(found)))
            check_size(ov.size, LIMITS.values, f"{p.file}: values of {out}")
            grid = np.indices(shape).reshape(len(shape), -1)
            args = {a.arg: (x, g) for a, x, g in zip(info["fn"].args.args, ins, grid)}
            labels = np.empty(grid.shape[1], dtype=object)
            _decide(decisions, args, np.ones(grid.shape[1], dtype=bool), labels)
            table = np.asarray([ov.index(x) for x in labels], dtype=np.int64).reshape(shape)
            define(ov)
            modules.append(Mlp(mod, kind, tuple(info["inputs"]), out, table, ov.index(default)))
    weights, bias = {}, np.asarray(rows.get(("bias", "_"), np.zeros(len(classes))))
    n_rows = sum(v[f].size if v[f].kind == "categorical" else 1 for f in p.features)
    check_size(n_rows * len(classes), LIMITS.weights, f"{p.file}: classifier weights")
    for f in p.features:
        var = v[f]
        if var.kind == "numerical":
            if (f, "_") not in rows:
                raise TpcoreError(f"{p.file}: weights have no row ({f}, _)")
            weights[f] = rows[(f, "_")][None, :]
        else:
            zero = np.zeros(len(classes))
            weights[f] = np.stack([rows.get((f, str(x)), zero) for x in var.values])
    if p.style == "tpcore":
        bos, eos = p.consts.get("BOS"), p.consts.get("EOS")
    else:
        bos, eos = (t if t in vocab else None for t in (p.passthrough.get("bos"),
                                                         p.passthrough.get("eos")))
    return Program(name, v, modules, Classifier(tuple(classes), tuple(p.features), weights, bias),
                   causal=True in p.causal, bos=bos, eos=eos,
                   pad="<pad>" if "<pad>" in vocab else None,
                   passthrough=bool(p.passthrough),
                   meta={"imported_from": p.file, "format": p.style})
