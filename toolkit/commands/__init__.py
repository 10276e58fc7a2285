"""One module per ``python -m toolkit <command>``; each has ``cli(argv) -> int``. Nothing is imported here."""
