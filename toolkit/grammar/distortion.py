"""How step-wise masking changes the distribution, computed exactly on a tiny grammar.

What it does (book §9.4.5's warning, made concrete)
- ``distortion`` enumerates every token path of a small grammar (an enum of a few multi-token strings) and compares
  each string's true probability under the model (renormalised over valid outputs) with the probability step-wise
  masking + renormalisation gives it.

What it leaves out
- Large grammars: the walk is exponential; ``max_nodes`` bounds it and ``pruned`` reports what was cut.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from toolkit.grammar.compile import Grammar
from toolkit.grammar.inspect import trace
from toolkit.grammar.mask import GrammarMask, allowed_mask


# ---------------------------------------------------------------- distortion: exact, on an enumerable grammar
@dataclass
class Distortion:
    """Per valid output: its probability under the model (renormalised over all valid outputs) vs under
    step-wise masking + renormalisation. ``valid_mass``: how much of the model's own probability the valid
    outputs hold; ``pruned``: masked-decoding probability on paths cut off as negligible (``eps``)."""

    rows: list  # [(text, p_model, p_masked, n_token_paths)], sorted by p_model
    valid_mass: float
    pruned: float
    nodes: int  # model forwards spent
    greedy: str  # what greedy constrained decoding outputs
    paths: list = field(default_factory=list)  # [(token ids, P model (not renormalised), P masked)] per leaf

    @property
    def argmax_model(self) -> str:
        return max(self.rows, key=lambda r: r[1])[0]

    @property
    def argmax_masked(self) -> str:
        return max(self.rows, key=lambda r: r[2])[0]

    @property
    def changed(self) -> bool:
        return self.argmax_model != self.argmax_masked

    def table(self) -> str:
        lines = [f"{'output':<28} {'P model (renorm.)':>18} {'P masked':>10} {'paths':>6}"]
        lines += [f"{t!r:<28} {pm:>18.4f} {pk:>10.4f} {n:>6}" for t, pm, pk, n in self.rows]
        return "\n".join(lines)


def distortion(
    model, tokenizer, prompt_ids, grammar: Grammar, eps: float = 1e-4, max_nodes: int = 400, max_depth: int = 24
) -> Distortion:
    """Walk every token path the grammar allows (all tokenisations of every valid output), one forward per
    tree node with the KV cache cropped back on the way up, and sum path probabilities per output text.

    A path is followed while either its model probability (relative to the best complete output found so far)
    or its masked probability is above ``eps``, likeliest child first, for at most ``max_nodes`` forwards; the
    masked probability of what is cut is reported in ``pruned``, so "exact" means exact up to that number.
    """
    stops = set(grammar.stop_token_ids)
    dev = next(model.parameters()).device
    root = GrammarMask(grammar)
    bitmask = root.allocate()
    leaves: list[tuple[list, float, float]] = []  # (ids, log p_model, p_masked)
    state = {"nodes": 0, "pruned": 0.0}
    with torch.no_grad():
        ids = torch.tensor([list(prompt_ids)], device=dev)
        out = model(input_ids=ids, use_cache=True, logits_to_keep=1)
        cache, n0 = out.past_key_values, len(prompt_ids)

        def visit(matcher, path, logits, logp, pmask):
            state["nodes"] += 1
            logprobs = torch.log_softmax(logits.float(), -1)
            matcher.fill_next_token_bitmask(bitmask, 0)
            allowed = np.flatnonzero(allowed_mask(bitmask, grammar.vocab_width))
            lp_allowed = logprobs[torch.as_tensor(allowed, device=logprobs.device)].cpu().double()
            z = torch.logsumexp(lp_allowed, 0)
            order = torch.argsort(lp_allowed, descending=True).tolist()  # likeliest first: a node cap cuts the tail
            for tok, lp in ((int(allowed[k]), float(lp_allowed[k])) for k in order):
                child_logp, child_pmask = logp + lp, pmask * float(np.exp(lp - float(z)))
                if tok in stops:
                    leaves.append((path, child_logp, child_pmask))
                    continue
                best = max((leaf[1] for leaf in leaves), default=child_logp)
                negligible = child_pmask < eps and child_logp - max(best, child_logp) < np.log(eps)
                if negligible or len(path) >= max_depth or state["nodes"] >= max_nodes:
                    state["pruned"] += child_pmask
                    continue
                child = matcher.fork()
                child.accept_token(tok)
                length = n0 + len(path)
                step = model(input_ids=torch.tensor([[tok]], device=dev), cache=cache, use_cache=True, logits_to_keep=1)
                visit(child, path + [tok], step.logits[0, -1], child_logp, child_pmask)
                cache.crop(-(cache.get_seq_length() - length))  # back to this node's prefix for the next sibling

        visit(root.matcher, [], out.logits[0, -1], 0.0, 1.0)
    if not leaves:
        raise ValueError("no complete output found: is the grammar finite and small (an enum)?")
    merged: dict[tuple, list] = {}  # one output per path: each stop id that ends it adds its probability
    for path, lp, pm in leaves:
        m = merged.setdefault(tuple(path), [0.0, 0.0])
        m[0] += float(np.exp(lp))
        m[1] += pm
    leaves = [(list(p), float(np.log(m[0])) if m[0] > 0 else -np.inf, m[1]) for p, m in merged.items()]
    texts: dict[str, list] = {}
    for path, lp, pm in leaves:
        t = tokenizer.decode(path)
        agg = texts.setdefault(t, [0.0, 0.0, 0])
        agg[0] += float(np.exp(lp))
        agg[1] += pm
        agg[2] += 1
    valid = sum(a[0] for a in texts.values())
    rows = sorted(((t, a[0] / valid, a[1], a[2]) for t, a in texts.items()), key=lambda r: -r[1])
    greedy = trace(model, tokenizer, prompt_ids, grammar, max_new_tokens=max_depth + 1).text
    paths = [(p, float(np.exp(lp)), pm) for p, lp, pm in leaves]
    return Distortion(rows, valid, state["pruned"], state["nodes"], greedy, paths)
