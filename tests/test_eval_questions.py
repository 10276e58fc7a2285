"""toolkit.eval.questions: the loop question sets as data, and a judge that wants the stated value or conclusion,
not a substring of the answer."""

import json
import re

import pytest

from toolkit.eval.questions import (
    Question,
    by_id,
    judge,
    judge_saved,
    numbers,
    questions,
    stated_result,
    steps_from_saved,
)
from toolkit.paths import results_file


def weather(*cities):
    from toolkit.tools import TOOLS

    return [
        dict(name="get_weather", arguments={"city": c}, status="ok", result=TOOLS["get_weather"].fn(c)) for c in cities
    ]


def test_the_sets_are_data_with_one_reader():
    main, fresh, heldout, h2 = (questions(s) for s in ("main", "fresh", "heldout", "heldout2"))
    assert len(main) == 23 and len(fresh) == 12 and len(heldout) == 16 and len(h2) == 14
    assert questions() == main + fresh + heldout + h2
    ids = [q.id for q in questions()]
    assert len(ids) == len(set(ids)) and all(
        q.set in ("main", "fresh", "heldout", "heldout2") and q.question and q.note for q in questions()
    )
    for q in questions():  # every record is judged (nothing raises), and an empty answer meets none
        assert not judge(q, "", [])
    with pytest.raises(ValueError, match="unknown question set"):
        questions("held-out")


def test_numbers_are_whole_numbers():
    assert numbers("8% of 1,250 = 1,000") == [8, 1250, 1000]
    assert numbers("1234 * 5678 = 7,006,652.") == [1234, 5678, 7006652]
    assert numbers("Qwen2.5 says 137.5, 上海现在28°C，15%等于4.2。") == [137.5, 28, 15, 4.2]
    assert numbers("London 14, 24 and 3-5") == [14, 24, 3, 5]


def test_a_number_must_be_the_stated_result_not_a_substring():
    q = Question("pct", "main", "math", "What is 8% of 1,250?", "100", {"number": [100, 100]})
    assert not judge(q, "8% of 1,250 = 1,000")  # contains "100" as text; states 1,000
    assert not judge(q, "It is 1000.") and judge(q, "8% of 1,250 = 100.")
    percent = by_id("percent_zh")
    calc = [dict(name="calculator", arguments={"expression": "250*0.15"}, status="ok", result={"result": 37.5})]
    assert judge(percent, "250的15%是37.5。", calc) and not judge(percent, "250的15%是137.5。", calc)
    assert not judge(percent, "250的15%是37.5。", [])  # the record needs the calculator's result too
    s = by_id("f_sum_en")  # 14 + 24 = 38, but the answer's conclusion is 52
    steps = weather("London", "Sydney")
    assert not judge(s, "Today in London 14°C and Sydney 24°C is 38°C, so they add up to 52.", steps)
    assert judge(s, "London is 14°C and Sydney 24°C: together 38°C.", steps)
    assert (
        stated_result(by_id("tokyo_f_en"), "Tokyo is 69.8°F and clear right now (55% humidity).", weather("Tokyo"))
        == 69.8
    )


def test_a_comparison_must_name_the_right_city():
    colder, steps = by_id("colder_en"), weather("Berlin", "New York")
    assert not judge(colder, "Berlin is 12°C and New York 16°C, so Sydney is colder.", steps)
    assert not judge(colder, "Berlin is 12°C and New York is 16°C, so New York is colder.", steps)
    assert not judge(colder, "Berlin is 12°C and New York is 16°C: 12 is warmer by 4.", steps)
    assert judge(colder, "Berlin is 12°C and New York is 16°C, so Berlin is colder by 4 degrees.", steps)
    assert judge(colder, "The colder one is Berlin; New York is warmer.", steps)
    assert not judge(colder, "Berlin is colder.", weather("Berlin"))  # New York was never looked up
    hotter, zh = by_id("f_hotter_zh"), weather("深圳", "上海")
    assert judge(hotter, "深圳30°C，上海28°C，深圳更热。", zh) and judge(hotter, "深圳比上海热。", zh)
    assert not judge(hotter, "上海比深圳热。", zh) and not judge(hotter, "上海更热。", zh)


def test_words_prose_and_no_tools():
    rain, steps = by_id("guangzhou_zh"), weather("广州")
    assert judge(rain, "广州现在31°C，thunderstorms，湿度88%。", steps)
    assert not judge(rain, "广州有雷阵雨，但你不需要带伞。", steps)
    spanish = by_id("f_spanish_en")
    assert judge(spanish, 'In Spanish, "good evening" is "buenas tardes".', [])
    assert not judge(spanish, '{"name": "good evening", "arguments": {"message": "¡Buenas tardes!"}}', [])
    assert not judge(spanish, "buenas tardes", weather("London"))  # a tool ran where none was needed
    v = judge(by_id("intro_zh"), "I am a helpful assistant.", [])
    assert not v and "Chinese prose without JSON: False" in v.reason


