"""A learn run's program against its model on every engine, and a program's accuracy on a task
against its model's."""

import pytest

from tpcore.backend import to_host
from tpcore.models.extract import extract
from tpcore.models.program import ProgramConfig, ProgramModel
from tpcore.pipelines.decompile import load_program
from tpcore.pipelines.learn import LearnConfig, fidelity, learn
from tpcore.pipelines.score import evaluate_on_task
from tpcore.tasks.registry import make_task


def test_learn_run_fidelity_all_engines(tmp_path):
    """A tiny ``tpcore learn`` run: model, both engines and the generated program agree on its
    whole test split."""
    cfg = LearnConfig(task="hist", n_layers=1, n_cat_heads=1, n_num_heads=1, n_cat_mlps=1,
                      n_num_mlps=1, d_mlp=16, epochs=2, batch_size=64, eval_every=1,
                      vocab_size=6, max_len=6, n_samples=400)
    learn(cfg, tmp_path / "run")
    f = fidelity(tmp_path / "run")
    assert (f["numpy"], f["numba"], f["generated"]) == (1.0, 1.0, 1.0)
    assert f["generated_sequences"] == f["sequences"] == 40
    assert load_program(tmp_path / "run").name == "hist"



def test_categorical_only_run_fidelity_all_engines(tmp_path):
    """A causal ``tpcore learn`` run without numerical heads or MLPs (the paper's Table 3):
    its program has no numerical module, and every engine agrees with the model on the whole
    test split."""
    cfg = LearnConfig(task="dyck1", n_layers=2, n_cat_heads=2, n_num_heads=0, n_cat_mlps=1,
                      n_num_mlps=0, d_mlp=16, epochs=2, batch_size=64, eval_every=1,
                      n_samples=400)
    metrics = learn(cfg, tmp_path / "run")
    assert metrics["program"]["fidelity"] == 1.0
    program = load_program(tmp_path / "run")
    assert [m.name for m in program.modules] == ["attn_0_0", "attn_0_1", "mlp_0_0", "attn_1_0",
                                                 "attn_1_1", "mlp_1_0"]
    assert {m.kind for m in program.modules} == {"categorical"} and program.causal
    f = fidelity(tmp_path / "run")
    assert (f["numpy"], f["numba"], f["generated"]) == (1.0, 1.0, 1.0)
    assert f["generated_sequences"] == f["sequences"]

@pytest.mark.parametrize("task_name", ["induction", "dyck1", "sort"])
def test_task_accuracy_of_program_equals_models(task_name):
    """``evaluate_on_task`` on an extracted (untrained) program gives the model's accuracy."""
    task = make_task(task_name, n_samples=300)
    cfg = ProgramConfig(vocab_size=len(task.vocab), max_len=task.max_len,
                        n_classes=len(task.classes), causal=task.causal, seed=3)
    model = ProgramModel(cfg)
    prog = extract(model, task.vocab, task.classes, name=task.name, bos="<s>", eos=task.eos,
                   pad="<pad>")
    test = task.splits["test"]
    pred = to_host(model.forward(test["tokens"], test["pad"]).argmax(-1))
    want = float((pred == test["targets"])[test["mask"]].mean())
    got = evaluate_on_task(prog, task_name, n_samples=300)
    assert got["token_accuracy"] == pytest.approx(want)
