"""Source text of the library functions that generated programs define, in both formats.

``tpcore`` programs (standard library only) and the published format (the authors' programs, which
use pandas for the classifier) share the shape of ``run`` but differ in their helpers. Code
generation writes these texts; the importer accepts a helper only when its syntax tree equals one of
them (docstrings aside), which is how it learns the file's ``select_closest`` rule and causality.
Host-only code (standard library).
"""

from __future__ import annotations

# tpcore helpers -----------------------------------------------------------------------------

_SELECT_CLOSEST = '''
def {name}(keys, queries, predicate):
    """Query i attends to the nearest key j with predicate(q_i, k_j), the earlier one
    on equal distance, itself only when no other key matches, key 0 when none does."""
    scores = [[False] * len(keys) for _ in queries]
    for i, q in enumerate(queries):
        matches = [j for j, k in enumerate({keys}) if predicate(q, k)]
        others = [j for j in matches if j != i] or matches or [0]
        scores[i][min(others, key=lambda j: (abs(i - j), j))] = True
    return scores
'''

_SELECT_PUBLISHED_OURS = '''
def {name}(keys, queries, predicate):
    """The published programs' rule: matching key j ranks |i - j|, the query's own
    position ranks len(matches); the first minimum wins; key 0 when none matches."""
    scores = [[False] * len(keys) for _ in queries]
    for i, q in enumerate(queries):
        matches = [j for j, k in enumerate({keys}) if predicate(q, k)] or [0]
        rank = [len(matches) if j == i else abs(i - j) for j in matches]
        scores[i][matches[rank.index(min(rank))]] = True
    return scores
'''

_SELECT = '''
def select(keys, queries, predicate):
    """Selector: row i marks every key j with predicate(q_i, k_j)."""
    return [
        [bool(predicate(q, k)) for k in {keys}] for i, q in enumerate(queries)
    ]
'''

_AGGREGATE = '''
def aggregate(attention, values):
    """Categorical output: the value at the one key each query attends to."""
    return [values[row.index(True)] for row in attention]
'''

_AGGREGATE_SUM = '''
def aggregate_sum(attention, values):
    """Numerical output: the sum of the values at the selected keys of each query."""
    return [sum(v for a, v in zip(row, values) if a) for row in attention]
'''

LOAD_WEIGHTS = '''
@functools.lru_cache(maxsize=None)
def load_weights():
    """Weights CSV beside this file -> (classes, {(feature, value): row of scores})."""
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), WEIGHTS)) as f:
        rows = list(csv.reader(f))
    weights = {(r[0], r[1]): [float(x) for x in r[2:]] for r in rows[1:]}
    return rows[0][2:], weights
'''

CLASSIFY = '''
def classify(features):
    """Per position, add up each feature's row (a numerical feature's "_" row times its
    value); the first class with the largest sum wins."""
    classes, weights = load_weights()
    predictions = []
    for i in range(len(features[0][1])):
        scores = weights.get(("bias", "_"), [0.0] * len(classes))
        for name, values in features:
            if (name, "_") in weights:
                row = [values[i] * w for w in weights[(name, "_")]]
            else:
                row = weights[(name, str(values[i]))]
            scores = [s + r for s, r in zip(scores, row)]
        predictions.append(classes[max(range(len(classes)), key=scores.__getitem__)])
    return predictions
'''

GATE_SCORE = '''
def gate_score(bias, weights, counts):
    """An expert's gate score: bias + weight * count for each token, added in vocabulary
    order (the interpreter's order, so that near-ties break the same way)."""
    score = bias
    for weight, count in zip(weights, counts):
        score += weight * count
    return score
'''

FLOAT32 = '''
def float32(x):
    """x rounded to the nearest float32 (the model divides relative frequencies in float32)."""
    return struct.unpack("f", struct.pack("f", x))[0]
'''

