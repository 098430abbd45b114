"""The counter-based generator (:mod:`tpcore.counter_rng`): Philox4x32-10's known answers, the
layout of the uniforms, a device step that is never read on the host, and on a GPU the CuPy
kernel (:func:`tpcore.kernels.gpu.philox_fill`) equal to the reference bit for bit, in a CUDA graph
too."""

import numpy as np
import pytest

from tpcore import strict
from tpcore.backend import asarray, to_host
from tpcore.counter_rng import CounterRng, philox4x32, uniform_reference
from tpcore.errors import TpcoreError

KAT = [  # Random123 kat_vectors, philox4x32 10: counter, key, output (checked against randomgen)
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
]


def _draws(seed, step, shape, dtype=np.float32, n=1, xp=None):
    rng = CounterRng(seed, step, xp=xp)
    return [to_host(rng.random(shape, dtype)) for _ in range(n)]


@pytest.mark.parametrize("counter, key, want", KAT)
def test_philox_known_answers(counter, key, want):
    words = philox4x32(tuple(asarray(np.uint32(c)) for c in counter),
                       tuple(asarray(np.uint32(k)) for k in key))
    assert [int(to_host(w)) for w in words] == list(want)
    assert [int(w) for w in philox4x32(counter, key)] == list(want)  # plain ints, on NumPy


def test_philox_on_arrays_is_philox_of_each_counter():
    counters = np.array([c for c, _, _ in KAT] + [(1, 2, 3, 4)], dtype=np.uint32)
    key = (0xA4093822, 0x299F31D0)
    words = philox4x32(tuple(asarray(counters[:, j]) for j in range(4)), key)
    got = np.stack([to_host(w) for w in words], axis=1)
    for row, counter in zip(got, counters):
        assert [int(w) for w in philox4x32(tuple(int(c) for c in counter), key)] == list(row)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_uniforms_are_the_stated_words_of_the_stated_blocks(dtype):
    seed, step, n = 2**40 + 17, 9, 11
    rng = CounterRng(seed, step)
    rng.random(3, dtype)
    got = to_host(rng.random((n,), dtype))  # draw 1
    blocks = np.arange(6, dtype=np.uint32)
    w = np.stack(philox4x32((blocks, 0, 1, step), (17, 256)), axis=1).astype(np.uint64)
    if dtype == np.float32:
        want = (w.reshape(-1)[:n] >> 8) * 2.0 ** -24
    else:
        pairs = w.reshape(-1, 2)[:n]
        want = ((pairs[:, 0] >> 5) * 2.0 ** 26 + (pairs[:, 1] >> 6)) * 2.0 ** -53
    assert got.dtype == dtype and np.array_equal(got, want.astype(dtype))


def test_same_seed_and_step_give_the_same_draws_and_draws_differ():
    a, b = _draws(5, 3, (4, 7), n=3), _draws(5, 3, (4, 7), n=3)
    for x, y in zip(a, b):
        assert x.shape == (4, 7) and x.dtype == np.float32 and np.array_equal(x, y)
    assert not np.array_equal(a[0], a[1]) and not np.array_equal(a[1], a[2])


@pytest.mark.parametrize("dtype, bits", [(np.float32, 24), (np.float64, 53)])
def test_uniforms_lie_in_the_unit_interval_on_a_grid_with_mean_one_half(dtype, bits):
    (u,) = _draws(0, 0, 20000, dtype)
    assert u.min() >= 0 and u.max() < 1 and abs(u.mean() - 0.5) < 0.01
    assert abs((u < 0.25).mean() - 0.25) < 0.01
    scaled = u.astype(np.float64) * 2.0 ** bits
    assert np.array_equal(scaled, np.floor(scaled))
    assert len(np.unique(u)) > 19900


def test_seeds_steps_and_both_key_words_change_the_numbers():
    base = _draws(7, 4, 64)[0]
    for seed, step in [(8, 4), (7, 5), (7 + 2**32, 4), (7, 4 + 2**31)]:
        assert not np.array_equal(_draws(seed, step, 64)[0], base), (seed, step)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("step_dtype", [np.int64, np.int32, np.uint32])
def test_an_array_step_gives_the_numbers_of_its_int(dtype, step_dtype):
    step = 2**31 - 3 if step_dtype != np.uint32 else 2**32 - 1
    want = _draws(11, step, (3, 5), dtype, n=2)
    got = _draws(11, asarray(np.array(step, dtype=step_dtype)), (3, 5), dtype, n=2)
    for g, w in zip(got, want):
        assert np.array_equal(g, w)


