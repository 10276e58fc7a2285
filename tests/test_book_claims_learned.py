"""toolkit.book.claims_learned: the saved masked-vs-unmasked fine-tunes (benchmarks/sft_mask.py) read into §14.5.7's
claim, with a verdict that follows the saved counts."""

import copy
import json

import pytest

from toolkit.book import claims_learned
from toolkit.book.ledger import CAVEAT, FAILS, HOLDS
from toolkit.paths import results_file


@pytest.fixture(scope="module")
def saved():
    path = results_file(claims_learned.MASK, required=False)
    assert path is not None, "benchmarks/results/sft_mask.json is missing: run python benchmarks/sft_mask.py"
    return json.loads(path.read_text(encoding="utf-8"))


def test_the_saved_run_supports_the_claim_with_the_stand_in_caveat(saved):
    c = claims_learned._invents_claim(saved)
    um, n = saved["counts"]["unmasked"]["greedy"]["tool_response"]
    assert c.id == "unmasked-invents" and f"{um}/{n}" in c.evidence and saved["commit"] in c.evidence
    assert c.verdict == CAVEAT and "stand-in" in c.why
    assert c.id in {x.id for x in claims_learned.learned_claims()}


def test_the_verdict_follows_the_counts(saved):
    r = copy.deepcopy(saved)
    n = r["counts"]["masked"]["greedy"]["tool_response"][1]
    r["counts"]["masked"]["greedy"]["tool_response"] = [n, n]  # the masked run made results up as often
    assert claims_learned._invents_claim(r).verdict == FAILS
    r = copy.deepcopy(saved)
    r["model"] = "a real model"
    assert claims_learned._invents_claim(r).verdict == HOLDS
