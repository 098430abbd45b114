"""Program IR -> a readable, standalone Python program plus its classifier weights CSV.

Paper style (Figure 4, Appendix A.3): one ``predicate_L_H`` per head made of ``if q in {...}:
return k == v`` branches, one ``mlp_L_M`` per MLP with ``if key in {...}: return v`` branches and
a default ``return``; values are typed labels (token strings, ints). Lines have at most 88
characters, sets one element per line when they do not fit on one (black's layout).
``compress=True`` (default) writes the program as :func:`tpcore.programs.compress.plan` allows,
with the same predictions on every framed input; ``compress=False`` writes every module in full
(:mod:`~tpcore.programs.source.sections`).

Two styles (:data:`STYLES`): ``"tpcore"`` needs the standard library only and runs as ``python
NAME.py 3 1 4 2`` (:mod:`~tpcore.programs.source.tpcore_style`); ``"published"`` writes the
authors' format (pandas classifier boilerplate, their ``select_closest``), which requires every
categorical head to use the ``published`` rule (:mod:`~tpcore.programs.source.published_style`).
Host-only code (NumPy and the standard library).
"""

from __future__ import annotations

from pathlib import Path

from tpcore.errors import TpcoreError
from tpcore.io import write_text
from tpcore.programs.compress import Plan
from tpcore.programs.ir import Program, check_name
from tpcore.programs.source.layout import indented, literal
from tpcore.programs.source.published_style import PUBLISHED
from tpcore.programs.source.sections import Sections
from tpcore.programs.source.style import Style
from tpcore.programs.source.templates import RUN, passthrough, weights_csv_name
from tpcore.programs.source.tpcore_style import TPCORE

FORMATS: dict[str, Style] = {s.name: s for s in (TPCORE, PUBLISHED)}
STYLES = tuple(FORMATS)
"""The styles a program can be written in."""


def source(program: Program, style: str = "tpcore", compress: bool = True,
           weights_file: str | None = None) -> str:
    """The program's Python source (see the module docstring for styles and compression)."""
    return _render(program, style, compress, weights_file)[0]


def _render(program: Program, style: str, compress: bool,
            weights_file: str | None) -> tuple[str, Plan | None, dict[str, int]]:
    """The source, the plan its classifier follows when modules were pruned, and the lines of
    each module written (its function and lines, or its literal)."""
    if style not in FORMATS:
        raise TpcoreError(f"unknown style {style!r}; expected one of {STYLES}")
    p, fmt = program, FORMATS[style]
    w = Sections(p, fmt, compress)
    weights_file = weights_file or weights_csv_name(p.name)
    body = [RUN, *fmt.inputs(p, weights_file), *w.constants()]
    for m in w.written():
        body += w.module(m)
    body += fmt.classify(p, w.features())
    if p.passthrough and p.bos is not None:
        body += indented(4, passthrough("0", literal(p.bos)))
    if p.passthrough and p.eos is not None:
        body += indented(4, passthrough("-1", literal(p.eos)))
    body.append(f"    {fmt.returns}")
    helpers = [src.strip("\n") for name, (src, _) in w.helpers.items() if w.uses(name)]
    helpers += [src.strip("\n") for src in w.extra.values()]
    head = fmt.header(p, weights_file, w.extra)
    helpers += fmt.library()
    parts = ["\n".join(head), *helpers, "\n".join(body).rstrip("\n")]
    text = "\n\n\n".join(parts) + "\n"
    text += "\n\n" + "\n".join(fmt.trailer(p)) + "\n"
    return text, w.pruned, w.sections


def write(program: Program, path: str | Path, style: str = "tpcore",
          compress: bool = True) -> tuple[Path, Path]:
    """Write ``NAME.py`` and ``NAME_weights.csv`` atomically; ``path`` is the ``.py`` file or a
    folder (then ``<folder>/<program name>.py``, which must resolve to a file inside it).
    Returns both paths."""
    path = Path(path)
    if path.suffix != ".py":
        folder, path = path, path / f"{check_name(program.name, 'program name')}.py"
        for p in (path, path.with_name(weights_csv_name(path.stem))):
            if p.resolve().parent != folder.resolve():
                raise TpcoreError(f"{p} resolves outside the output folder {folder}")
    csv_path = path.with_name(weights_csv_name(path.stem))
    text, pruned, _ = _render(program, style, compress, csv_path.name)
    write_text(csv_path, FORMATS[style].weights(program, pruned))
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
