"""The function bank the training-data generator draws from: made-up APIs in many domains, each with a JSON
Schema and request phrasings in English and Chinese.

What it does
- :data:`BANK` holds :class:`Fn` entries: a name, a description, parameters built from small typed slot makers
  (:func:`text`, :func:`integer`, :func:`number`, :func:`choice` for enums, :func:`many` for arrays, :func:`group`
  for nested objects, :func:`flag` for booleans) and request templates (``en``/``zh``) whose ``{slot}`` marks say
  where a value is mentioned. A template that mentions an optional parameter puts it in the call; one that does
  not leaves it out, so the model learns that optional means "only when asked". ``{slot=value}`` sets a value
  without printing it (a boolean the phrasing implies).
- Every slot draws a value and says it in the request's language (``Draw.value`` goes in the call, ``Draw.say``
  in the text), so the arguments are exactly what the request asked for.

What it leaves out
- Any text from BFCL (the names and phrasings here were written for the kit; ``tests/test_sft_data.py`` checks
  that no BFCL function name or question occurs in the generated set) and any real API behind the names: only the
  kit's own tools (``toolkit.tools``) are ever executed.
"""

from __future__ import annotations

from toolkit.sft.bank_daily import DAILY
from toolkit.sft.bank_work import WORK
from toolkit.sft.slots import Draw, Fn, Slot  # noqa: F401  (the bank's types, re-exported for callers)

BANK: list[Fn] = WORK + DAILY
