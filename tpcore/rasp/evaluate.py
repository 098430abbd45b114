"""The written program's own interpreter: the meaning of each primitive, run on a batch.

This is the reference that the compiled model and the IR's engines are checked against, so it
reads the program graph directly (not the IR) and states the semantics of
:mod:`tpcore.rasp.lang` once more, plainly. Inputs are token indices ``ids: (B, N)`` and
``lengths: (B,)``; a categorical node is carried as value indices ``(B, N)``, a numerical one as
``(B, N)`` float64. Host-only code (NumPy).
"""

from __future__ import annotations

import numpy as np

from tpcore.rasp import lang


def closest_match(match: np.ndarray) -> np.ndarray:
    """For ``match: (B, N, N)`` (query ``i`` may attend key ``j``), the key each query attends:
    the nearest matching key, the earlier of two at equal distance, the query itself only when
    no other key matches, and key 0 when none does. ``(B, N)``."""
    n = match.shape[-1]
    i, j = np.arange(n)[:, None], np.arange(n)[None, :]
    rank = np.where(i == j, 2 * n + 1, 2 * np.abs(i - j) + (j > i))
    best = np.where(match, rank[None], 4 * n).argmin(axis=-1)
    return np.where(match.any(axis=-1), best, 0)


def evaluate(program: lang.Program, ids: np.ndarray, lengths: np.ndarray
             ) -> dict[lang.Node, np.ndarray]:
    """Every node's values on the batch (module docstring)."""
    b, n = ids.shape
    pos = np.arange(n)
    visible = (pos[None, None, :] < lengths[:, None, None])
    if program.causal:
        visible = visible & (pos[None, None, :] <= pos[None, :, None])
    env: dict[lang.Node, np.ndarray] = {}
    for node, r in program.nodes.items():
        if node is lang.tokens:
            env[node] = ids
        elif node is lang.indices:
            env[node] = np.broadcast_to(pos, (b, n))
        elif node is lang.ones:
            env[node] = np.ones((b, n))
        elif isinstance(node, lang.Aggregate):
            keys, queries, values = (env[p] for p in node.parents)
            target = np.asarray(r.predicate)[queries]
            match = visible & (target[:, :, None] >= 0) & (keys[:, None, :] ==
                                                             target[:, :, None])
            if node.kind == lang.CATEGORICAL:
                env[node] = np.take_along_axis(values, closest_match(match), axis=1)
            else:
                env[node] = (match * values[:, None, :]).sum(axis=-1)
        else:
            env[node] = _lookup(program, node, [env[p] for p in node.parents])
    return env


def _lookup(program: lang.Program, node: lang.Node, args: list[np.ndarray]) -> np.ndarray:
    """A map's table at its inputs' values (indices of categorical inputs; numerical values
    turned into their indices)."""
    flat = np.zeros(args[0].shape, dtype=np.int64)
    for p, x in zip(node.parents, args):
        values = program.nodes[p].values
        if p.kind == lang.NUMERICAL:  # sorted values, of which x holds only listed ones
            x = np.searchsorted(np.asarray(values, dtype=np.float64), x)
        flat = flat * len(values) + x
    return np.asarray(program.nodes[node].table)[flat]


def predictions(program: lang.Program, ids: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Class indices ``(B, N)``: the output's label at each position, as a class."""
    out = program.nodes[program.output].values
    classes = list(program.classes or ())
    to_class = np.asarray([classes.index(str(v)) for v in out])
    return to_class[evaluate(program, ids, lengths)[program.output]]
