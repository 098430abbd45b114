"""Fidelity: the discrete model, the interpreter (both engines) and the generated program agree on
every position (100 %), for untrained (random) and briefly trained Transformer Programs."""

from __future__ import annotations

import numpy as np
import pytest

from tpcore.backend import to_host
from tpcore.models import extract
from tpcore.models.program import ProgramConfig, ProgramModel
from tpcore.programs import interpret as it
from tpcore.programs.source import writer

VOCAB = ["<pad>", "<s>", "a", "b", "c", "d"]


def _data(n_seq: int, max_len: int, seed: int) -> dict[str, np.ndarray]:
    """Framed random inputs with hist targets (count of the token; class 0 = no target)."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, max_len + 1, size=n_seq)
    ids = rng.integers(2, len(VOCAB), size=(n_seq, max_len))
    ids[:, 0] = 1
    pad = np.arange(max_len)[None] >= lengths[:, None]
    ids[pad] = 0
    same = (ids[:, :, None] == ids[:, None, :]) & ~pad[:, None, :]
    targets = np.where(pad | (ids == 1), 0, same.sum(-1))
    return {"tokens": ids, "targets": targets, "mask": targets > 0, "pad": pad,
            "lengths": lengths}


@pytest.fixture
def check_fidelity(tmp_path, load_generated, as_tokens):
    """``check(model, data)``: model == both engines (every position) == generated program."""
    return lambda model, data: _check_fidelity(model, data, tmp_path, load_generated, as_tokens)


def _check_fidelity(model: ProgramModel, data: dict[str, np.ndarray], tmp_path, load_generated,
                    as_tokens, n_program: int = 60) -> None:
    classes = [str(c) for c in range(model.config.n_classes)]
    prog = extract.extract(model, VOCAB, classes, name="hist", bos="<s>", pad="<pad>")
    ids, lengths, pad = data["tokens"], data["lengths"], data["pad"]
    want = np.asarray(classes)[to_host(model.forward(ids, pad=pad, tau=None).argmax(-1))]
    labels = np.asarray(prog.output_labels() + ("",))
    for engine in it.ENGINES:
        got = labels[it.run_ids(prog, ids, lengths, engine)]
        assert ((got == want) | pad).all(), engine
    path, _ = writer.write(prog, tmp_path)
    module = load_generated(path)
    seqs = as_tokens(prog, ids[:n_program], lengths[:n_program])
    for seq, row in zip(seqs, want):
        assert module.run(seq) == row[: len(seq)].tolist()


CONFIGS = [
    dict(),
    dict(causal=True, n_layers=3),
    dict(n_cat_heads=3, n_num_heads=0, n_num_mlps=0),
    dict(n_embed_vars=2, k=4),
    dict(n_num_heads=2, n_num_mlps=2, n_cat_mlps=0, k=5),
]


@pytest.mark.parametrize("seed, overrides", list(enumerate(CONFIGS)))
def test_untrained_models_are_programs(check_fidelity, seed, overrides):
    cfg = ProgramConfig(**{"vocab_size": len(VOCAB), "max_len": 6, "n_classes": 7,
                           "n_layers": 2, "n_cat_heads": 2, "n_num_heads": 2, "n_cat_mlps": 1,
                           "n_num_mlps": 1, "masked_classes": (0,), "seed": seed, **overrides})
    check_fidelity(ProgramModel(cfg), _data(1500, 6, seed))


def test_trained_model_is_its_program(check_fidelity):
    from tpcore.nn.optim import Adam
    from tpcore.train import TrainConfig, fit, shuffled_batches, supervised_step

    data = _data(2000, 6, 0)
    train = {k: v for k, v in data.items() if k != "lengths"}
    cfg = ProgramConfig(vocab_size=len(VOCAB), max_len=6, n_classes=7, n_layers=1,
                        n_cat_heads=1, n_num_heads=1, n_cat_mlps=1, n_num_mlps=1,
                        masked_classes=(0,), seed=1)
    model = ProgramModel(cfg)
    before = extract.extract(model, VOCAB, [str(c) for c in range(7)])
    fit(model, Adam(model.parameters(), lr=0.05), shuffled_batches(train, 128, seed=0),
        lambda m, b, ctx: supervised_step(m, b, ctx, rng=ctx.rng, tau=ctx.tau, checked=True),
        TrainConfig(steps=40, tau=(3.0, 0.05), quiet=True))
    after = extract.extract(model, VOCAB, [str(c) for c in range(7)])
    assert writer.source(after) != writer.source(before)  # training changed the program
    check_fidelity(model, data)


def test_extract_checks_labels():
    model = ProgramModel(ProgramConfig(vocab_size=6, max_len=6, n_classes=7))
    with pytest.raises(ValueError, match="vocabulary"):
        extract.extract(model, VOCAB[:4], [str(c) for c in range(7)])
    with pytest.raises(ValueError, match="classes"):
        extract.extract(model, VOCAB, ["0", "1"])


def test_unsupported_stream_modules_are_named():
    from tpcore.models.counting import CountingConfig, CountingProgramModel
    from tpcore.models.program import StreamExtension

    class Opaque(StreamExtension):
        """Counts with no program form (no ``program_modules``)."""

        name, outputs = "unknown", ("prefix_count_0",)

    class Unknown(CountingProgramModel):
        def make_extensions(self):
            return [Opaque()]

    cfg = CountingConfig(vocab_size=6, max_len=6, n_classes=7)
    with pytest.raises(ValueError, match="prefix_count_0.*unknown"):
        extract.extract(Unknown(cfg), VOCAB, [str(c) for c in range(7)])


@pytest.mark.parametrize("causal", [False, True])
def test_prefix_sum_counts_are_program_modules(check_fidelity, tmp_path, causal):
    """PrefixSumCounts extracts into prefix-count modules; model == engines ==
    generated program, and the generated program imports back."""
    from tpcore.models.counting import CountingConfig, CountingProgramModel
    from tpcore.programs.describe import dependency_text
    from tpcore.programs.source import reader

    cfg = CountingConfig(vocab_size=len(VOCAB), max_len=6, n_classes=7, masked_classes=(0,),
                         prefix_counts=True, causal=causal, seed=4)
    model = CountingProgramModel(cfg)
    data = _data(800, 6, 4)
    check_fidelity(model, data)
    prog = extract.extract(model, VOCAB, [str(c) for c in range(7)], bos="<s>", pad="<pad>")
    assert "prefix_count_3 " in dependency_text(prog) and "count of 'b'" in dependency_text(prog)
    path, _ = writer.write(prog, tmp_path / "pc")
    back = reader.parse_file(path)
    ids, lengths = data["tokens"], data["lengths"]
    labels = np.asarray(prog.output_labels())
    back_labels = np.asarray(back.output_labels())
    np.testing.assert_array_equal(labels[it.run_ids(prog, ids, lengths)][~data["pad"]],
                                  back_labels[it.run_ids(back, ids, lengths)][~data["pad"]])


def test_extract_takes_names_and_framing_from_the_task():
    from tpcore.tasks.registry import make_task

    task = make_task("sort", n_samples=40)
    model = ProgramModel(ProgramConfig(vocab_size=len(task.vocab), max_len=task.max_len,
                                       n_classes=len(task.classes), n_layers=1, seed=2))
    prog = extract.extract(model, task)
    assert (prog.name, prog.bos, prog.eos, prog.pad) == ("sort", "<s>", "</s>", "<pad>")
    assert prog.tokens.values == task.vocab and prog.classifier.classes == task.classes
    spelled = extract.extract(model, task.vocab, task.classes, name="sort", bos="<s>",
                              eos="</s>", pad="<pad>")
    assert writer.source(prog) == writer.source(spelled)
    assert extract.extract(model, task, name="mine", eos=None).name == "mine"
    with pytest.raises(ValueError, match="classes"):
        extract.extract(model, task.vocab)
