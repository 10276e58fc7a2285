"""toolkit.eval.rescore: saved BFCL outputs re-read and re-scored in place; a changed verdict moves the counts."""

import copy

from toolkit.eval import bfcl
from toolkit.eval.rescore import rescore
from toolkit.paths import saved_json


def test_rescoring_the_saved_outputs_changes_nothing_until_a_verdict_is_wrong():
    doc = saved_json("bfcl_qwen2.5-coder-0.5b.json")
    cases = {c.id: c for c in bfcl.subset()}
    same = copy.deepcopy(doc)
    changes = rescore(same, cases, dict(date="d", commit="c"))
    assert set(changes) >= {"accuracy"} and all(not k for k in changes.values())
    assert same["accuracy"]["data"]["rows"] == doc["accuracy"]["data"]["rows"]
    assert same["accuracy"]["meta"]["rescored"] == dict(date="d", commit="c", changed=0)
    wrong = copy.deepcopy(doc)  # a saved verdict that today's scorer disagrees with
    row = next(c for c in wrong["accuracy"]["data"]["cases"] if c["ok"])
    row["ok"], row["kind"] = False, "wrong_value"
    changes = rescore(wrong, cases, dict(date="d", commit="c"))
    assert sum(changes["accuracy"].values()) == 1 and row["ok"]
    assert wrong["accuracy"]["data"]["rows"] == doc["accuracy"]["data"]["rows"]  # the counts follow back
