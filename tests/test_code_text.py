"""Inductor's wrapper code read and stepped through (``analysis.memory.code_text`` / ``compiled``), on the
shapes of line the lowering writes that the models under test do not always produce."""

from fxviz.analysis.memory.code_text import CodeText
from fxviz.analysis.memory.compiled import Pool, simulate

# what inductor writes for a checkpointed attention whose RNG state is saved (a Qwen3 layer under
# torch.utils.checkpoint): a higher-order op returning (rng state, (the op's outputs...)), taken apart
# with a nested index, then one output reused in place as another buffer
_NESTED = '''
def call(args):
    primals_1, = args
    args.clear()
    buf0 = empty_strided_cpu((2, 4, 16, 16), (1024, 256, 16, 1), torch.float32)
    buf24 = torch.ops.higher_order.run_and_save_rng_state(aten.sdpa.default, buf0, scale=0.25)
    buf25 = buf24[0]
    assert_size_stride(buf25, (5056, ), (1, ), 'torch.ops.run_and_save_rng_state')
    buf26 = buf24[1][0]
    assert_size_stride(buf26, (2, 4, 16, 16), (1024, 16, 64, 1), 'torch.ops.run_and_save_rng_state')
    del buf24
    buf30 = reinterpret_tensor(buf26, (2, 16, 64), (1024, 64, 1), 0); del buf26  # reuse
    buf34 = reinterpret_tensor(buf30, (32, 64), (64, 1), 0); del buf30  # reuse
    return (buf34, buf25, )
'''


def test_a_nested_tuple_item_is_the_storage_the_op_made():
    text = CodeText(_NESTED)
    assert [path for path, _ in text.items_of(2, "buf24")] == [(0,), (1, 0)]
    pool = Pool()
    outputs = simulate(text, pool, run=0)
    # the attention output (8 KiB, float32) and the RNG state (5056 B) come back, each its own storage
    assert sorted(pool.storages[s].nbytes for s in outputs if s is not None) == [5056, 2 * 4 * 16 * 16 * 4]
    assert pool.live == 5056 + 2 * 4 * 16 * 16 * 4  # buf0 freed at the return; the outputs held by the caller


def test_code_text_is_never_run_as_python():
    """A log's wrapper code is someone else's file: sizes are arithmetic on symbols, a kernel call is names,
    attributes, literals and calls of the namespace's objects; anything else is refused, not run."""
    import pytest

    from fxviz.core.expressions import UnsafeExpression, call_expression, int_expression

    assert int_expression("(8*s0, (s0 + 7)//8)", {"s0": 3}) == (24, 1)
    for text in ("__import__('os').system('true')", "s0.__class__", "[x for x in ()]", "open('f')"):
        with pytest.raises(UnsafeExpression):
            int_expression(text, {"s0": 3})
    namespace = {"ops": {"mm": lambda a, b: a * b}, "buf0": 2, "buf1": 5}
    with pytest.raises(UnsafeExpression):
        call_expression("ops.__class__.__bases__[0]()", namespace)
    with pytest.raises(UnsafeExpression):
        call_expression("os.system('true')", namespace)
    with pytest.raises(UnsafeExpression):
        call_expression("ops.get('mm')(buf0, *buf1)", namespace)
    assert call_expression("ops.get('mm')(buf0, buf1)", namespace)() == 10
