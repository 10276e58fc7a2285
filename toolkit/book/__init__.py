"""The book pipeline: figures (``figures``, ``diagrams``) and the claims ledger (``claims``, ``claims_*``,
``ledger``, ``registry``: one check per claim, ``evidence``: the loaders they share); ``catalog`` holds realistic
tool schemas. Nothing is imported here."""
