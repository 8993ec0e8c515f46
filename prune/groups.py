"""Reading PaddleSlim's pruning collections (dygraph and static alike) into `plan.Group`s.

Both paths end up with a `paddleslim.core.GraphWrapper` and collections whose details
carry (var, axis, op); nothing here depends on which path built them.
"""

from __future__ import annotations

from typing import Mapping, Sequence

from .plan import Conv, Group

CONV_OPS = ("conv2d", "depthwise_conv2d")

# what PaddleSlim's graph walk stops at, in the user's terms
UNREACHABLE = (("assign_value", "its channels are tied to the model's input (e.g. a residual add with the input)"),
               ("named feed", "its channels are tied to the model's input (e.g. a residual add with the input)"),
               ("named fetch", "its channels are a model output"),
               ("was skipped", "its channels are a model output"))


def tied_convs(collection) -> list[str]:
    """Conv weights losing output filters in this collection (master first), depthwise followers excluded."""
    names = [collection.master_name]
    for d in collection.all_pruning_details():
        if d.axis == 0 and d.op.type() == "conv2d" and len(d.var.shape()) == 4 and (d.op.attr("groups") or 1) == 1 \
                and d.name not in names:
            names.append(d.name)
    return names


def groups_from(collections, convs: Mapping[str, Conv]) -> list[Group]:
    groups = []
    for c in collections:
        tied, depthwise, consumers, grouped = [], [], [], []
        for d in c.all_pruning_details():
            if d.name == c.master_name or len(d.var.shape()) < 2:
                continue
            conv = convs.get(d.name)
            if d.axis == 0 and conv is not None:
                (depthwise if conv.depthwise else tied).append(d.name)
            elif d.axis == 1:
                consumers.append(d.name)
                if conv is not None and conv.grouped:
                    grouped.append((d.name, conv.groups))
        groups.append(Group(c.master_name, tuple(dict.fromkeys(tied)), tuple(dict.fromkeys(depthwise)),
                            tuple(dict.fromkeys(consumers)), tuple(dict.fromkeys(grouped))))
    return groups


def unreachable(graph, params: Sequence[str]) -> dict[str, str]:
    """Walk PaddleSlim's graph from each conv that got no collection and say where the walk stopped."""
    from paddleslim.prune import PruningCollections
    from paddleslim.prune.prune_worker import PRUNE_WORKER, UnsupportOpError

    leaves = PruningCollections()._find_leaves(graph)
    reasons = {}
    for name in params:
        var = graph.var(name)
        if var is None or not var.outputs():
            continue
        op = var.outputs()[0]
        worker_cls = PRUNE_WORKER.get(op.type())
        if worker_cls is None:
            reasons[name] = f"PaddleSlim cannot prune op {op.type()}"
            continue
        worker = worker_cls(op, pruned_params=[], visited={}, skip_stranger=True)
        worker.skip_vars = list(leaves)
        try:
            worker.prune(var, pruned_axis=0, transforms=[])
        except UnsupportOpError as exc:
            text = str(exc.args[0]) if exc.args else str(exc)
            reason = next((r for key, r in UNREACHABLE if key in text), None)
            if reason is None and "Unsupported operator named" in text:
                reason = f"its channels pass through op {text.rsplit(' ', 1)[-1]}, which PaddleSlim cannot follow"
            reasons[name] = reason or f"PaddleSlim: {text}"
        except Exception as exc:   # a worker's own assert: say so rather than guess
            reasons[name] = f"PaddleSlim's graph walk failed ({type(exc).__name__})"
    return reasons
