"""The importer: round trips, the published format, and refusal of anything else."""

from __future__ import annotations

import numpy as np
import pytest

from tpcore.programs import interpret as it
from tpcore.programs.examples import random_inputs, random_program, reverse_program
from tpcore.programs.source import grammar, reader, writer

pytestmark = pytest.mark.host_only("parses program files into the host-side program IR")

HIST = '''import numpy as np
import pandas as pd


def select_closest(keys, queries, predicate):
    scores = [[False for _ in keys] for _ in queries]
    for i, q in enumerate(queries):
        matches = [j for j, k in enumerate(keys) if predicate(q, k)]
        if not (any(matches)):
            scores[i][0] = True
        else:
            j = min(matches, key=lambda j: len(matches) if j == i else abs(i - j))
            scores[i][j] = True
    return scores


def select(keys, queries, predicate):
    return [[predicate(q, k) for k in keys] for q in queries]


def aggregate(attention, values):
    return [[v for a, v in zip(attn, values) if a][0] for attn in attention]


def aggregate_sum(attention, values):
    return [sum([v for a, v in zip(attn, values) if a]) for attn in attention]


def run(tokens):

    # classifier weights ##########################################
    classifier_weights = pd.read_csv(
        "programs/hist/hist_weights.csv", index_col=[0, 1], dtype={"feature": str}
    )
    # inputs #####################################################
    token_scores = classifier_weights.loc[[("tokens", str(v)) for v in tokens]]

    positions = list(range(len(tokens)))
    position_scores = classifier_weights.loc[[("positions", str(v)) for v in positions]]

    ones = [1 for _ in range(len(tokens))]
    one_scores = classifier_weights.loc[[("ones", "_") for v in ones]].mul(ones, axis=0)

    # attn_0_0 ####################################################
    def predicate_0_0(q_position, k_position):
        if q_position in {0, 1}:
            return k_position == 0
        elif q_position in {2, 3}:
            return k_position == 1

    attn_0_0_pattern = select_closest(positions, positions, predicate_0_0)
    attn_0_0_outputs = aggregate(attn_0_0_pattern, tokens)
    attn_0_0_output_scores = classifier_weights.loc[
        [("attn_0_0_outputs", str(v)) for v in attn_0_0_outputs]
    ]

    # num_attn_0_0 ####################################################
    def num_predicate_0_0(q_token, k_token):
        if q_token in {"0"}:
            return k_token == "0"
        elif q_token in {"1"}:
            return k_token == "1"
        elif q_token in {"<s>"}:
            return k_token == "<pad>"

    num_attn_0_0_pattern = select(tokens, tokens, num_predicate_0_0)
    num_attn_0_0_outputs = aggregate_sum(num_attn_0_0_pattern, ones)
    num_attn_0_0_output_scores = classifier_weights.loc[
        [("num_attn_0_0_outputs", "_") for v in num_attn_0_0_outputs]
    ].mul(num_attn_0_0_outputs, axis=0)

    # num_mlp_0_0 #################################################
    def num_mlp_0_0(num_attn_0_0_output):
        key = num_attn_0_0_output
        if key in {0, 1}:
            return 2
        return 3

    num_mlp_0_0_outputs = [num_mlp_0_0(k0) for k0 in num_attn_0_0_outputs]
    num_mlp_0_0_output_scores = classifier_weights.loc[
        [("num_mlp_0_0_outputs", str(v)) for v in num_mlp_0_0_outputs]
    ]

    feature_logits = pd.concat(
        [
            df.reset_index()
            for df in [
                token_scores,
                position_scores,
                attn_0_0_output_scores,
                num_mlp_0_0_output_scores,
                one_scores,
                num_attn_0_0_output_scores,
            ]
        ]
    )
    logits = feature_logits.groupby(level=0).sum(numeric_only=True).to_numpy()
    classes = classifier_weights.columns.to_numpy()
    predictions = classes[logits.argmax(-1)]
    if tokens[0] == "<s>":
        predictions[0] = "<s>"
    if tokens[-1] == "</s>":
        predictions[-1] = "</s>"
    return predictions.tolist()


examples = [(["<s>", "1", "0", "1"], ["<pad>", "2", "1", "2"])]
for x, y in examples:
    print(f"x: {x}")
    print(f"y: {y}")
    y_hat = run(x)
    print(f"y_hat: {y_hat}")
    print()
'''


def _weights() -> str:
    """Classes 1, 2, 3: a token's count c scores (0.5 - c, 0, c - 0.5); num_mlp_0_0 = 2 (count
    0 or 1) adds 5 to class "2"; everything else is zero."""
    rows = ["feature,value,1,2,3"]
    for t in ("0", "1", "<pad>", "<s>"):
        rows += [f"tokens,{t},0,0,0", f"attn_0_0_outputs,{t},0,0,0"]
    rows += [f"positions,{i},0,0,0" for i in range(4)]
    rows += [f"num_mlp_0_0_outputs,{i},0,{5 if i == 2 else 0},0" for i in range(4)]
    rows += ["ones,_,0.5,0,-0.5", "num_attn_0_0_outputs,_,-1,0,1"]
    return "\n".join(rows) + "\n"


def _write(tmp_path, text, name="hist"):
    (tmp_path / f"{name}.py").write_text(text)
    (tmp_path / f"{name}_weights.csv").write_text(_weights())
    return tmp_path / f"{name}.py"


