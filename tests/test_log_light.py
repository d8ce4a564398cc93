"""The light tier (``sources.log.light``, issue 46): what it knows of ops without torch, checked against
torch itself; each fact of a printed graph it reads, against the graph torch printed."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.fx.experimental.proxy_tensor import make_fx

from fxviz.core.graph_facts import CAST_OPS, node_flops
from fxviz.sources.log.light.flops import FLOP_PACKETS
from fxviz.sources.log.light.flops import node_flops as text_flops
from fxviz.sources.log.light.logged import RANDOM_OPS
from fxviz.sources.log.light.nodes import CAST_PACKETS, DTYPE_NAMES, annotation
from fxviz.sources.log.light.text import parse_text


def _packets(namespace: object, keep) -> set[str]:
    """Every op of ``namespace`` (``torch.ops.aten``) that ``keep``s: all its registered schemas, not only the
    packets this process happened to touch (``dir`` lists those alone, so the set depended on test order)."""
    import torch._inductor.lowering

    prefix = f"{namespace.name}::"
    names = {s.name[len(prefix):] for s in torch._C._jit_get_all_schemas() if s.name.startswith(prefix)}
    found = set()
    for name in names | set(dir(namespace)):
        packet = getattr(namespace, name, None)
        if not hasattr(packet, "overloads"):
            continue
        if any(keep(getattr(packet, o)) for o in packet.overloads()):
            found.add(name)
    return found


def test_the_op_lists_are_torchs():
    """Which ops draw random numbers, count FLOPs, convert a dtype; what each dtype abbreviation is."""
    from torch.utils._dtype_abbrs import dtype_abbrs
    from torch.utils.flop_counter import flop_registry

    from fxviz._torch import attention_flop_formulas

    seeded = lambda op: torch.Tag.nondeterministic_seeded in op.tags  # noqa: E731
    assert _packets(torch.ops.aten, seeded) | _packets(torch.ops.prims, seeded) == RANDOM_OPS
    aten = {str(k).split(".", 1)[1] for k in flop_registry if str(k).startswith("aten.")}
    assert aten | {str(k).split(".", 1)[1] for k in attention_flop_formulas()} == FLOP_PACKETS
    assert {abbr: str(dt).replace("torch.", "") for dt, abbr in dtype_abbrs.items()} == DTYPE_NAMES
    assert CAST_PACKETS == CAST_OPS


def _step(x, w, b, q, k, v, a3, b3):
    h = torch.mm(x, w) + torch.addmm(b, x, w)
    s = torch.bmm(a3, b3) + torch.baddbmm(a3[:, :, :1], a3, b3)
    att = F.scaled_dot_product_attention(q, k, v)
    return h.sum() + s.sum() + att.sum()


def test_flops_without_torch_are_torchs_counts():
    """mm, addmm, bmm, baddbmm and attention from the printed shapes equal ``flop_counter``'s count of the
    same graph's nodes (``graph_facts.node_flops``)."""
    args = (torch.randn(6, 4), torch.randn(4, 5), torch.randn(5), torch.randn(2, 4, 8, 16), torch.randn(2, 4, 10, 16),
            torch.randn(2, 4, 10, 12), torch.randn(3, 4, 7), torch.randn(3, 7, 5))
    gm = make_fx(_step)(*args)
    text = gm.print_readable(print_output=False, include_stride=True, include_device=True)
    light = parse_text(text)
    counted = {n.name: node_flops(n) for n in gm.graph.nodes}
    assert sum(counted.values()) > 0
    for n in light.calls:
        assert text_flops(n, {}) == counted[n.name], n


def test_a_printed_graph_read_back():
    """Every node, op, input and annotation of a graph torch printed."""
    gm = make_fx(lambda x, w: torch.relu(x @ w).t().contiguous().split(2))(torch.randn(4, 3), torch.randn(3, 4))
    text = gm.print_readable(print_output=False, include_stride=True, include_device=True)
    light = parse_text(text)
    nodes = [n for n in gm.graph.nodes if n.op != "output"]
    assert [n.name for n in light] == [n.name for n in nodes]
    for mine, theirs in zip(light, nodes):
        assert [a.name for a in mine.all_input_nodes] == [a.name for a in theirs.all_input_nodes]
        val = theirs.meta.get("val")
        if isinstance(val, torch.Tensor):
            a = annotation(mine.annotation)
            assert a is not None and list(a.sizes) == list(val.shape) and list(a.strides) == list(val.stride())
            assert a.dtype_name == str(val.dtype).replace("torch.", "")
        if theirs.op == "call_function" and hasattr(theirs.target, "_schema"):
            assert str(mine.target) == str(theirs.target)
            from fxviz.core.graph_facts import is_view_op

            assert mine.target.view == is_view_op(theirs.target)
