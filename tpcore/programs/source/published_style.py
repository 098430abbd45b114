"""The authors' published program format (princeton-nlp/TransformerPrograms), written and
read: pandas looks each variable's classifier scores up in the weights CSV.

    import os; import numpy as np; import pandas as pd
    helpers: their select_closest, select, aggregate, aggregate_sum (verbatim)
    def run(tokens):
        classifier_weights = pd.read_csv(PATH, index_col=[0, 1], dtype={"feature": str})
        token_scores = classifier_weights.loc[[("tokens", str(v)) for v in tokens]]
        ... each variable, then its scores (NAME_scores; a numerical one .mul(NAME, axis=0))
        feature_logits = pd.concat([df.reset_index() for df in [SCORES, ...]])
        logits = ...; classes = ...; predictions = classes[logits.argmax(-1)]
        return predictions.tolist()
    examples = [([...], [...])]; for x, y in examples: print(...)

The authors' files read the CSV from a path relative to their repository; tpcore writes
``os.path.join(os.path.dirname(os.path.abspath(__file__)), "NAME_weights.csv")``
(:func:`tpcore.programs.source.library.weights_beside`) and reads either. The format has only
the ``published`` select_closest rule, no expert gate and no classifier bias (a nonzero bias
goes into the ``ones`` row, :func:`published_features`). Host-only code (NumPy and the
standard library).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from tpcore.errors import TpcoreError
from tpcore.programs.compress import Plan
from tpcore.programs.interpret import predict
from tpcore.programs.ir import ExpertCount, Program, shorten
from tpcore.programs.source import library, weights_csv
from tpcore.programs.source.grammar import Reader, canon, dump, imported, is_name
from tpcore.programs.source.layout import WIDTH, literal, wrap
from tpcore.programs.source.style import Style, example_tokens, head_rules
from tpcore.programs.source.templates import ONES, POSITIONS, Line

IMPORT_LINES = ("import os", "", "import numpy as np", "import pandas as pd")
IMPORTS = imported(IMPORT_LINES)
"""The modules a published program imports (``os`` for tpcore's path beside the file)."""

LOGITS = "logits = feature_logits.groupby(level=0).sum(numeric_only=True).to_numpy()"
CLASSES = "classes = classifier_weights.columns.to_numpy()"
PREDICTIONS = "predictions = classes[logits.argmax(-1)]"
RETURN = "return predictions.tolist()"


def read_csv_line(path: str) -> Line:
    """``classifier_weights = pd.read_csv(path, ...)``; ``path``: a string literal or
    expression."""
    return Line("classifier_weights = pd.read_csv(",
                (path, "index_col=[0, 1]", 'dtype={"feature": str}'), ")")


def scores_line(var: str, kind: str) -> Line:
    """``NAME_scores = classifier_weights.loc[...]``: each position's classifier row for
    variable ``var`` of ``kind`` (a numerical one's ``_`` row times its value)."""
    head = f"{library.scores_name(var)} = classifier_weights.loc["
    if kind == "numerical":
        return Line(head, (f'[("{var}", "_") for v in {var}]',), f"].mul({var}, axis=0)", "")
    return Line(head, (f'[("{var}", str(v)) for v in {var}]',), "]", "")


def concat_line(frames: list[str]) -> Line:
    """``feature_logits = pd.concat(...)``: the features' score frames stacked (the reader's
    one-line form; the writer lays it out as black does)."""
    return Line("feature_logits = pd.concat([df.reset_index() for df in [", tuple(frames),
                "]])")


def published_features(program: Program) -> tuple[str, ...]:
    """The classifier features the published format sums: the program's, and ``ones`` too when
    the classifier has a nonzero bias (that format has no bias: it goes into the ``ones`` row,
    and ``ones`` is 1 at every position)."""
    c = program.classifier
    extra = ("ones",) if np.any(c.bias[c.kept()] != 0) and "ones" not in c.features else ()
    return c.features + extra


def helpers_for(causal: bool) -> dict[str, tuple[str, str]]:
    """``{name: (text, rule)}``: the authors' helpers, non-causal or causal."""
    return {n: (text, "published" if n == "select_closest" else "")
            for n, text in library.published_helpers(causal).items()}


class PublishedStyle(Style):
    """Every module written, MLPs as key sets."""

    def __init__(self) -> None:
        super().__init__("published", prunes=False, fits_rules=False, returns=RETURN)

    def helpers(self, program: Program) -> dict[str, tuple[str, str]]:
        """The authors' helpers; refuses an expert gate or another select_closest rule."""
        if any(isinstance(m, ExpertCount) for m in program.modules):
            raise TpcoreError("the published format has no expert gate (expert_count)")
        rules = head_rules(program)
        if rules and rules != ("published",):
            raise TpcoreError("the published format only has the 'published' select_closest "
                              f"rule; this program uses {list(rules)}")
        return helpers_for(program.causal)

    def scores(self, program: Program, var: str) -> list[str]:
        """The classifier-score line(s) of ``var``."""
        line = scores_line(var, program.variables[var].kind)
        return line.broken(4) if program.variables[var].kind == "numerical" else line.wrapped(4)

    def inputs(self, program: Program, weights_file: str) -> list[str]:
        """The weights read beside the file, then each input and its scores."""
        path = library.weights_beside(literal(weights_file))
        return ["    # classifier weights ##########################################",
                *read_csv_line(path).wrapped(4),
                "    # inputs #####################################################",
                *self.scores(program, "tokens"), "",
                f"    {POSITIONS}", *self.scores(program, "positions"), "",
                f"    {ONES}", *self.scores(program, "ones"), ""]

    def classify(self, program: Program, features: tuple[str, ...]) -> list[str]:
        """The score frames of :func:`published_features` (``features`` are the classifier's:
        the format writes every module) summed per position, the first largest class."""
        frames = [library.scores_name(f) for f in published_features(program)]
        return ["    feature_logits = pd.concat(",
                "        [",
                "            df.reset_index()",
                "            for df in [",
                *(f"                {x}," for x in frames),
                "            ]",
                "        ]",
                "    )",
                f"    {LOGITS}",
                f"    {CLASSES}",
                f"    {PREDICTIONS}"]

    def header(self, program: Program, weights_file: str, extra: dict[str, str]) -> list[str]:
        return list(IMPORT_LINES)

    def trailer(self, program: Program) -> list[str]:
        """The closing block: one example input and, as its ``y``, what this program predicts
        for it (the interpreter's answer), then the loop that prints ``run``'s."""
        x = program.frame(example_tokens(program))
        rows = [[literal(t) for t in row] for row in (x, predict(program, [x], "numpy")[0])]
        one = f"examples = [([{', '.join(rows[0])}], [{', '.join(rows[1])}])]"
        if len(one) <= WIDTH:
            lines = [one]
        else:
            lines = ["examples = [", "    (", *(line for r in rows for line in
                                               wrap(8, "[", r, "],")), "    ),", "]"]
        return lines + library.PUBLISHED_EXAMPLES.strip("\n").splitlines()

    def weights(self, program: Program, pruned: Plan | None) -> str:
        """Rows for every variable (:func:`tpcore.programs.weights_csv.write`)."""
        return weights_csv.write(program, published=True)


PUBLISHED = PublishedStyle()


# reading -------------------------------------------------------------------------------------


def helper_texts() -> Iterator[tuple[str, str, str, bool]]:
    """``(name, text, rule, causal)`` of every helper a published program may define."""
    for causal in (False, True):
        for name, (text, rule) in helpers_for(causal).items():
            yield name, text, rule, causal


def read_csv(r: Reader, node: ast.Assign) -> None:
    """``pd.read_csv("PATH", ...)`` (the authors' files), or of the file ``NAME`` beside the
    program (:func:`tpcore.programs.source.library.weights_beside`, what tpcore writes)."""
    r.set_style("published", node)
    call = node.value
    where = call.args[0] if isinstance(call, ast.Call) and call.args else None
    if isinstance(where, ast.Call) and len(where.args) == 2:
        where = where.args[1]  # os.path.join(<this file's folder>, "NAME")
    if not (isinstance(where, ast.Constant) and isinstance(where.value, str)):
        r.fail(node, "classifier_weights must be read with pd.read_csv(\"PATH\", ...)")
    name = where.value
    path = repr(name)
    if where is not call.args[0]:
        if not re.fullmatch(r"[\w-][\w.-]*", name):
            r.fail(node, f"weights file {shorten(name)} must be a file name")
        path = library.weights_beside(path)
    if dump(node) != canon(read_csv_line(path).text):
        r.fail(node, "unexpected pd.read_csv call")
    r.weights_name = Path(name).name


def read_scores(r: Reader, node: ast.Assign, name: str) -> None:
    """``NAME_scores = ...``: the scores of a variable defined above."""
    r.set_style("published", node)
    for var in sorted(r.defined):
        if library.scores_name(var) != name:
            continue
        if dump(node) in (canon(scores_line(var, "categorical").text),
                          canon(scores_line(var, "numerical").text)):
            r.scores[name] = var
            return
    r.fail(node, f"unexpected classifier boilerplate for {name!r}")


def read_concat(r: Reader, node: ast.Assign) -> None:
    """``feature_logits = pd.concat(...)``: the features, as the score frames it stacks."""
    names = r.matched(node, lambda: [f.id for f in node.value.args[0].generators[0].iter.elts],
                      lambda names: concat_line(names).text,
                      "unexpected feature_logits expression")
    for n in names:
        if n not in r.scores:
            r.fail(node, f"{n!r} is not a classifier score defined above")
        r.features.append(r.scores[n])


def read_trailer(r: Reader, node: ast.AST) -> bool:
    """Whether ``node`` is (part of) the examples block after ``run``: ``examples = [...]``
    (literals), the printing loop, or ``print(run([...]))`` lines."""
    if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == [
            "examples"]:
        try:
            ast.literal_eval(node.value)
        except (ValueError, TypeError):
            r.fail(node, "examples must be a literal list")
        return True
    if isinstance(node, ast.For):
        return dump(node) == canon(library.PUBLISHED_EXAMPLES) or r.fail(
            node, "only the examples printing loop is allowed after run")
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
        call = node.value
        ok = (is_name(call.func, "print") and len(call.args) == 1 and not call.keywords
              and isinstance(call.args[0], ast.Call) and is_name(call.args[0].func, "run")
              and len(call.args[0].args) == 1 and not call.args[0].keywords)
        if ok:
            try:
                ast.literal_eval(call.args[0].args[0])
                return True
            except (ValueError, TypeError):
                pass
        r.fail(node, "only print(run([...literal tokens...])) is allowed after run")
    return False
