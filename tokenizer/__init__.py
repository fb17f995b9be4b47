"""A readable GPT-2 compatible byte-level BPE tokenizer (work in progress)."""
