"""``python -m toolkit constrain``: sample outputs under a JSON-Schema grammar and validate them."""

from __future__ import annotations

import json
import sys

from toolkit import cliargs, models
from toolkit.artifact import ArtifactError
from toolkit.grammar.valid import SchemaError, min_tokens, read_schema_file, validate_schema


# ---------------------------------------------------------------- command line
def cli(argv: list[str]) -> int:
    """``python -m toolkit constrain --schema FILE --samples N --temperature T [--json] [--model NAME]``."""
    ap = cliargs.Parser(
        prog="python -m toolkit constrain",
        description="Sample outputs under a JSON-Schema grammar (xgrammar) and validate them.",
    )
    ap.add_argument("--schema", required=True, type=cliargs.existing_file, help="JSON Schema file")
    ap.add_argument("--samples", type=cliargs.count(1, 1000), default=5)
    ap.add_argument("--temperature", type=cliargs.number(0.0, 10.0), default=1.0, help="0 = greedy")
    ap.add_argument("--seed", type=cliargs.seed, default=0)
    ap.add_argument("--max-new-tokens", type=cliargs.count(1, 4096), default=64)
    ap.add_argument("--prompt", default="Give one example.", help="the user message")
    ap.add_argument(
        "--model",
        type=cliargs.model,
        default="auto",
        help="auto | stand-in | qwen2.5-coder-0.5b | folder (default auto)",
    )
    ap.add_argument("--unconstrained", action="store_true", help="sample without the grammar, for comparison")
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of lines")
    ap.add_argument(
        "--allow-unenforced",
        action="store_true",
        help="sample even if the schema uses keywords xgrammar does not enforce (printed as warnings)",
    )
    a = ap.parse_args(argv)
    if not a.prompt.strip():
        ap.error("--prompt is empty")
    try:  # the file, its JSON and the meta-schema first: no xgrammar (seconds: it loads torch) for a bad file
        schema = read_schema_file(str(a.schema))
        validate_schema(schema)
        if min_tokens(schema) > a.max_new_tokens:
            raise SchemaError(
                f"no value of this schema fits --max-new-tokens {a.max_new_tokens}: it needs at least "
                f"{min_tokens(schema):,} tokens (minItems, minProperties or minLength)"
            )
    except SchemaError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    # lazy: the grammar modules import xgrammar and torch; the arguments and the schema are checked before they load
    from toolkit.grammar.check import chat_prompt, check
    from toolkit.grammar.compile import bounded, compile_schema
    from toolkit.grammar.hf import sample
    from toolkit.grammar.precheck import precheck

    try:  # every check a schema can fail runs here, before a model loads
        warnings = precheck(schema, a.allow_unenforced)
    except SchemaError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2

    for w in warnings:
        print(f"warning: not enforced by the grammar: {w}", file=sys.stderr)
    try:
        loaded = models.load(a.model, quiet=True)
    except ArtifactError as e:
        cliargs.damaged(ap, e)
    except (OSError, ConnectionError, ValueError) as e:
        cliargs.fail(ap, f"could not load model {a.model!r}: {str(e).splitlines()[0][:300]}")
    notes = list(loaded.notes) + [f"not enforced by the grammar: {w}" for w in warnings]
    if not loaded.semantic:
        # A random-weight model rarely closes a string by itself: bound them so every sample terminates.
        schema, notes = bounded(schema), notes + ["stand-in: strings bounded with maxLength (see constrain.bounded)"]
    try:
        grammar = compile_schema(schema, loaded.tokenizer, models.vocab_width(loaded.model))
    except SchemaError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    system = "Reply with only a JSON object that matches this JSON Schema:\n" + json.dumps(schema, ensure_ascii=False)
    prompt = chat_prompt(loaded.tokenizer, a.prompt, system=system)
    gens = sample(
        loaded.model,
        loaded.tokenizer,
        prompt,
        None if a.unconstrained else grammar,
        a.samples,
        a.temperature,
        a.seed,
        a.max_new_tokens,
    )
    checks = [check(g.text, schema) for g in gens]
    n_valid = sum(c.valid for c in checks)
    if a.json:
        print(
            json.dumps(
                {
                    "model": loaded.description,
                    "semantic": loaded.semantic,
                    "notes": notes,
                    "constrained": not a.unconstrained,
                    "temperature": a.temperature,
                    "seed": a.seed,
                    "valid": n_valid,
                    "samples": [
                        {
                            "text": g.text,
                            "parses": c.parses,
                            "valid": c.valid,
                            "error": c.error,
                            "terminated": g.terminated,
                            "tokens": len(g.ids),
                        }
                        for g, c in zip(gens, checks)
                    ],
                },
                ensure_ascii=False,
                indent=1,
            )
        )
    else:
        print(f"model: {loaded.description}")
        for n in notes:
            print(f"note: {n}")
        for i, (g, c) in enumerate(zip(gens, checks)):
            print(f"[{i}] {'valid' if c.valid else 'INVALID (' + c.error + ')'}: {g.text}")
        print(
            f"{n_valid}/{len(gens)} valid ({'constrained' if not a.unconstrained else 'unconstrained'}, "
            f"T={a.temperature})"
        )
    return 0