def test_the_heldout_set_judges_declines_chains_and_all_of_several():
    kinds = {q.kind for q in questions("heldout")}
    assert {"decline", "two-step chain", "units", "compute then compare", "calculator error"} <= kinds
    asked = {q.question for q in questions("main") + questions("fresh")}
    assert not asked & {q.question for q in questions("heldout")}
    pct = by_id("h_pct_compare_en")  # both the value and the conclusion
    assert judge(pct, "15% of 480 is 72, which is more than 70. Yes.", [])
    assert not judge(pct, "Yes, it is more than 70.", []) and not judge(pct, "15% of 480 is 72, less than 70.", [])
    assert not judge(pct, "15% of 480 is 72, which is not greater than 70.", [])  # the RL adapter's answer
    power = by_id("h_power_compare_zh")
    assert judge(power, "3的5次方是243，比250小，所以250更大。", [])
    assert not judge(power, "3的5次方是243，243比250大。", [])
    stock = by_id("h_stock_en")
    assert judge(stock, "I can't look up live share prices: none of my tools has market data.", [])
    assert not judge(stock, "I can't look that up.", weather("New York"))  # a junk call
    gap = by_id("h_gap_en")
    assert judge(gap, "Hangzhou is 27°C and Chengdu 22°C, so Hangzhou is 5 degrees warmer.", weather("杭州", "成都"))
    assert not judge(by_id("h_divzero_en"), "45 / 0 = 0", [])
    assert judge(by_id("h_divzero_en"), "You cannot divide by zero: 45 / 0 is undefined.", [])


def test_a_call_written_as_text_is_not_an_answer_whatever_result_it_claims():
    """RL from the base model learned to write ``{"name": "calculator", "arguments": {..., "result": "42.0"}}``
    untagged: no host ran it, the number is the model's guess. The plain answer and a real call both still pass."""
    q = by_id("sqrt_en")
    assert judge(q, "The square root of 1764 is 42.").met
    blob = '{"name": "calculator", "arguments": {"expression": "sqrt(1764)", "result": "42.0"}}'
    for text in (blob, f"```json\n{blob}\n```", f"Here it is: {blob} So 42."):
        v = judge(q, text)
        assert not v.met and v.parts["not a call written as text"] is False, text
    ran = [dict(name="calculator", arguments={"expression": "sqrt(1764)"}, status="ok", result={"result": 42.0})]
    assert judge(q, "It is 42.", ran).met


def test_saved_calls_are_replayed_on_the_demo_tools():
    steps = steps_from_saved(
        ['get_weather({"city": "纽约"})->ok', 'write_note({"title": "t", "text": "x"})->ok', "junk"]
    )
    assert [s["name"] for s in steps] == ["get_weather", "write_note"]
    assert steps[0]["result"]["city"] == "New York" and steps[1]["result"] is None  # a side effect is not run again


def test_the_saved_runs_rescored_strictly_never_gain():
    """The strict judge only takes away: every saved run it meets, the lenient checks had met too."""
    for name in ("loop_questions_lora.json", "loop_questions_base-free_fresh.json"):
        doc = json.loads(results_file(name).read_text(encoding="utf-8"))
        for r in doc["rows"]:
            v = judge_saved(r)
            assert r["met"] or not v.met, (name, r["id"], v.reason)
    row = next(r for r in doc["rows"] if r["id"] == "f_spanish_en")
    assert row["met"] and not judge_saved(row)
    assert re.search(r"Buenas", row["answer"])


def test_a_saved_run_counted_met_refusals_and_junk():
    from toolkit.eval.questions import refuses, summary

    assert refuses("Sorry, the available tools don't cover this request.") and refuses(
        "抱歉，现有的函数都无法完成这个请求"
    )
    assert not refuses("Bonjour!") and not refuses(None)
    rows = [
        dict(met=True, calls=['get_weather({"city": "Paris"})->ok'], answer="18°C"),
        dict(met=False, calls=[], answer="I don't have a function for that."),
        dict(met=False, calls=['calculator({"expression": "x"})->error', "c()->repeated"], answer="I can't."),
    ]
    assert summary(rows) == {"met": 1, "total": 3, "refused": 1, "junk": 2}  # a refusal after calls is not counted


HELDOUT2 = {  # id -> (a right answer, its calls, a wrong answer): each check can pass and can fail
    "h2_taxi_en": ("Sorry, I can't book a taxi: no tool here does that.", [], "Your taxi is booked."),
    "h2_bank_zh": ("抱歉，我无法查询银行卡余额。", [], "你的余额是 3,200 元。"),
    "h2_goodnight_en": ("In German it is 'Gute Nacht'.", [], "It is 'Guten Morgen'."),
    "h2_ocean_en": ("The Indian Ocean.", [], "The Pacific Ocean."),
    "h2_paris_plus_en": ("It would be 25 °C.", ['get_weather({"city": "Paris"})->ok'], "It would be 18 °C."),
    "h2_london_below_zh": ("低 6 度。", ['get_weather({"city": "London"})->ok'], "低 14 度。"),
    "h2_sf_minus_en": ("15 - 5 = 10.", ['get_weather({"city": "San Francisco"})->ok'], "It is 20."),
    "h2_gallons_en": ("About 11.36 litres.", [], "About 13.6 litres."),
    "h2_marathon_zh": ("约 42.16 公里。", [], "约 16.28 公里。"),
    "h2_pounds_en": ("About 68.04 kg.", [], "About 330.7 kg."),
    "h2_rect_zh": ("面积是 90 平方米。", [], "面积是 39 平方米。"),
    "h2_jacket_en": ("You pay 60 dollars.", [], "You pay 20 dollars."),
    "h2_square_en": ("225 - 100 = 125.", [], "It is 30."),
    "h2_power_compare_en": ("2^10 = 1024, which is larger than 1000.", [], "2^10 = 1024, so 1000 is larger."),
}


def test_every_heldout2_check_can_pass_and_can_fail():
    held = {q.id: q for q in questions("heldout2")}
    assert set(held) == set(HELDOUT2)
    for qid, (right, calls, wrong) in HELDOUT2.items():
        steps = steps_from_saved(calls)
        assert judge(held[qid], right, steps), qid
        assert not judge(held[qid], wrong, steps), qid
