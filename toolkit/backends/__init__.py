"""Backends behind one protocol (``base``): a transformers model (``hf``), a scripted fake (``scripted``) and
the kit's own engine (``engine``). Nothing is imported here."""
