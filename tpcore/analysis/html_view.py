"""A Transformer Program as one self-contained HTML page: its decompiled source beside every
head's predicate table and attention map on one input; hovering (or focusing) a token shows
what each head reads at that position.

The page needs nothing else (no script, style or font is fetched), so it opens offline and can
be sent as one file. Everything the program says (its names, labels, source) enters the page
escaped, as text; the data the hover reads are JSON in a ``<script type="application/json">``
element, ``<`` written as ``\\u003c``. Host-only code (NumPy and the standard library).
"""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from typing import Any

import numpy as np

from tpcore.analysis.program_figures import heads, maps_of, predicate_matrix
from tpcore.programs.interpret import encode, evaluate, predict
from tpcore.programs.ir import Program
from tpcore.programs.source import writer

CELL = 14
"""Pixels of one cell of an attention map or predicate table."""

STYLE = """
body { font: 14px system-ui, sans-serif; margin: 16px; color: #222; }
h1 { font-size: 20px; } h2 { font-size: 16px; margin: 4px 0; }
.layout { display: flex; gap: 24px; align-items: flex-start; }
pre { background: #f6f6f6; padding: 8px; font-size: 12px; max-height: 90vh; overflow: auto;
      flex: 0 1 48%; }
.heads { display: flex; flex-wrap: wrap; gap: 16px; flex: 1 1 52%; }
.head { border: 1px solid #ccc; padding: 8px; }
.tokens span { display: inline-block; min-width: 24px; padding: 4px; margin: 2px;
               border: 1px solid #999; text-align: center; cursor: pointer; }
.tokens span.on { background: #ffd54f; }
#reads { min-height: 3em; white-space: pre; font-family: monospace; }
rect.on { stroke: #e65100; stroke-width: 2; }
"""

SCRIPT = """
const data = JSON.parse(document.getElementById('data').textContent);
function show(i) {
  document.querySelectorAll('.tokens span').forEach(
    s => s.classList.toggle('on', Number(s.dataset.pos) === i));
  document.querySelectorAll('rect[data-q]').forEach(
    r => r.classList.toggle('on', Number(r.dataset.q) === i && r.dataset.a === '1'));
  const lines = [`position ${i}: ${data.tokens[i]} -> ${data.prediction[i]}`];
  for (const h of data.heads) {
    const r = h.reads[i];
    lines.push(`${h.name}: keys ${r.keys.join(', ') || '-'} -> ${h.value} ${r.value}`
               + ` -> ${h.output} ${r.output}`);
  }
  document.getElementById('reads').textContent = lines.join('\\n');
}
document.querySelectorAll('.tokens span').forEach(s => {
  s.addEventListener('mouseenter', () => show(Number(s.dataset.pos)));
  s.addEventListener('focus', () => show(Number(s.dataset.pos)));
});
"""


def _label(program: Program, var: str, value: Any) -> str:
    """The value of variable ``var`` as the program writes it: a categorical index as its
    label, a number as itself."""
    v = program.variables[var]
    if v.kind == "categorical":
        return str(v.values[int(value)])
    return f"{float(value):g}"


def _matrix_svg(matrix: np.ndarray, title: str, rows: Sequence[str], cols: Sequence[str],
                query_attr: bool) -> str:
    """An SVG grid of ``matrix`` (dark: nonzero), rows and columns labelled by tooltips; cells
    carry ``data-q`` (their row) and ``data-a`` (nonzero) when ``query_attr``."""
    n_rows, n_cols = matrix.shape
    cells = []
    for i in range(n_rows):
        for j in range(n_cols):
            on = bool(matrix[i, j])
            attrs = f' data-q="{i}" data-a="{int(on)}"' if query_attr else ""
            tip = html.escape(f"{rows[i]} -> {cols[j]}")
            cells.append(f'<rect x="{j * CELL}" y="{i * CELL}" width="{CELL}" height="{CELL}" '
                         f'fill="{"#263238" if on else "#fff"}" stroke="#ddd"{attrs}>'
                         f"<title>{tip}</title></rect>")
    return (f'<svg width="{n_cols * CELL}" height="{n_rows * CELL}" role="img" '
            f'aria-label="{html.escape(title)}">{"".join(cells)}</svg>')


def page_data(program: Program, tokens: Sequence[str]) -> dict[str, Any]:
    """What the page shows of ``program`` on the framed input ``tokens``: per head its
    attention and, per query position, the keys it reads, the value it reads and its output."""
    ids, lengths = encode(program, [list(tokens)])
    env = evaluate(program, ids, lengths)
    maps = maps_of(program, env, lengths)
    rows = []
    for h in heads(program):
        a = maps[h.name]
        reads = [{"keys": [int(j) for j in np.flatnonzero(a[i])],
                  "value": ", ".join(_label(program, h.value, env[h.value][0, j])
                                     for j in np.flatnonzero(a[i])) or "-",
                  "output": _label(program, h.output, env[h.output][0, i])}
                 for i in range(len(tokens))]
        rows.append({"name": h.name, "kind": h.kind, "query": h.query, "key": h.key,
                     "value": h.value, "output": h.output, "attention": a.tolist(),
                     "reads": reads})
    return {"program": program.name, "tokens": list(tokens),
            "prediction": predict(program, [list(tokens)], engine="numpy")[0], "heads": rows}


def program_html(program: Program, tokens: Sequence[str], full: bool = False) -> str:
    """The page (module docstring) for ``program`` on the framed input ``tokens``; ``full``:
    the source before compression."""
    data = page_data(program, tokens)
    v = program.variables
    token_spans = "".join(f'<span tabindex="0" data-pos="{i}">{html.escape(str(t))}</span>'
                          for i, t in enumerate(tokens))
    cards = []
    for h, row in zip(heads(program), data["heads"]):
        where = [f"{i}: {t}" for i, t in enumerate(tokens)]
        attention = _matrix_svg(np.asarray(row["attention"]), f"{h.name} attention", where,
                                where, True)
        predicate = _matrix_svg(predicate_matrix(program, h), f"{h.name} predicate",
                                [str(x) for x in v[h.query].values],
                                [str(x) for x in v[h.key].values], False)
        cards.append(
            f'<div class="head"><h2>{html.escape(h.name)} ({h.kind})</h2>'
            f"<div>query {html.escape(h.query)}, key {html.escape(h.key)}, value "
            f"{html.escape(h.value)}</div><div>attention on this input (query rows, key "
            f"columns)</div>{attention}<div>predicate (query values x key values)</div>"
            f"{predicate}</div>")
    payload = json.dumps(data).replace("<", "\\u003c")
    source = html.escape(writer.source(program, compress=not full))
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f"<title>{html.escape(program.name)}</title><style>{STYLE}</style></head><body>"
            f"<h1>Transformer Program {html.escape(program.name)}</h1>"
            f'<div class="tokens">{token_spans}</div><div id="reads">hover a token to see what '
            f"each head reads there</div>"
            f'<div class="layout"><pre>{source}</pre><div class="heads">{"".join(cards)}</div>'
            f"</div>"
            f'<script type="application/json" id="data">{payload}</script>'
            f"<script>{SCRIPT}</script></body></html>\n")
