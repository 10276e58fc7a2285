"""The book pipeline: figures (``figures``, ``diagrams``) and the claims ledger (``claims``, ``claims_*``,
``ledger``); ``catalog`` holds realistic tool schemas. Nothing is imported here."""
