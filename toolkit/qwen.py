"""Facts about Qwen's vocabulary the rest of the kit relies on: widths, ids and added tokens.

What it does
- ``VOCAB_WIDTH`` (151,936: the logit width of every Qwen2/2.5/3 model, larger than ``len(tokenizer)``), the added
  tokens of Qwen2.5 and Qwen3 with their official ids and special flags (``ADDED_TOKENS``), the pre-tokenizer
  pattern, and the ids the loop and the grammar use: ``<|im_end|>`` (``IM_END_ID``), the turn's stop ids (``STOP_IDS``: also
  ``<|endoftext|>``) and ``<tool_call>`` /
  ``</tool_call>`` (``TOOL_CALL_ID`` / ``TOOL_CALL_END_ID``). Each is written once, here.

What it leaves out
- Any other model family, and Qwen3.5+ vocabularies. Nothing here loads a file or a library.
"""

from __future__ import annotations

VOCAB_WIDTH = 151_936  # logit width of every Qwen2/2.5/3 model; larger than len(tokenizer)


# Added tokens after the 151,643 BPE ranks: (id, text, special). Facts from Qwen's tokenizer_config files.
_QWEN25_ADDED = [
    (151643, "<|endoftext|>", True),
    (151644, "<|im_start|>", True),
    (151645, "<|im_end|>", True),
    (151646, "<|object_ref_start|>", True),
    (151647, "<|object_ref_end|>", True),
    (151648, "<|box_start|>", True),
    (151649, "<|box_end|>", True),
    (151650, "<|quad_start|>", True),
    (151651, "<|quad_end|>", True),
    (151652, "<|vision_start|>", True),
    (151653, "<|vision_end|>", True),
    (151654, "<|vision_pad|>", True),
    (151655, "<|image_pad|>", True),
    (151656, "<|video_pad|>", True),
    (151657, "<tool_call>", False),
    (151658, "</tool_call>", False),
    (151659, "<|fim_prefix|>", False),
    (151660, "<|fim_middle|>", False),
    (151661, "<|fim_suffix|>", False),
    (151662, "<|fim_pad|>", False),
    (151663, "<|repo_name|>", False),
    (151664, "<|file_sep|>", False),
]


_QWEN3_EXTRA = [
    (151665, "<tool_response>", False),
    (151666, "</tool_response>", False),
    (151667, "<think>", False),
    (151668, "</think>", False),
]


ADDED_TOKENS = {"qwen2.5": _QWEN25_ADDED, "qwen3": _QWEN25_ADDED + _QWEN3_EXTRA}


# Qwen's pre-tokenizer: like GPT-4's but digits are split one by one.
QWEN_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)


IM_END = "<|im_end|>"


IM_END_ID = 151645


ENDOFTEXT_ID = 151643


# The ids that end a generated turn: <|im_end|> as the template closes every turn, and <|endoftext|>, which Qwen's
# generation_config.json lists as an eos too (transformers' generate stops at both). Qwen2.5-Coder-0.5B writes
# <|endoftext|> right after a </tool_call> now and then; a host that stops only at <|im_end|> decodes on past it.
STOP_IDS = (IM_END_ID, ENDOFTEXT_ID)


TOOL_CALL_ID, TOOL_CALL_END_ID = 151657, 151658  # <tool_call>, </tool_call>: single added tokens in Qwen vocabs
