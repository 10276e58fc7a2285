"""The reward module: right calls earn 1, and each way to game it earns nothing."""

import json

from toolkit.loop.execute import CallResult
from toolkit.rl import reward
from toolkit.tools import schemas

TOOLS = schemas(["get_weather", "calculator", "convert_units"])
WANT = [{"name": "get_weather", "arguments": {"city": "Paris"}}]


def tagged(*calls):
    return "".join(f"<tool_call>{json.dumps(c)}</tool_call>" for c in calls)


def test_the_right_call_earns_one_and_a_wrong_value_or_name_or_count_none():
    assert reward.call_reward(tagged(WANT[0]), TOOLS, WANT) == 1.0
    assert reward.call_reward(tagged({"name": "get_weather", "arguments": {"city": "Rome"}}), TOOLS, WANT) == 0.0
    assert reward.call_reward(tagged({"name": "calculator", "arguments": {"expression": "1"}}), TOOLS, WANT) == 0.0
    assert reward.call_reward(tagged(WANT[0], WANT[0]), TOOLS, WANT) == 0.0


def test_calling_every_tool_earns_nothing():
    every = [
        WANT[0],
        {"name": "calculator", "arguments": {"expression": "2+2"}},
        {"name": "convert_units", "arguments": {"value": 1, "from_unit": "km", "to_unit": "m"}},
    ]
    assert reward.call_reward(tagged(*every), TOOLS, WANT) == 0.0


def test_a_call_inside_prose_or_untagged_or_empty_earns_nothing():
    assert reward.call_reward("Sure! " + tagged(WANT[0]) + " Hope that helps.", TOOLS, WANT) == 0.0
    assert reward.call_reward(json.dumps(WANT[0]), TOOLS, WANT) == 0.0
    assert reward.call_reward("", TOOLS, WANT) == 0.0
    assert reward.call_reward("<tool_call>{not json</tool_call>", TOOLS, WANT) == 0.0


def test_decline_rewards_text_and_no_call_only():
    assert reward.decline_reward("None of these tools can book a flight.") == 1.0
    assert reward.decline_reward("   ") == 0.0
    assert reward.decline_reward("I'll try: " + tagged(WANT[0])) == 0.0
    assert reward.decline_reward("<tool_call>{") == 0.0


def test_listing_many_numbers_does_not_meet_a_numeric_outcome():
    q = "Please compute 12 × 3 − 4"
    assert reward.numbers_ok("The result is 32.", 32, q)
    assert not reward.numbers_ok("It is 30, 31, 32 or 33.", 32, q)
    assert not reward.numbers_ok("", 32, q)
    assert not reward.numbers_ok("It is 36.", 32, q)


def _r(name, args, status="ok"):
    return CallResult("c", name, args, status, {})


def test_failed_repeated_and_unneeded_calls_cost():
    one = [_r("calculator", {"expression": "1+1"})]
    assert reward.outcome_reward(True, one, needed=1) == 1.0
    assert reward.outcome_reward(True, one + one, needed=1) == 1.0 - 2 * reward.COST  # repeated and unneeded
    failed = [_r("calculator", {"expression": "x"}, "error")] + one
    assert reward.outcome_reward(True, failed, needed=1) == 1.0 - 2 * reward.COST
    assert reward.outcome_reward(False, [], needed=1) == 0.0
    assert reward.outcome_reward(False, one * 9, needed=1) == -1.0


def test_a_number_is_read_as_the_strict_judge_reads_it_and_odd_text_never_raises():
    """A misplaced thousands separator is two numbers, not the result (the mini-run's model wrote "13,16" for
    1316); a correct one is the result; text shaped like a version number once raised ValueError mid-training."""
    q = "Please compute 45 × 49 − 889"
    assert reward.numbers_ok("45 * 49 - 889 = 1,316.", 1316, q)
    assert not reward.numbers_ok("45 * 49 - 889 = 13,16.", 1316, q)
    for odd in ("1.2.3", "v1.2.3.4", "1,,2", "-.5", "1e5e5", ",", "."):
        assert isinstance(reward.numbers(odd), list)
        assert reward.numbers_ok(odd, 1316, q) is False
