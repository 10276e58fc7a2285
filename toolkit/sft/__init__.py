"""Supervised fine-tuning on tool-calling trajectories: ``labels`` (the loss mask), ``finetune``, ``probes``,
``experiment``. Nothing is imported here."""
