"""A classroom-capacity calculator view (§14.5.8): how many agent sessions one server's KV cache holds.

- ``CapacityView``: a model preset, the server's memory (GB) and bandwidth (TB/s), and the chapter's workload
  (T tool tokens, Δ new tokens per turn, R turns) drive ``toolkit.cost.capacity``: sessions that fit with and
  without prefix sharing (the tool block stored once) and their aggregate decode-rate bound, as an HTML table.
  ``view.result`` is the plain ``toolkit.cost.Capacity`` that tests read without a browser; ``view.widget`` is
  what a notebook displays.

Leaves out: figures (the table is the answer), paged-cache block rounding, activations and fragmentation
(``reserve`` stands in for them), anything ``toolkit.cost.capacity`` leaves out.
"""

from __future__ import annotations

import ipywidgets as W

from toolkit import cost


class CapacityView:
    def __init__(
        self,
        model: str = "Qwen3-0.6B",
        memory_gb: float = 141.0,
        bandwidth_tb_s: float = 4.8,
        T: int = 10_000,
        delta: int = 2048,
        R: int = 30,
    ):
        style = {"description_width": "initial"}
        self.controls = {
            "model": W.Dropdown(options=sorted(cost.KV_SHAPES), value=model, description="model", style=style),
            "memory": W.FloatSlider(value=memory_gb, min=8, max=192, step=1, description="memory GB", style=style),
            "bandwidth": W.FloatSlider(value=bandwidth_tb_s, min=0.1, max=8, step=0.1, description="TB/s", style=style),
            "T": W.IntSlider(value=T, min=0, max=40_000, step=500, description="T (tool tokens)", style=style),
            "delta": W.IntSlider(value=delta, min=128, max=8192, step=128, description="Δ per turn", style=style),
            "R": W.IntSlider(value=R, min=1, max=100, description="R turns", style=style),
        }
        self.out = W.HTML()
        for c in self.controls.values():
            c.observe(lambda _: self.update(), names="value")
        self.widget = W.VBox([W.HBox(list(self.controls.values()), layout=W.Layout(flex_flow="row wrap")), self.out])
        self.update()

    def update(self) -> None:
        c = {k: w.value for k, w in self.controls.items()}
        self.result = cost.capacity(c["model"], c["memory"] * 1e9, c["bandwidth"] * 1e12, c["T"], c["delta"], c["R"])
        r = self.result
        self.out.value = (
            f"<table><tr><th></th><th>sessions</th><th>decode bound, tokens/s (all sessions)</th></tr>"
            f"<tr><td>each session holds its own tool block</td><td>{r.sessions}</td><td>{r.tokens_per_s:,.0f}</td></tr>"
            f"<tr><td>tool block shared (prefix sharing)</td><td>{r.sessions_shared}</td>"
            f"<td>{r.tokens_per_s_shared:,.0f}</td></tr></table>"
            f"<p>{r.model}: {r.kv_per_token / 1024:,.0f} KiB of KV cache per token; a session at its longest holds "
            f"{r.context:,} tokens = {r.context * r.kv_per_token / 1e9:,.1f} GB; {r.free_bytes / 1e9:,.1f} GB left "
            "for the cache after the weights and a 10% reserve.</p>"
        )