def test_out_is_filled_and_returned():
    out = asarray(np.zeros((2, 9), np.float64))
    assert CounterRng(1, 2).random((2, 9), np.float64, out=out) is out
    assert np.array_equal(to_host(out), _draws(1, 2, (2, 9), np.float64)[0])
    assert to_host(CounterRng(1, 2).random(0)).shape == (0,)


@pytest.mark.parametrize("make", [
    lambda: CounterRng(0, 0).random(3, np.float16),
    lambda: CounterRng(0, 0).random(3, np.int32),
    lambda: CounterRng(0, 0).random(3, "foo"),
    lambda: CounterRng(0, 0).random(3, None),
    lambda: CounterRng(-1, 0),
    lambda: CounterRng(2**64, 0),
    lambda: CounterRng(1.5, 0),
    lambda: CounterRng(0, -1),
    lambda: CounterRng(0, 2**32),
    lambda: CounterRng(0, asarray(np.float64(1))),
    lambda: CounterRng(0, asarray(np.arange(2))),
    lambda: CounterRng(0, 0).random(3, out=asarray(np.zeros(4, np.float32))),
    lambda: CounterRng(0, 0).random(3, out=asarray(np.zeros(3, np.float64))),
    lambda: CounterRng(0, 0).random(3, out=asarray(np.zeros(6, np.float32))[::2]),
])
def test_bad_input_raises(make):
    with pytest.raises(TpcoreError):
        make()


def test_a_strict_device_step_is_never_read_on_the_host():
    step = strict.xp.asarray(np.int64(6))
    with strict.no_sync():
        rng = CounterRng(3, step, xp=strict.xp)
        u32 = rng.random((5, 3))
        u64 = strict.xp.empty(7, np.float64)
        rng.random(7, np.float64, out=u64)
    want = CounterRng(3, 6, xp=np)
    assert np.array_equal(to_host(u32), want.random((5, 3)))
    assert np.array_equal(to_host(u64), want.random(7, np.float64))


@pytest.fixture
def cp():
    """CuPy with a CUDA device, else the test skips."""
    cupy = pytest.importorskip("cupy")
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except cupy.cuda.runtime.CUDARuntimeError:
        count = 0
    if count < 1:
        pytest.skip("no CUDA device")
    return cupy


def test_philox_array_code_on_cupy(cp):
    for counter, key, want in KAT:
        words = philox4x32(tuple(cp.asarray(c, dtype=cp.uint32) for c in counter), key)
        assert [int(w) for w in words] == list(want)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [1, 3, 5, 1001])
@pytest.mark.parametrize("device_step", [None, np.int64, np.int32])
def test_kernel_equals_the_reference_bit_for_bit(cp, dtype, n, device_step):
    seed, step = 2**63 + 12345, 2**31 - 5 if device_step == np.int32 else 2**32 - 2
    steps = (step, step if device_step is None else cp.asarray(step, dtype=device_step))
    rng_np, rng_cp = CounterRng(seed, steps[0], xp=np), CounterRng(seed, steps[1], xp=cp)
    for _ in range(2):
        want = rng_np.random((n,), dtype)
        got = rng_cp.random((n,), dtype)
        assert isinstance(got, cp.ndarray) and got.dtype == dtype
        assert np.array_equal(got.get().view(np.uint8), want.view(np.uint8))
    assert np.array_equal(uniform_reference(n, np.dtype(dtype), rng_np.key, 0, step, cp).get(),
                          CounterRng(seed, step, xp=np).random(n, dtype))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_cuda_graph_draws_the_noise_of_the_step_it_reads(cp, dtype):
    seed, step, shape = 99, 41, (33, 7)
    stream = cp.cuda.Stream(non_blocking=True)
    with stream:
        step_dev = cp.asarray(step, dtype=cp.int64)
        out = cp.empty(shape, dtype)

        def body():
            CounterRng(seed, step_dev, xp=cp).random(shape, dtype, out=out)
            step_dev[...] += 1

        body()  # warm-up: compiles and loads the kernels outside the capture
        step_dev[...] = step
        stream.begin_capture()
        body()
        graph = stream.end_capture()
        got = []
        for _ in range(3):
            graph.launch(stream)
            got.append(out.get())
        assert int(step_dev.get()) == step + 3
    for k, g in enumerate(got):
        assert np.array_equal(g, CounterRng(seed, step + k, xp=np).random(shape, dtype)), k
