"""The fused kernels of the Transformer Program modules (``tpcore.models.program.ops``), where
:func:`tpcore.dispatch.kernel` finds them: ``ops`` marks its references
``@kernel("program_model")``, so each kernel is looked up by its reference's name in this module.
The kernels themselves live in modules by job, and this one gathers them:

- :mod:`tpcore.kernels.program_attention`: the categorical and numerical attention heads, laid
  out batch-inner (:mod:`tpcore.kernels.batch_inner`) so that per-sequence products and row
  operations become vectorised loops over the sequences;
- :mod:`tpcore.kernels.program_mlp`: the MLPs, BLAS products with the passes between them fused;
- :mod:`tpcore.kernels.program_read`: the gated reads of the streams, copies of the chosen
  variables once the gates are one-hot to float32's resolution.

Each kernel has the name, arguments, results and cache of the NumPy reference it stands in for
(see ``tpcore.kernels.nn`` for the contract). Active hooks run the references, and so does the
discrete mode of the categorical heads and the MLPs (no temperature: argmax samples).
"""

from __future__ import annotations

from tpcore.kernels.program_attention import (
    cat_attention_backward,
    cat_attention_forward,
    num_attention_backward,
    num_attention_forward,
)
from tpcore.kernels.program_mlp import mlp_backward, mlp_forward
from tpcore.kernels.program_read import gated_read_backward, read_forward

__all__ = ["cat_attention_backward", "cat_attention_forward", "gated_read_backward",
           "mlp_backward", "mlp_forward", "num_attention_backward", "num_attention_forward",
           "read_forward"]
