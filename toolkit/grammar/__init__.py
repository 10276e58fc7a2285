"""Constrained decoding on xgrammar: ``compile`` -> ``mask`` -> ``check``; ``hf`` (the library's transformers
integration), ``inspect`` (trace, score) and ``distortion``. Nothing is imported here."""
