"""Control flow in the PIR translation and the parity report, without Paddle: positions, refusals, the note."""

from edgekit.export.pir_translate import control_flow_ops, position_words, untranslatable
from edgekit.verify.tiers import control_flow_note


def _op(name, *blocks):
    op = {"op": name, "inputs": [], "outputs": [], "attrs": {}}
    if blocks:
        op["blocks"] = list(blocks)
    return op


def test_nested_positions_read_as_words():
    assert position_words("4") == "op #4"
    assert position_words("5/1/3") == "op #3 of block 1 of op #5"
    assert position_words("5/0/2/1/0") == "op #0 of block 1 of op #2 of block 0 of op #5"


def test_if_and_while_translate_and_unknown_ops_inside_blocks_are_refused_by_position():
    inner_if = _op("pd_op.if", [_op("pd_op.relu"), _op("cf.yield")], [_op("pd_op.cumsum"), _op("cf.yield")])
    graph = {"ops": [_op("pd_op.data"), _op("pd_op.if", [_op("pd_op.conv2d"), inner_if, _op("cf.yield")],
                                                     [_op("pd_op.sigmoid"), _op("cf.yield")]),
                     _op("pd_op.while", [_op("pd_op.add"), _op("cf.yield")]), _op("pd_op.fetch")]}
    found = [(position, op["op"]) for position, op in untranslatable(graph)]
    assert found == [("1/0/1/1/0", "pd_op.cumsum")]        # pd_op.while translates (test_pir_gaps.py)
    assert control_flow_ops(graph) == {"pd_op.if": 2, "pd_op.while": 1}


def test_a_yield_outside_a_block_is_not_taken_for_one():
    assert [op["op"] for _, op in untranslatable({"ops": [_op("cf.yield")]})] == ["cf.yield"]


def test_control_flow_note_counts_blocks_and_warns():
    assert control_flow_note({"conv2d": 3, "relu": 1}) is None
    note = control_flow_note({"conditional_block": 2, "select_input": 1})
    assert note.startswith("control flow: the program holds 2 control-flow blocks (2 conditional_block)")
    assert "only the branches the evaluation samples take" in note
    one = control_flow_note({"while": 1})
    assert "1 control-flow block (1 while)" in one
