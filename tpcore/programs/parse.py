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
import keyword
import re
from pathlib import Path
from typing import Any, NoReturn

from tpcore.errors import TpcoreError
from tpcore.programs import library, weights_csv
from tpcore.programs.build import build
from tpcore.programs.ir import (
    LIMITS,
    Label,
    Program,
    check_label,
    read_limited,
    shorten,
)
from tpcore.programs.parsed import SAME, Constant, Count, Lookup, Parsed, Pattern

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
        self.modules: list[Parsed] = []
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
        self.modules.append(Constant(name[: -len("_outputs")], node,
                                      self.const(value.left.elts[0])))
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
        self.modules.append(Pattern(head, node, queries, keys, self.rules.get(sel, ""),
                                     self.funcs[fn_name]))

    def prefix_count(self, node: ast.Assign, name: str) -> None:
        """``prefix_count_X = [tokens[:i].count("t") for i in range(len(tokens))]``."""
        try:
            token = node.value.elt.args[0].value
        except (AttributeError, IndexError):
            self.fail(node, f"{name} must be [tokens[:i].count(TOKEN) for i in ...]")
        want = f"{name} = [tokens[:i].count({token!r}) for i in range(len(tokens))]"
        if not isinstance(token, str) or _dump(node) != _canon(want) or name in self.defined:
            self.fail(node, f"{name} must be [tokens[:i].count(TOKEN) for i in ...]")
        self.modules.append(Count(name, node, token))
        self.defined.add(name)

    def running_count(self, node: ast.Assign, name: str) -> None:
        """``running_count = [tokens[:i + 1].count(tokens[i]) for i in range(len(tokens))]``."""
        want = f"{name} = [tokens[:i + 1].count(tokens[i]) for i in range(len(tokens))]"
        if _dump(node) != _canon(want) or name in self.defined:
            self.fail(node, f"{name} must be [tokens[:i + 1].count(tokens[i]) for i in ...]")
        self.modules.append(Count(name, node, None))
        self.defined.add(name)

    def outputs(self, node: ast.Assign, name: str, value: ast.AST) -> None:
        mod = name[: -len("_outputs")]
        if HEAD_NAME.match(mod):
            agg = "aggregate_sum" if mod.startswith("num_") else "aggregate"
            last = self.modules[-1] if self.modules else None
            if not (isinstance(last, Pattern) and last.name == mod and last.value is None):
                self.fail(node, f"{name} must follow {mod}_pattern")
            vals = getattr(value, "args", [None, None])
            val = getattr(vals[-1], "id", None) if len(vals) == 2 else None
            if val is None or _dump(node) != _canon(f"{name} = {agg}({mod}_pattern, {val})"):
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
            if len(fn.args.args) == 1:
                want = f"{name} = [{mod}(k0) for k0 in {inputs[0]}]"
            else:
                want = f"{name} = [{mod}(k0, k1) for k0, k1 in zip({', '.join(inputs)})]"
            if _dump(node) != _canon(want):
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


def _parsed(text: str, filename: str) -> _Parser:
    p = _Parser(text, filename)
    p.module()
    return p


def _with_weights(p: _Parser, weights: str, name: str) -> Program:
    classes, rows = weights_csv.read(weights, f"weights of {p.file}")
    return build(p, classes, rows, name)


def parse_source(text: str, weights: str, filename: str = "<program>",
                 name: str | None = None) -> Program:
    """Import program source ``text`` with its weights CSV text ``weights`` (nothing is run)."""
    return _with_weights(_parsed(text, filename), weights,
                         name or program_name(Path(filename).stem))


def _weights_beside(path: Path, p: _Parser) -> Path:
    beside = path.with_name(f"{path.stem}_weights.csv")
    if beside.exists() or p.weights_name is None:
        return beside
    return path.with_name(p.weights_name)


def weights_path(path: str | Path) -> Path:
    """The weights CSV of a program file: the name its header gives, else ``NAME_weights.csv``."""
    path = Path(path)
    return _weights_beside(path, _parsed(read_limited(path, "program file"), str(path)))


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
