"""toolkit.widgets.capacity: the view's numbers are toolkit.cost.capacity's, and the controls drive them."""

from toolkit import cost
from toolkit.widgets.capacity import CapacityView


def test_view_shows_the_calculator_and_follows_its_controls():
    v = CapacityView()
    assert v.result == cost.capacity("Qwen3-0.6B", 141e9, 4.8e12, 10_000, 2048, 30)
    assert f"<td>{v.result.sessions}</td>" in v.out.value and f"<td>{v.result.sessions_shared}</td>" in v.out.value
    before = v.result.sessions
    v.controls["memory"].value = 80
    assert v.result.sessions < before and v.result == cost.capacity("Qwen3-0.6B", 80e9, 4.8e12, 10_000, 2048, 30)
    v.controls["model"].value = "Llama 3 8B"
    assert v.result.model == "Llama 3 8B" and "Llama 3 8B" in v.out.value