MAIN = '''
if __name__ == "__main__":
    tokens = sys.argv[1:]
    if BOS is not None and tokens[:1] != [BOS]:
        tokens = [BOS] + tokens
    if EOS is not None and tokens[-1:] != [EOS]:
        tokens = tokens + [EOS]
    unknown = [t for t in tokens if t not in VOCAB]
    if unknown or len(tokens) > MAX_LEN:
        sys.exit(f"tokens must be in {VOCAB}, at most {MAX_LEN} of them: {unknown}")
    print(" ".join(str(p) for t, p in zip(tokens, run(tokens)) if t not in (BOS, EOS)))
'''

# published-format helpers (the authors' text, recognised by the importer) -----------------

_PUB_SELECT_CLOSEST = '''
def select_closest(keys, queries, predicate):
    scores = [[False for _ in keys] for _ in queries]
    for i, q in enumerate(queries):
        matches = [j for j, k in enumerate({keys}) if predicate(q, k)]
        if not (any(matches)):
            scores[i][0] = True
        else:
            j = min(matches, key=lambda j: len(matches) if j == i else abs(i - j))
            scores[i][j] = True
    return scores
'''

_PUB_SELECT = '''
def select(keys, queries, predicate):
    return [[predicate(q, k) for k in {keys}] for {loop}]
'''

_PUB_AGGREGATE = '''
def aggregate(attention, values):
    return [[v for a, v in zip(attn, values) if a][0] for attn in attention]
'''

_PUB_AGGREGATE_SUM = '''
def aggregate_sum(attention, values):
    return [sum([v for a, v in zip(attn, values) if a]) for attn in attention]
'''


PUBLISHED_EXAMPLES = '''
for x, y in examples:
    print(f"x: {x}")
    print(f"y: {y}")
    y_hat = run(x)
    print(f"y_hat: {y_hat}")
    print()
'''
"""The published programs' closing loop over their ``examples`` list."""


def weights_beside(literal_name: str) -> str:
    """The published-format expression for the weights CSV ``literal_name`` (a string literal)
    in the program file's own folder, so that the program runs from any working directory
    (the authors' files give a path relative to their repository instead)."""
    return f"os.path.join(os.path.dirname(os.path.abspath(__file__)), {literal_name})"


def stem(name: str) -> str:
    """``name`` without a trailing ``s`` (``tokens`` -> ``token``): what generated code names
    an argument or a classifier-score frame after a variable."""
    return name[:-1] if name.endswith("s") else name


def scores_name(var: str) -> str:
    """The published format's classifier-score frame of variable ``var`` (``token_scores``)."""
    return f"{stem(var)}_scores"


def _keys(causal: bool) -> str:
    return "keys[: i + 1]" if causal else "keys"


def tpcore_helpers(rules: tuple[str, ...], causal: bool) -> dict[str, tuple[str, str]]:
    """``{function name: (source, rule)}`` for a tpcore program using ``rules`` (rule ``""`` for
    helpers that are not select_closest). The closest rule is called ``select_closest``; the
    published rule too unless both are used, when it is ``select_closest_published``."""
    keys = _keys(causal)
    out: dict[str, tuple[str, str]] = {}
    pub_name = "select_closest_published" if "closest" in rules else "select_closest"
    if "closest" in rules:
        out["select_closest"] = (_SELECT_CLOSEST.format(name="select_closest", keys=keys),
                                 "closest")
    if "published" in rules:
        out[pub_name] = (_SELECT_PUBLISHED_OURS.format(name=pub_name, keys=keys), "published")
    out["select"] = (_SELECT.format(keys=keys), "")
    out["aggregate"] = (_AGGREGATE, "")
    out["aggregate_sum"] = (_AGGREGATE_SUM, "")
    return out


def published_helpers(causal: bool) -> dict[str, str]:
    """The published format's helper texts (non-causal, or causal with ``keys[: i + 1]``)."""
    keys = _keys(causal)
    loop = "i, q in enumerate(queries)" if causal else "q in queries"
    return {
        "select_closest": _PUB_SELECT_CLOSEST.format(keys=keys),
        "select": _PUB_SELECT.format(keys=keys, loop=loop),
        "aggregate": _PUB_AGGREGATE,
        "aggregate_sum": _PUB_AGGREGATE_SUM,
    }
