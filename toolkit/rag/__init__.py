"""Retrieval next to tools (book §14.5.10): a small access-labelled corpus, BM25 with permission filtering before
ranking, cited answers, retrieval and answer support scored apart, retrieval as a tool vs before the first turn."""
