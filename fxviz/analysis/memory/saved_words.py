"""The saved table's words and columns, without torch: what a saved value is (``KINDS``), what another
strategy does with it (``FATES``), how an op's outputs are called (``OP_WORDS``), the caption; shared by the
table made from partitions (``saved``) and the one a log's own text gives (``api.logged``)."""

from __future__ import annotations

__all__ = ["OP_WORDS", "KINDS", "FATES", "ROW_ORDER", "HELD_ANYWAY", "SAVED_COLUMNS", "BY_MODULE_COLUMNS", "NO_MODULE",
           "output_words", "saved_caption"]

KINDS: tuple[str, ...] = ("activation", "parameter", "input", "offloaded", "symint")
"""What a saved value is: a new tensor of the forward, a view of module state (the memory table's
``saved_param_bytes``), a view of a user input (``saved_input_bytes``), the copy torch's activation
offloading saves in place of a value (``offloaded_bytes``: on the host, not among the activations), or
a size."""

FATES: tuple[str, ...] = ("saved", "offloaded", "recomputed", "not needed", "failed")
"""What another strategy does with a value: saves it, saves a copy on another device (activation
offloading), runs it again in the backward, needs it not at all (it saves something else it is made
from or makes), or fails on this graph."""

ROW_ORDER: tuple[str, ...] = ("activation", "offloaded", "symint", "input", "parameter")
"""The order of the table's rows by kind: what the choice of partition costs first (activations, their
offloaded copies, sizes), then the inputs and parameters the backward reads, which the step holds anyway
(``HELD_ANYWAY``).  Within a kind, the biggest storage first."""

HELD_ANYWAY: tuple[str, ...] = ("input", "parameter")
"""Kinds the step holds whatever the partition: saving them costs no memory."""

SAVED_COLUMNS: list[str] = ["kind", "module", "op", "what", "shape", "dtype", "bytes", "shares_storage_with",
                            "source"]
"""The table's columns (its index is the joint node name), before one column per strategy: the one
listed first (every row ``saved``, or ``offloaded``), then the others."""

BY_MODULE_COLUMNS: list[str] = ["module", "saved_activation_bytes", "saved_activations", "storages", "biggest"]

NO_MODULE = "(no module)"
"""The module of a value traced outside every module's forward (the loss, top-level code)."""

# op -> (what a person calls it, the names of its outputs in order).  One table for every word the
# saved table prints; an op not listed reads "<op> output" (and "<op> output k" for output k).
OP_WORDS: dict[str, tuple[str, tuple[str, ...]]] = {
    "native_layer_norm": ("LayerNorm", ("output", "mean", "rstd")),
    "native_group_norm": ("GroupNorm", ("output", "mean", "rstd")),
    "_fused_rms_norm": ("RMSNorm", ("output", "rstd")),
    "native_batch_norm": ("BatchNorm", ("output", "mean", "invstd")),
    "_native_batch_norm_legit": ("BatchNorm", ("output", "mean", "invstd")),
    "_native_batch_norm_legit_functional": ("BatchNorm", ("output", "mean", "invstd", "running mean",
                                                          "running var")),
    "_native_batch_norm_legit_no_training": ("BatchNorm", ("output", "mean", "invstd")),
    "native_dropout": ("dropout", ("output", "mask")),
    "max_pool2d_with_indices": ("max-pool", ("output", "indices")),
    "max_pool3d_with_indices": ("max-pool", ("output", "indices")),
    "_scaled_dot_product_flash_attention_for_cpu": ("attention", ("output", "logsumexp")),
    "_scaled_dot_product_flash_attention": ("attention", ("output", "logsumexp", "cum_seq_q", "cum_seq_k",
                                                          "max_q", "max_k", "philox seed", "philox offset",
                                                          "debug mask")),
    "_scaled_dot_product_efficient_attention": ("attention", ("output", "logsumexp", "philox seed",
                                                              "philox offset")),
    "_scaled_dot_product_cudnn_attention": ("attention", ("output", "logsumexp")),
    "nll_loss_forward": ("NLL loss", ("output", "total weight")),
    "nll_loss2d_forward": ("NLL loss", ("output", "total weight")),
    "max": ("max", ("values", "indices")),
    "min": ("min", ("values", "indices")),
    "topk": ("top-k", ("values", "indices")),
    "sort": ("sort", ("values", "indices")),
    "var_mean": ("var_mean", ("variance", "mean")),
    "gelu": ("GELU", ("output",)),
    "relu": ("ReLU", ("output",)),
    "silu": ("SiLU", ("output",)),
    "sigmoid": ("sigmoid", ("output",)),
    "tanh": ("tanh", ("output",)),
    "erf": ("erf", ("output",)),
    "exp": ("exp", ("output",)),
    "hardtanh": ("hardtanh", ("output",)),
    "leaky_relu": ("LeakyReLU", ("output",)),
    "_softmax": ("softmax", ("output",)),
    "_log_softmax": ("log-softmax", ("output",)),
    "addmm": ("Linear (addmm)", ("output",)),
    "mm": ("matmul", ("output",)),
    "bmm": ("batched matmul", ("output",)),
    "baddbmm": ("batched matmul", ("output",)),
    "convolution": ("convolution", ("output",)),
    "embedding": ("embedding", ("output",)),
    "mul": ("product", ("output",)),
    "add": ("sum", ("output",)),
    "sub": ("difference", ("output",)),
    "div": ("quotient", ("output",)),
    "rsqrt": ("rsqrt", ("output",)),
    "pow": ("power", ("output",)),
    "mean": ("mean", ("output",)),
    "sum": ("sum", ("output",)),
    "arange": ("arange", ("output",)),
    "bitwise_not": ("mask (not)", ("output",)),
    "le": ("mask (<=)", ("output",)),
    "lt": ("mask (<)", ("output",)),
    "ge": ("mask (>=)", ("output",)),
    "gt": ("mask (>)", ("output",)),
    "eq": ("mask (==)", ("output",)),
    "ne": ("mask (!=)", ("output",)),
    "clone": ("copy", ("output",)),
    "_unsafe_view": ("reshape (copy)", ("output",)),
}


def output_words(op: str, index: int) -> str:
    """Output ``index`` of op ``op`` in words (``LayerNorm rstd``; ``<op> output k`` for an op not listed)."""
    name, outputs = OP_WORDS.get(op, (op, ()))
    if index < len(outputs):
        return f"{name} {outputs[index]}"
    return f"{name} output {index}" if index else f"{name} output"


def saved_caption(strategy: str, values: int, offloaded: bool, others: list[str], column: str | None = None) -> str:
    """The saved table's caption: ``strategy`` (its name, with what it is), how many values, how bytes count;
    ``column``: the strategy's own column (its name; default ``strategy``), ``others``: the columns after it."""
    copies = (" and offloaded_bytes (kind 'offloaded': the copies torch's activation offloading saves in place of a "
              "value, on the device each row's 'what' names; not among the activations). " if offloaded else ". ")
    return (f"What strategy {strategy} saves for the backward: {values} values, activations first (biggest storage "
            "first), then the inputs and parameters the backward reads, which the step holds anyway. bytes count "
            "storages (a view or alias of a saved value adds 0 and says which value's storage it shares); the kinds "
            "add up to tr.memory_table()'s saved_activation_bytes, saved_param_bytes and saved_input_bytes" + copies
            + f"Column {column or strategy}: what it does with each value"
            + (f"; then what {', '.join(others)} do with it." if others else "."))
