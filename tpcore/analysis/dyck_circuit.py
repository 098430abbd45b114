"""The Dyck circuit of "Learning Transformer Programs" (its Fig. 9), looked for in a program.

A bracket string is invalid from the first closer that does not match the innermost open
bracket. One way a program finds the commonest such closer, the one right after an opener of
another type (``(}``, ``{)``), is the circuit the paper draws for Dyck-2:

1. a **previous-token head**: a categorical head with positions as query and key whose
   predicate sends every query position ``q >= 1`` to key position ``q - 1``, and tokens as
   value, so that its output at ``q`` is the token before it;
2. a **flag MLP**: a categorical MLP reading the token and that head's output, whose table
   gives the mismatched pairs (opener, closer of another type) values that no matched pair
   (opener, its own closer) gets: the flag;
3. **readers**: the later modules that read the flag MLP's output, e.g. a head that carries
   the flag from the position where it was raised to the positions after it.

:func:`find` reads these off a program's tables (no data), :func:`check` measures on random
bracket strings what the circuit does where the first error is such a pair, and
:func:`report` writes both in words. Host-side analysis (NumPy and the standard library).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tpcore.errors import TpcoreError
from tpcore.programs.interpret import encode, evaluate, run_reference
from tpcore.programs.ir import Head, Mlp, Program
from tpcore.tasks.rasp import dyck_labels

BRACKETS = (("(", ")"), ("{", "}"), ("[", "]"))
"""Bracket types, ``(opener, closer)``, in the order the Dyck tasks number them."""
MAX_SAMPLES = 1_000_000
"""The most random strings :func:`check` draws."""


@dataclass
class Flag:
    """A flag MLP: ``mlp`` reads the tokens and the previous-token head ``head``'s output;
    ``values`` (labels of its output) are those of every mismatched pair and of no matched one;
    ``pairs``: every (previous token, token) pair it maps into ``values``."""

    mlp: str
    head: str
    values: list[Any]
    pairs: list[tuple[str, str]]
    readers: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Circuit:
    """What :func:`find` found: the previous-token heads and the flag MLPs that read them."""

    previous_heads: list[str]
    flags: list[Flag]


def brackets(p: Program) -> list[tuple[str, str]]:
    """The bracket types whose opener and closer are both tokens of ``p``, in task order;
    refused unless there are two or more."""
    labels = set(p.tokens.values)
    pairs = [b for b in BRACKETS if set(b) <= labels]
    if len(pairs) < 2:
        raise TpcoreError(f"{p.name}: bracket types {[o + c for o, c in pairs]} among the tokens "
                          f"{sorted(map(str, labels))}; expected a Dyck program of two or more "
                          "(tokens among ( ) { } [ ]), where a closer can mismatch an opener")
    return pairs


def _share(hits: np.ndarray) -> float | None:
    """The mean of a boolean array; None when it is empty."""
    return float(hits.mean()) if hits.size else None


def previous_token_heads(p: Program) -> list[Head]:
    """Categorical heads of ``p`` that copy the token one position back: query and key
    ``positions``, value ``tokens``, every query position ``q >= 1`` matched to ``q - 1``."""
    out = []
    for m in p.modules:
        if not (isinstance(m, Head) and m.kind == "categorical" and m.query == "positions"
                and m.key == "positions" and m.value == "tokens"):
            continue
        labels = p.variables["positions"].values
        index = p.variables["positions"].lookup
        if all(m.predicate[index[q]] == index.get(q - 1, -2) for q in labels if q >= 1):
            out.append(m)
    return out


def _flag(p: Program, mlp: Mlp, head: Head, pairs: list[tuple[str, str]]) -> Flag | None:
    """``mlp`` as a flag MLP over ``head``'s output, or None where its mismatched pairs share
    a value with a matched pair."""
    tokens, previous = p.tokens.lookup, p.variables[head.output].lookup
    first_is_token = mlp.inputs[0] == "tokens"
    out_labels = p.variables[mlp.output].values

    def value(prev: str, cur: str) -> int:
        a, b = previous[prev], tokens[cur]
        return int(mlp.table[b, a] if first_is_token else mlp.table[a, b])

    mismatched = {value(o, c) for o, _ in pairs for _, c in pairs if (o, c) not in pairs}
    matched = {value(o, c) for o, c in pairs}
    if not mismatched or mismatched & matched:
        return None
    every = [(a, b) for a in p.tokens.values for b in p.tokens.values
             if value(a, b) in mismatched]
    return Flag(mlp=mlp.name, head=head.name, values=[out_labels[v] for v in sorted(mismatched)],
                pairs=every)


def _readers(p: Program, flag: Flag) -> list[dict[str, Any]]:
    """The modules after ``flag.mlp`` that read its output: their kind, what they read, in
    words, and for a head keyed on the flag, how many query values match a flagged key."""
    variable = p.module(flag.mlp).output
    out_index = p.variables[variable].lookup
    flagged = {out_index[v] for v in flag.values}
    rows = []
    for m in p.modules:
        if variable not in m.reads:
            continue
        row = {"module": m.name, "kind": m.summary(), "reads": list(m.reads),
               "computes": m.describe()}
        if isinstance(m, Head) and m.key == variable:
            hits = sum(int(k) in flagged for k in m.predicate)
            row["queries_matching_a_flag"] = [hits, len(m.predicate)]
        rows.append(row)
    return rows


def find(p: Program) -> Circuit:
    """The circuit's parts in ``p`` (see the module docstring), from its tables alone."""
    pairs = brackets(p)
    heads = previous_token_heads(p)
    flags = []
    for head in heads:
        for m in p.modules:
            if isinstance(m, Mlp) and m.kind == "categorical" and \
                    sorted(m.inputs) == sorted(("tokens", head.output)):
                flag = _flag(p, m, head, pairs)
                if flag is not None:
                    flag.readers = _readers(p, flag)
                    flags.append(flag)
    return Circuit([h.name for h in heads], flags)


