"""The setting of "How transformers learn structured data: insights from hierarchical
filtering", shared by its reproductions (``bp-table``, ``grammar-learning``, ``hierarchy``):
depth 4, 4 symbols, sigma 1 and the seed-0 grammar of the paper's code."""

from __future__ import annotations

from tpcore.tasks.trees import Grammar, random_grammar

PAPER = dict(l=4, q=4, sigma=1.0, grammar_seed=0, paper_grammar=True)
"""The paper's setting: depth 4, 4 symbols, sigma 1, the seed-0 grammar of its code."""


def paper_grammar(seed: int = PAPER["grammar_seed"]) -> Grammar:
    """The paper's transition tensor (``random_grammar(4, 1.0, seed=0, paper_grammar=True)``);
    another ``seed`` draws another grammar of its setting as its code does (seeds 1, 15 and 31:
    the grammars of its Fig. 9)."""
    return random_grammar(PAPER["q"], PAPER["sigma"], seed, paper_grammar=True)
