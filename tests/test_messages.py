"""The worker protocol (symfuzz/messages.py): every request and event survives its line, and a
line that is not one (cut short by a death) is no event."""

from __future__ import annotations

import json

import pytest

from symfuzz.messages import (
    Assign,
    CanaryDone,
    CaseResult,
    Judged,
    Planned,
    Ready,
    Result,
    RunCanary,
    Started,
    Warm,
    Warmup,
    decode_event,
    decode_request,
    encode_event,
    encode_request,
    is_corpus_index,
)

UNIT_TIER = True


@pytest.mark.parametrize("request_", [Assign(3), Assign("corpus:ab12", {"program": {}}), RunCanary(), Warmup()])
def test_each_request_survives_its_line(request_):
    line = encode_request(request_)
    assert "\n" not in line and decode_request(line) == request_


BODY = CaseResult(valid=True, compiled=True, calls=3, checked=2, graphs=[1, 0, 1], seconds={"compile": 1.5},
                  verdicts=[{"symptom": "crash"}], ops={"add": 2}, total_seconds=2.0)


@pytest.mark.parametrize("event", [
    Ready(12, "2.13.0"), Started(0, {"program": {}}), Planned("corpus:ab12", {"program": {}}),
    Judged(4, [{"symptom": "value-mismatch"}]), Result(7, BODY), CanaryDone(BODY), Warm(True, 4.5),
    Result(8, CaseResult(internal_error="Traceback ...")),
])
def test_each_event_survives_its_line(event):
    line = encode_event(event)
    assert "\n" not in line and decode_event(line) == event


def test_a_result_line_holds_the_body_flat_and_an_internal_error_only_when_there_is_one():
    data = json.loads(encode_event(Result(7, BODY)))
    assert data["event"] == "result" and data["index"] == 7 and data["checked"] == 2
    assert "internal_error" not in data
    assert json.loads(encode_event(Result(8, CaseResult(internal_error="boom"))))["internal_error"] == "boom"


@pytest.mark.parametrize("line", ['{"event": "resu', '{"event": "nonsense"}', '{"index": 3}', "[]", ""])
def test_a_line_that_is_no_event_decodes_to_none(line):
    assert decode_event(line) is None


def test_corpus_indices_are_told_from_generated_ones():
    assert is_corpus_index("corpus:ab12") and not is_corpus_index(12) and not is_corpus_index(None)