def check(p: Program, circuit: Circuit, samples: int = 20_000, seed: int = 0) -> dict[str, Any]:
    """On ``samples`` random bracket strings of the program's length: at the first error when
    it is a closer right after an opener of another type (a mismatch), and at a closer right
    after its own opener in a valid prefix (a match), how often each flag MLP raises its flag
    and the program predicts F (invalid), and how often it predicts F at every position after
    a mismatch; and the program's accuracy on all positions of the strings."""
    pairs = brackets(p)
    if not 1 <= samples <= MAX_SAMPLES:
        raise TpcoreError(f"samples {samples}: expected 1 to {MAX_SAMPLES:,}")
    n = p.max_len - (p.bos is not None) - (p.eos is not None)
    if n < 2:
        raise TpcoreError(f"{p.name}: inputs of {n} brackets hold no pair of them")
    # uniform strings, coded as the Dyck tasks code them: 2 t opens type t, 2 t + 1 closes it
    x = np.random.default_rng(seed).integers(0, 2 * len(pairs), (samples, n))
    labels = dyck_labels(x, len(pairs))
    words = [w for pair in pairs for w in pair]
    ids, lengths = encode(p, [p.frame([words[t] for t in row]) for row in x])
    env = evaluate(p, ids, lengths)
    pred = run_reference(p, ids, lengths, env)
    offset = int(p.bos is not None)
    outputs = p.output_labels()
    classes = {c: outputs.index(c) for c in ("T", "P", "F") if c in outputs}
    if set(classes) != {"T", "P", "F"}:
        raise TpcoreError(f"{p.name}: classes {list(outputs)}; expected T, P and F")
    want = np.array([classes[c] for c in "TPF"])[labels]
    got = pred[:, offset:offset + n]
    first_bad = np.where((labels == 2).any(1), (labels == 2).argmax(1), n)
    rows = np.arange(samples)
    at = np.clip(first_bad, 1, n - 1)
    prev, cur = x[rows, at - 1], x[rows, at]
    opener_before = prev % 2 == 0
    mismatch = (first_bad >= 1) & (first_bad < n) & opener_before & (cur % 2 == 1) & \
        (cur // 2 != prev // 2)
    i, j = np.nonzero((x[:, 1:] % 2 == 1) & (x[:, :-1] % 2 == 0) & (x[:, 1:] // 2 == x[:, :-1] // 2)
                      & (labels[:, 1:] != 2))
    match_rows, match_at = i, j + 1
    mm_rows, mm_at = rows[mismatch], first_bad[mismatch]
    after = np.arange(n)[None, :] >= first_bad[mismatch][:, None]
    result: dict[str, Any] = {
        "samples": samples, "seed": seed, "length": n,
        "accuracy": float((got == want).mean()),
        "mismatches": int(mismatch.sum()), "matches": int(len(match_rows)),
        "predicts_F_at_mismatch": _share(got[mm_rows, mm_at] == classes["F"]),
        "predicts_F_after_mismatch": _share((got[mismatch] == classes["F"])[after]),
        "flags": {}}
    for flag in circuit.flags:
        out = p.module(flag.mlp).output
        index = p.variables[out].lookup
        raised = np.isin(env[out], [index[v] for v in flag.values])[:, offset:offset + n]
        result["flags"][flag.mlp] = {
            "raised_at_mismatch": _share(raised[mm_rows, mm_at]),
            "raised_at_match": _share(raised[match_rows, match_at])}
    return result


def report(p: Program, circuit: Circuit, checked: dict[str, Any] | None = None) -> str:
    """The circuit in words (and what :func:`check` measured)."""
    lines = [f"# {p.name}: the Dyck circuit (paper Fig. 9)"]
    if not circuit.previous_heads:
        lines.append("no previous-token head (positions -> position - 1, value tokens)")
    else:
        lines.append("previous-token heads: " + ", ".join(circuit.previous_heads))
    if circuit.previous_heads and not circuit.flags:
        lines.append("no MLP over (token, previous token) flags the mismatched pairs apart "
                     "from the matched ones")
    for f in circuit.flags:
        shown = ", ".join(a + b for a, b in f.pairs)
        lines.append(f"flag: {f.mlp} reads tokens and {f.head}; value "
                     f"{' or '.join(map(str, f.values))} on the pairs {shown}")
        for r in f.readers:
            extra = ""
            if "queries_matching_a_flag" in r:
                hits, total = r["queries_matching_a_flag"]
                extra = f"; {hits} of {total} query values attend to a flagged key"
            lines.append(f"  read by {r['module']} ({r['kind']}): {r['computes']}{extra}")
        if not f.readers:
            lines.append("  read by the classifier only")
    if checked:
        lines.append(f"on {checked['samples']:,} random strings of {checked['length']} "
                     f"brackets (seed {checked['seed']}): accuracy {checked['accuracy']:.4f}; "
                     f"{checked['mismatches']:,} first errors are a mismatched pair, where the "
                     f"program predicts F {checked['predicts_F_at_mismatch']:.4f} of the time "
                     f"and at {checked['predicts_F_after_mismatch']:.4f} of the positions "
                     "from there on")
        for name, f in checked["flags"].items():
            lines.append(f"  {name} raises its flag at {f['raised_at_mismatch']:.4f} of those "
                         f"and at {f['raised_at_match']:.4f} of {checked['matches']:,} matched "
                         "pairs in valid prefixes")
    return "\n".join(lines)
