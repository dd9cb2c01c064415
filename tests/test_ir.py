"""The Program IR: rendering and JSON round trips."""

import json

from symfuzz.fuzz.ir import BranchNode, EffectNode, Input, OpNode, Program, SizeNode

UNIT_TIER = True  # its tests are the fast tier (-m unit), but those marked integration: tests/conftest.py


def sample_program():
    return Program(
        inputs=(Input("x0", "float32", ("s0", 3)), Input("x1", "int64", ("s0",))),
        body=(
            OpNode("v1", "add", ("x0", "2"), {"alpha": 2}),
            SizeNode("n2", "v1.size(0) * 2"),
            BranchNode("v3", "x0.size(0) > 4", "v1 * 2", "v1 - 1"),
            EffectNode("zero_", ("x1",), {"reject": ""}),  # params as the generator records them
            OpNode("v4", "relu", ("v3",)),
        ),
        outputs=("v4", "v1"),
    )


def test_render_is_plain_python_and_deterministic():
    program = sample_program()
    source = program.render()
    assert source == program.render()
    assert source.splitlines()[0] == "def fn(x0, x1):"
    assert "    v1 = torch.add(x0, 2, alpha=2)" in source
    assert "    n2 = v1.size(0) * 2" in source
    assert "    x1.zero_()" in source  # an in-place statement, rendered without assignment
    assert "    if x0.size(0) > 4:\n        v3 = v1 * 2\n    else:\n        v3 = v1 - 1" in source
    assert source.rstrip().endswith("return (v4, v1)")
    compile(source, "<test>", "exec")


def test_single_output_renders_as_tuple():
    program = Program((Input("x0", "float32", ("s0",)),), (OpNode("v1", "neg", ("x0",)),), ("v1",))
    assert program.render().rstrip().endswith("return (v1,)")


def test_json_round_trip_is_exact():
    program = sample_program()
    data = json.loads(json.dumps(program.to_json()))
    again = Program.from_json(data)
    assert again == program
    assert again.render() == program.render()


def test_newer_ir_is_refused_with_a_clear_message():
    data = sample_program().to_json()
    data["ir_version"] = 99
    try:
        Program.from_json(data)
    except ValueError as exc:
        assert "newer symfuzz" in str(exc)
    else:
        raise AssertionError("a newer IR version was accepted")
