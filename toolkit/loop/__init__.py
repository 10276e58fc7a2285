"""The host loop: ``loop`` drives a backend; ``steps`` are what it yields; ``execute`` runs the calls;
``examples`` are its worked examples. Nothing is imported here."""