def test_hand_written_published_program(tmp_path):
    p = reader.parse_file(_write(tmp_path, HIST))
    assert p.meta["format"] == "published" and p.max_len == 4
    assert p.module("attn_0_0").rule == "published"
    # vocabulary from the CSV: 0, 1, <pad>, <s>; "<s>" looks for "<pad>"; "<pad>" matches nothing
    assert p.module("num_attn_0_0").predicate.tolist() == [0, 1, -1, 2]
    assert p.variables["attn_0_0_outputs"].values == ("0", "1", "<pad>", "<s>")
    seqs = [["<s>", "1", "0", "1"], ["<s>", "0", "0", "0"], ["<s>", "1"]]
    for engine in it.ENGINES:
        # count 1 -> "2" (the MLP), count >= 2 -> "3"; BOS passes through
        assert it.predict(p, seqs, engine) == [["<s>", "3", "2", "3"], ["<s>", "3", "3", "3"],
                                               ["<s>", "2"]]


MALICIOUS = [
    ('            return k_position == 0', '            return __import__("os").system("x")',
     "literal"),
    ('        if q_position in {0, 1}:', '        if q_position in {open("/etc/passwd")}:',
     "literal"),
    ("import pandas as pd", "import pandas as pd\nimport subprocess", "import of 'subprocess'"),
    ("import pandas as pd", "import pandas as pd\nimport os.path", "import of 'os.path'"),
    ("    positions = list(range(len(tokens)))",
     "    positions = list(range(len(tokens)))\n    eval('1')", "not allowed"),
    ("def run(tokens):", "exec('print(1)')\n\n\ndef run(tokens):", "not allowed"),
    ("            scores[i][0] = True", "            scores[i][0] = print('hi')",
     "differs from the known"),
    ("    attn_0_0_outputs = aggregate(attn_0_0_pattern, tokens)",
     "    attn_0_0_outputs = eval(attn_0_0_pattern, tokens)", "aggregate"),
    ('        "programs/hist/hist_weights.csv", index_col=[0, 1], dtype={"feature": str}',
     '        __import__("os").getcwd(), index_col=[0, 1], dtype={"feature": str}', "read_csv"),
    ('        "programs/hist/hist_weights.csv", index_col=[0, 1], dtype={"feature": str}',
     '        os.path.join(os.getcwd(), "hist_weights.csv"), index_col=[0, 1], '
     'dtype={"feature": str}', "read_csv"),
    ('        "programs/hist/hist_weights.csv", index_col=[0, 1], dtype={"feature": str}',
     '        os.path.join(os.path.dirname(os.path.abspath(__file__)), "../hist_weights.csv"), '
     'index_col=[0, 1], dtype={"feature": str}', "must be a file name"),
    ('        "programs/hist/hist_weights.csv", index_col=[0, 1], dtype={"feature": str}',
     '        os.path.join(os.path.dirname(os.path.abspath(__file__)), os.system("x")), '
     'index_col=[0, 1], dtype={"feature": str}', "read_csv"),
    ("    return predictions.tolist()", "    return predictions.tolist() or exit()", "expected"),
    ("        return 3\n", "        return 3\n    del tokens\n", "not allowed"),
    ('    print(f"x: {x}")', '    print(f"x: {x}")\n    import os', "examples"),
    ("examples = [", "examples = [__import__('os')] + [", "literal"),
    ("    def num_mlp_0_0(num_attn_0_0_output):",
     "    @staticmethod\n    def num_mlp_0_0(num_attn_0_0_output):", "plain positional"),
]


@pytest.mark.parametrize("old, new, message", MALICIOUS)
def test_malicious_programs_are_refused(tmp_path, old, new, message):
    assert old in HIST
    path = _write(tmp_path, HIST.replace(old, new, 1))
    with pytest.raises(grammar.ProgramSyntaxError, match=f"hist.py:\\d+: .*{message}"):
        reader.parse_file(path)


def test_syntax_error_names_file_and_line(tmp_path):
    with pytest.raises(grammar.ProgramSyntaxError, match=r"hist.py:3:"):
        reader.parse_file(_write(tmp_path, "import numpy as np\n\ndef (:\n"))


@pytest.mark.parametrize("style", ["tpcore", "published"])
@pytest.mark.parametrize("seed", [0, 1])
def test_generated_programs_import_back(tmp_path, style, seed):
    p = random_program(seed, causal=seed == 1, rule="published" if style == "published" else None)
    path, _ = writer.write(p, tmp_path / f"{style}.py", style=style)
    q = reader.parse_file(path)
    assert q.causal == p.causal and q.meta["format"] == style
    ids, lengths = random_inputs(p, 300, seed)
    a = it.run_ids(p, ids, lengths, "numba")
    b = it.run_ids(q, ids, lengths, "numba")
    la, lb = p.output_labels(), q.output_labels()
    assert [[la[x] for x in r if x >= 0] for r in a] == [[lb[x] for x in r if x >= 0] for r in b]


def test_tpcore_program_round_trip_keeps_reverse(tmp_path):
    path, _ = writer.write(reverse_program(), tmp_path)
    q = reader.parse_file(path)
    assert it.predict(q, [["<s>", "1", "2", "3", "</s>"]]) == [["<s>", "3", "2", "1", "</s>"]]
    labels = q.variables["mlp_0_0_outputs"].values
    want = reverse_program().module("mlp_0_0").table
    assert np.array_equal(np.asarray(labels)[q.module("mlp_0_0").table], want)


@pytest.mark.parametrize("line, message", [
    ('    prefix_count_2 = [tokens[:i].count(__import__("os")) for i in range(len(tokens))]',
     "prefix_count_2 must be"),
    ('    prefix_count_2 = [tokens[:i].count("0") for i in range(len(tokens)) if exit()]',
     "prefix_count_2 must be"),
])
def test_prefix_count_lines_are_checked(tmp_path, line, message):
    old = "    positions = list(range(len(tokens)))"
    path = _write(tmp_path, HIST.replace(old, f"{old}\n{line}", 1))
    with pytest.raises(grammar.ProgramSyntaxError, match=message):
        reader.parse_file(path)
