"""Shape contracts (opcheck.contracts) and the recorder's one rule for a real call (opcheck.calls)."""

import pytest
import torch

from symfuzz.opcheck.api import check
from symfuzz.opcheck.calls import CallRecorder
from symfuzz.opcheck.checks.common import OpCheckUsageError, make_template
from symfuzz.opcheck.contracts import assign, parse_fixed
from symfuzz.opcheck.variants import Sweep

UNIT_TIER = True  # its tests are the fast tier (-m unit), but those marked integration: tests/conftest.py

NS = "symfuzz_contracts"

torch.library.define(f"{NS}::deq", "(Tensor A, Tensor absmax, Tensor code, int blocksize) -> Tensor")
torch.library.define(f"{NS}::twice", "(Tensor x, SymInt n) -> Tensor")


@torch.library.register_fake(f"{NS}::deq")
def _deq_fake(A, absmax, code, blocksize):
    return A.new_empty(A.shape, dtype=torch.float32)


@torch.library.register_kernel(f"{NS}::deq", "cpu")
def _deq(A, absmax, code, blocksize):
    # Like a real kernel, it trusts the table and the scale vector; unlike one,
    # it says so instead of reading out of bounds.
    torch._check(code.numel() == 256, lambda: f"the code must have 256 entries, not {code.numel()}")
    torch._check(absmax.numel() == -(-A.numel() // blocksize), lambda: "one absmax per block")
    scale = absmax.repeat_interleave(blocksize)[: A.numel()].reshape(A.shape)
    return (code[A.long()] * scale).contiguous()  # a fresh tensor, whatever A's layout


@torch.library.register_fake(f"{NS}::twice")
def _twice_fake(x, n):
    return torch.empty_like(x)


TWICE_CALLS = []  # one entry per real kernel call


@torch.library.register_kernel(f"{NS}::twice", "cpu")
def _twice(x, n):
    TWICE_CALLS.append(n)
    return x * 2


def deq_call(shape, blocksize):
    A = torch.randint(0, 256, shape, dtype=torch.uint8)
    return (A, torch.rand(-(-A.numel() // blocksize)) + 0.1, torch.linspace(-1, 1, 256), blocksize)


def templates(samples):
    op = getattr(torch.ops, NS).deq.default
    out = [make_template(op, args, {}) for args in samples]
    return out, assign(out, schema=op._schema)


def test_a_table_that_never_varies_is_held_fixed_and_a_scale_vector_follows_its_blocks():
    tpls, lines = templates([deq_call((4, 16), 8), deq_call((3, 5), 4), deq_call((64,), 64)])
    contracts = tpls[0].contracts
    assert set(contracts.fixed) == {2}  # code
    # absmax varied only as its rule says: A alone is the shape the callers varied.
    assert "code: held fixed at float32[256]" in lines[0] and "while A varied" in lines[0]
    assert any("absmax: size(0) follows ceil(A.numel() / blocksize)" in line for line in lines)
    for template in tpls:
        sweep = Sweep(template)
        cases = [sweep.case(v) for v in sweep.edges()]
        assert len(cases) > 5
        for case in cases:
            A, absmax, code = case.tensor_inputs()
            assert tuple(code.shape) == (256,) and code.dtype == "float32" and code.layout == "contiguous"
            numel = 1
            for d in A.shape:
                numel *= d
            assert absmax.shape == (-(-numel // template.leaves[3]),), (A, absmax)


def test_with_one_recorded_shape_the_ties_decide():
    tpls, lines = templates([deq_call((4, 16), 8)])
    assert set(tpls[0].contracts.fixed) == {2}, lines  # the table ties to nothing
    assert "code: held fixed at float32[256] (its sizes tie to no other argument" in lines[0]
    assert tpls[0].contracts.follows[(1, 0)].slot == 0  # absmax follows A
    # A table whose size matches the data's is tied to it: nothing is held, the sweep moves them together.
    tpls, lines = templates([deq_call((4, 256), 256)])
    assert not tpls[0].contracts.fixed, lines
    sweep = Sweep(tpls[0])
    assert any(c.tensor_inputs()[2].shape != (256,) for c in map(sweep.case, sweep.edges()))


def test_the_author_overrides_what_is_held_fixed():
    samples = [deq_call((4, 16), 8), deq_call((3, 5), 4)]
    report = check(f"{NS}::deq", samples, checks=["faketensor"], budget=20, fixed=())
    assert not any("held fixed" in line for line in report.contracts)
    # With the table free, the sweep builds inputs the kernel refuses (it checks; real ones crash).
    assert report.results["faketensor"].inputs_rejected > 0
    report = check(f"{NS}::deq", samples[:1], checks=["faketensor"], budget=20, fixed=("code",))
    assert report.contracts[0] == "code: held fixed at float32[256] (asked for)"
    with pytest.raises(OpCheckUsageError, match="no tensor argument named 'table'.*A, absmax, code"):
        check(f"{NS}::deq", samples, checks=["faketensor"], fixed=("table",))


def test_inferred_contracts_keep_the_sweep_inside_what_the_kernel_accepts():
    samples = [deq_call((4, 16), 8), deq_call((3, 5), 4), deq_call((64,), 64)]
    report = check(f"{NS}::deq", samples, checks=["faketensor"], budget=30)
    result = report.results["faketensor"]
    assert result.inputs_tried > 10
    # Only layouts and dtypes the kernel does not support can be refused now, never the table's size.
    assert result.inputs_rejected < result.inputs_tried


def test_parse_fixed():
    assert parse_fixed(["ns::op=a, b", "ns::other.default="]) == {"ns::op": ["a", "b"], "ns::other": []}
    with pytest.raises(ValueError, match="NS::OP=ARG"):
        parse_fixed(["op=a"])


# ------------------------------------------------------------------ the recorder


@pytest.mark.integration
def test_the_recorder_records_only_the_tests_own_calls():
    calls, notes = [], []
    op = getattr(torch.ops, NS).twice
    with CallRecorder([NS], test="t", sink=calls, skipped=notes):
        op(torch.randn(3, 4), 3)
        # torch.library.opcheck traces with symbolic sizes, fake tensors and make_fx,
        # and calls the op on real tensors itself to compare: none of that is the test's,
        # but the sample handed to it is, recorded once.
        torch.library.opcheck(op.default, (torch.randn(5, 4), 5))
        torch.compile(lambda x: op(x, x.shape[0]), dynamic=True, backend="aot_eager")(torch.randn(6, 2))
        from torch._subclasses.fake_tensor import FakeTensorMode

        with FakeTensorMode():
            op(torch.empty(7, 2), 7)
        op(torch.empty(8, 2, device="meta"), 8)
    assert [(tuple(c.args[0].shape), c.args[1]) for c in calls] == [((3, 4), 3), ((5, 4), 5)], calls
    assert notes == []


def test_a_recorder_failure_is_a_note_and_the_op_still_runs_once(monkeypatch):
    from symfuzz import opcheck

    def broken(value):
        raise RuntimeError("copy failed")

    monkeypatch.setattr(opcheck.calls, "_copy", broken)
    calls, notes = [], []
    x = torch.randn(2, 2)
    before = len(TWICE_CALLS)
    with CallRecorder([NS], test="t", sink=calls, skipped=notes):
        out = getattr(torch.ops, NS).twice(x, 2)
    assert torch.equal(out, x * 2) and calls == [] and len(TWICE_CALLS) == before + 1
    assert len(notes) == 1 and "copy failed" in notes[0]


@pytest.mark.integration
def test_the_recorder_does_not_change_what_torch_compile_does():
    from torch._dynamo.testing import CompileCounter

    op = getattr(torch.ops, NS).twice

    def compiled_frames(record: bool) -> int:
        torch._dynamo.reset()
        counter = CompileCounter()
        for fn in (lambda x: op(x.sin(), 2), lambda x: op.default(x.cos(), 2)):
            f = torch.compile(fn, fullgraph=True, backend=counter)  # a graph break would raise
            if record:
                with CallRecorder([NS], test="t", sink=[], skipped=[]):
                    f(torch.randn(3))
            else:
                f(torch.randn(3))
        return counter.frame_count

    assert compiled_frames(record=True) == compiled_frames(record=False) == 2


torch.library.define(f"{NS}::scaled_out", "(Tensor x, Tensor scale, *, Tensor(a!) out) -> Tensor(a!)")


@torch.library.register_fake(f"{NS}::scaled_out")
def _scaled_out_fake(x, scale, *, out):
    result = torch.broadcast_shapes(x.shape, scale.shape)
    torch._check(out.shape == result, lambda: f"out has shape {list(out.shape)}, the result {list(result)}")
    return out


@torch.library.register_kernel(f"{NS}::scaled_out", "cpu")
def _scaled_out(x, scale, *, out):
    # Lax, like many real kernels: it writes the first elements of whatever out it is given.
    flat = (x * scale).reshape(-1)
    n = min(flat.numel(), out.numel())
    out.view(-1)[:n].copy_(flat[:n])
    return out


def test_an_out_argument_keeps_the_shape_the_op_gives_its_result():
    """The broadcast and untie axes resized out= away from the result's shape: the fake kernel
    rightly refused it, the lax real kernel wrote into it, and that was reported as a fake
    kernel failure. A tensor the op writes to is never given a size of its own."""
    x = torch.randn(3, 4)
    report = check(torch.ops.symfuzz_contracts.scaled_out.default, ((x, torch.randn(3, 4)), {"out": torch.empty(3, 4)}),
                   checks="faketensor")
    assert report.results["faketensor"].status == "passed", report.format()
    template = make_template(torch.ops.symfuzz_contracts.scaled_out.default, (x, torch.randn(3, 4)),
                             {"out": torch.empty(3, 4)})
    assign([template])
    sweep = Sweep(template)
    out_slot = next(n for n, slot in enumerate(template.slots) if slot.mutable)
    for variant in sweep.edges():
        assert all(t != out_slot for t, _, _ in variant.untie), variant


torch.library.define(f"{NS}::row_scale", "(Tensor A, Tensor row_stats) -> Tensor")


@torch.library.register_fake(f"{NS}::row_scale")
def _row_scale_fake(A, row_stats):
    return torch.empty_like(A, dtype=torch.float32)


@torch.library.register_kernel(f"{NS}::row_scale", "cpu")
def _row_scale(A, row_stats):
    return A.float() * row_stats.float().view(-1, 1)  # silently broadcasts a one-row A against more statistics


def test_dims_equal_in_every_varied_call_stay_tied_under_every_axis():
    """row_stats always has A.size(0) entries. The broadcast axis made A one row while the
    statistics kept two: the lax kernel broadcast, the fake did not, and that was reported as a
    fake kernel bug. The tie is printed as a contract, with its reason."""
    op = torch.ops.symfuzz_contracts.row_scale.default
    calls = [((torch.randn(n, 8), torch.rand(n)), {}) for n in (4, 6, 3)]
    report = check(op, calls, checks="faketensor")
    assert report.results["faketensor"].status == "passed", report.format()
    assert any("A.size(0) == row_stats.size(0): equal in all 3 recorded calls" in line
               for line in report.contracts), report.contracts
    # From one recorded shape too: A.size(0) and row_stats.size(0) are at places broadcasting
    # never relates (it aligns dims from the right), so the tie is the op's, not a broadcast.
    one = check(op, [calls[0]], checks="faketensor")
    assert one.results["faketensor"].status == "passed", one.format()
    assert any("A.size(0) == row_stats.size(0): equal in every recorded call, at places broadcasting never "
               "relates" in line for line in one.contracts), one.contracts
    # Where broadcasting does align them (one statistic per column, beside A's last dim), it is
    # swept from one shape, and the mismatch it shows is the fake's to answer for.
    columns = check(op, [((torch.randn(4, 8), torch.rand(8)), {})], checks="faketensor")
    assert not columns.contracts, columns.contracts


def test_a_size_follows_an_int_argument_that_varied_while_the_data_kept_its_shape():
    """absmax always had ceil(A.numel() / blocksize) entries; blocksize varied while A kept one
    shape. A was held fixed and absmax left free, and the sweep shrank absmax to 0 entries, on
    which the real kernel segfaulted."""
    samples = [deq_call((4, 64), 64), deq_call((4, 64), 128), deq_call((4, 64), 32)]
    tpls, lines = templates(samples)
    assert any("absmax: size(0) follows ceil(A.numel() / blocksize)" in line for line in lines), lines
    # absmax's changes are the rule's: A is data beside it, not a table the callers never resize.
    assert 0 not in tpls[0].contracts.fixed and any("code: held fixed" in line for line in lines), lines
    for template in tpls:
        sweep = Sweep(template)
        for case in map(sweep.case, sweep.edges()):
            A, absmax, _ = case.tensor_inputs()
            numel = 1
            for d in A.shape:
                numel *= d
            assert absmax.shape == (-(-numel // template.leaves[3]),), (case.describe(), lines)
    report = check(f"{NS}::deq", samples, checks=["faketensor"], budget=30)
    assert report.results["faketensor"].inputs_rejected < report.results["faketensor"].inputs_tried


torch.library.define(f"{NS}::biased", "(Tensor A, Tensor? bias=None) -> Tensor")


@torch.library.register_fake(f"{NS}::biased")
def _biased_fake(A, bias=None):
    shape = A.shape if bias is None else torch.broadcast_shapes(A.shape, bias.shape)
    return A.new_empty(shape, dtype=A.dtype if bias is None else torch.result_type(A, bias))


@torch.library.register_kernel(f"{NS}::biased", "cpu")
def _biased(A, bias=None):
    torch._check(A.is_floating_point(), lambda: "A must be floating-point")  # else x * 2 promotes bool, as no fake says
    return (A * 2 if bias is None else A * 2 + bias).contiguous()  # fresh, row-major: as the fake says


@pytest.mark.parametrize("order", ["given first", "None first"])
def test_an_optional_tensor_given_in_one_call_and_none_in_another_are_two_structures(order):
    # A suite parametrized over bias / no bias, passing bias=bias: the pytree spec is the same
    # (None is a leaf), the number of tensors is not.
    op = getattr(torch.ops, NS).biased.default
    given = ((torch.randn(4, 3),), {"bias": torch.randn(3)})
    left_out = ((torch.randn(4, 3),), {"bias": None})
    samples = [given, left_out] if order == "given first" else [left_out, given]
    tpls = [make_template(op, args, kwargs) for args, kwargs in samples]
    assign(tpls, schema=op._schema)
    with_bias, without = sorted(tpls, key=lambda t: -len(t.slots))
    assert with_bias.structure != without.structure
    assert with_bias.contracts is not without.contracts, "each call's contracts are read off calls of its structure"
    report = check(op, samples, checks=["schema", "faketensor"], budget=20)
    assert not report.internal_errors() and not report.error, report.format(repro=False)
    assert report.ok, report.format(repro=False)


def test_calls_of_one_op_at_two_ranks_are_compared_without_error():
    op = getattr(torch.ops, NS).biased.default
    report = check(op, [((torch.randn(4, 3),), {}), ((torch.randn(4),), {})], checks=["faketensor"], budget=20)
    assert not report.internal_errors() and not report.error, report.format(repro=False)
    assert report.ok, report.format(repro=False)
