"""The host processor while training: BLAS threads, and subnormals flushed to zero for float32
training only, on the training thread and OpenBLAS's, never leaking to the caller."""

import itertools
import platform
from pathlib import Path

import numpy as np
import pytest

from tpcore import cpu
from tpcore.commands import info
from tpcore.errors import TpcoreError, TrainingDiverged
from tpcore.nn.module import Module, Parameter
from tpcore.nn.optim import SGD
from tpcore.train import TrainConfig, fit

TINY = np.float32(1e-39)  # subnormal in float32
X86 = cpu.flush_unsupported() is None
needs_x86 = pytest.mark.skipif(not X86, reason=f"cannot flush here: {cpu.flush_unsupported()}")


def flushes() -> bool:
    """What arithmetic says: does a subnormal operand read as zero on this thread?"""
    return bool(np.array([TINY]) * np.float32(1.0) == 0)


def register() -> int:
    from tpcore.kernels import fpmode

    return fpmode.get_mxcsr() & ~0x3F  # control bits only: the status flags are sticky


class Vector(Module):
    def __init__(self, dtype):
        self.w = Parameter(np.zeros(3, dtype))


def _fit(dtype=np.float32, step=None, **config):
    seen = []

    def default(model, batch, ctx):
        seen.append((cpu.subnormals_flushed(), flushes()))
        model.w.accumulate(model.w.data - 1)
        return 1.0

    model = Vector(dtype)
    fit(model, SGD(model.parameters(), lr=0.1), itertools.repeat({}), step or default,
        TrainConfig(steps=2, quiet=True, **config))
    return seen


def test_blas_threads_sets_and_reports_the_previous_count():
    before = cpu.blas_threads(1)
    if before is None:
        pytest.skip("NumPy here is not linked to OpenBLAS")
    assert cpu.blas_threads(before) == 1


@needs_x86
def test_flush_sets_the_mode_and_puts_the_register_back():
    before = register()
    assert not flushes() and cpu.subnormals_flushed() is False
    with cpu.flush_subnormals() as on:
        assert on and flushes() and cpu.subnormals_flushed()
        assert np.float32(1e-20) * np.float32(1e-20) == 0  # a subnormal result is zero too
        with cpu.flush_subnormals() as inner:  # nested: nothing changes, nothing restored early
            assert inner
        assert flushes()
    assert register() == before and not flushes()
    with cpu.flush_subnormals(on=False) as on:
        assert not on and not flushes()


@needs_x86
@pytest.mark.host_only("OpenBLAS's worker threads compute on host arrays")
def test_openblas_workers_flush_inside_and_keep_outside():
    if cpu.blas_threads(2) is None:
        pytest.skip("NumPy here is not linked to OpenBLAS")
    try:
        a = np.full((512, 512), TINY, np.float32)
        b = np.ones((512, 512), np.float32)
        assert (a @ b != 0).all()
        with cpu.flush_subnormals():
            assert cpu.restart_blas_threads() >= 1
            assert not (a @ b).any()  # every row, the workers' included, reads zeros
        assert (a @ b != 0).all()
    finally:
        cpu.blas_threads(1)


@needs_x86
def test_float32_training_flushes_and_the_caller_keeps_its_mode():
    before = register()
    assert _fit(np.float32) == [(True, True)] * 2
    assert register() == before and not flushes()


@needs_x86
def test_float64_training_keeps_subnormals():
    assert _fit(np.float64) == [(False, False)] * 2
    assert _fit(np.float32, flush_subnormals=False) == [(False, False)] * 2


@needs_x86
@pytest.mark.parametrize("error", [KeyboardInterrupt, TrainingDiverged])
def test_an_interrupted_or_failed_run_restores_the_mode(error):
    before = register()

    def step(model, batch, ctx):
        assert flushes()
        if error is TrainingDiverged:
            return float("nan")
        raise error

    with pytest.raises(error):
        _fit(np.float32, step=step)
    assert register() == before and not flushes()


@needs_x86
def test_keep_setting_trains_with_subnormals(monkeypatch):
    monkeypatch.setenv(cpu.SUBNORMALS_VARIABLE, "keep")
    assert _fit(np.float32) == [(False, False)] * 2
    assert "TPCORE_SUBNORMALS=keep" in cpu.subnormal_mode()


def test_a_bad_subnormal_setting_is_refused(monkeypatch):
    monkeypatch.setenv(cpu.SUBNORMALS_VARIABLE, "sometimes")
    with pytest.raises(TpcoreError, match="TPCORE_SUBNORMALS='sometimes'; expected 'flush' or"):
        _fit(np.float32)


def test_another_processor_trains_unchanged(monkeypatch):
    monkeypatch.setattr(platform, "machine", lambda: "aarch64")
    assert cpu.flush_unsupported() == "not an x86-64 processor (aarch64)"
    assert _fit(np.float32) == [(None, False)] * 2
    assert cpu.subnormal_mode() == "kept: cannot flush them (not an x86-64 processor (aarch64))"
    assert "aarch64" in cpu.cpu_name()


@pytest.mark.skipif("cpu family" not in (Path("/proc/cpuinfo").read_text(errors="replace")
                                          if Path("/proc/cpuinfo").is_file() else ""),
                    reason="no x86 /proc/cpuinfo here")
def test_the_processor_model_is_read_from_cpuinfo():
    text = Path("/proc/cpuinfo").read_text(errors="replace")
    first = dict((k.strip(), v.strip()) for k, _, v in (line.partition(":") for line in
                 text.split("\n\n")[0].splitlines()))
    assert cpu.cpu_model() == (f"{first['vendor_id']} family {first['cpu family']} model "
                               f"{first['model']} stepping {first['stepping']}")
    assert cpu.training_machine(1)["cpu_model"] == cpu.cpu_model()


def test_info_names_the_cpu_and_the_subnormal_mode(capsys):
    import argparse

    assert info.run(argparse.Namespace(json=False)) == 0
    lines = {line.split("  ")[0]: line.split("  ", 1)[1].strip()
             for line in capsys.readouterr().out.splitlines()}
    assert lines["cpu"] == cpu.cpu_name()
    assert lines["cpu model"] == (cpu.cpu_model() or "not known")
    assert lines["subnormals"] == cpu.subnormal_mode()


@needs_x86
@pytest.mark.host_only("decompiles the trained model (host code generation)")
def test_learn_returns_or_is_interrupted_with_the_callers_mode(tmp_path, monkeypatch):
    import tpcore
    from tpcore.pipelines import learn as pipeline

    options = dict(layers=1, cat_heads=1, num_heads=0, cat_mlps=0, num_mlps=0, epochs=1,
                   n_samples=300, batch_size=64)
    before = register()
    seen = []
    step = pipeline.program_step

    def watched(*args, **kwargs):
        seen.append(flushes())
        return step(*args, **kwargs)

    monkeypatch.setattr("tpcore.pipelines.learn.program_step", watched)
    tpcore.learn("induction", out=tmp_path / "done", **options)
    assert seen and all(seen) and register() == before and not flushes()

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr("tpcore.pipelines.learn.program_step", interrupted)
    with pytest.raises(KeyboardInterrupt):
        tpcore.learn("induction", out=tmp_path / "interrupted", **options)
    assert register() == before and not flushes()
    assert not (tmp_path / "interrupted").exists()
