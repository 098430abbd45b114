"""Transformer Program model: a transformer with a disentangled residual stream whose every choice
is a relaxed categorical sample, so that its argmax is a program.

The stream is a list of named variables. Categorical variables are one-hots (relaxed while
training) padded to a common width ``d``; numerical variables are scalars. Inputs: ``tokens``
(fixed one-hot, or ``n_embed_vars`` learned factored variables ``embed_0 ...``), ``positions``
(one-hot of the position) and ``ones`` (numerical, all 1). Each layer runs, reading the stream
as it stands at the start of the layer,

- ``n_cat_heads`` categorical heads ``attn_{l}_{h}`` (read gates for query, key and value over the
  categorical variables, a predicate matrix, closest-match hard attention with default to BOS;
  output: the value copied from the attended position, a new categorical variable);
- ``n_num_heads`` numerical heads ``num_attn_{l}_{h}`` (categorical query and key, a numerical
  value variable; output ``sum_j S_ij value_j``, a new numerical variable);

then, reading the stream after the heads,

- ``n_cat_mlps`` categorical MLPs ``mlp_{l}_{i}`` (two categorical inputs) and ``n_num_mlps``
  numerical MLPs ``num_mlp_{l}_{i}`` (two numerical inputs), each a new categorical variable of
  width ``k``.

A linear classifier reads every variable of the final stream. ``forward(tokens, pad, rng, tau)``
trains with Gumbel-softmax samples at temperature ``tau``; with ``tau=None`` it is the *discrete
model*: argmax gates, predicates, attention and MLP outputs, no noise. :meth:`ProgramModel.discrete`
returns that model as plain data (:class:`DiscreteProgram`), which is what program extraction
reads.

The package, one module per part:

- ``config``: :class:`ProgramConfig`; ``layout``: which rows of a layer's packed head read gates
  belong to which head (:class:`AttnGateLayout`);
- ``ops``: the forward/backward pairs of every step, with the exact semantics (the fused kernels
  of ``tpcore.kernels.program_model`` stand in for them);
- the components, each holding its parameters, with ``forward`` (keeping its cache) and
  ``backward``: ``heads`` (the read gates, categorical and numerical heads), ``mlps``
  (categorical and numerical MLPs), ``embed`` (learned factored embedding), ``classifier``;
- ``layer``: :class:`ProgramLayer`, a layer's parameters and the loop over its components;
  ``model``: :class:`ProgramModel`, the loop over the layers;
- ``stream``: the stream's variables (:class:`VarSpec`) and the hook vocabulary (every variable
  by its name, every head's pattern ``attn_0_1.pattern``); ``extension``: modules that append
  variables computed from the tokens (:class:`StreamExtension`); ``discrete``: the discrete model
  as data.
"""

from tpcore.models.program.config import ProgramConfig
from tpcore.models.program.discrete import DiscreteHead, DiscreteMlp, DiscreteProgram
from tpcore.models.program.extension import StreamExtension
from tpcore.models.program.layout import AttnGateLayout
from tpcore.models.program.model import ProgramModel
from tpcore.models.program.stream import VarSpec

__all__ = ["AttnGateLayout", "DiscreteHead", "DiscreteMlp", "DiscreteProgram", "ProgramConfig",
           "ProgramModel", "StreamExtension", "VarSpec"]
