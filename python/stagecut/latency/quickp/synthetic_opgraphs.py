"""Synthetic operator graphs in QuickP's node-link format (read them with
:func:`~stagecut.latency.quickp.opgraph.operator_graph_from_data`; the format is described in
:mod:`stagecut.latency.quickp.opgraph`).

:func:`synthetic_operator_graph` writes such data for graphs shaped like the operator graphs of
CNNs (ResNet-style blocks of convolutions followed by chains of batch-norm and activation
operators, residual adds, a U-Net-style mirror whose decoder concatenates encoder outputs
thousands of operators back) and of transformers (layer norm, attention and GELU chains of
elementwise operators around large matrix products, residual adds, one mask read by every
layer), and of AlexNet and VGG-16 *training* graphs as TensorFlow writes them (QuickP's
targets: forward layers, loss, gradients reading the forward activations, momentum updates,
tuple groupings with control edges of size 0, shape plumbing; most operators cost nothing or a
few microseconds, a multi-output loss whose links carry different tensors), of exactly ``n``
operators, seeded, in O(n).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from stagecut.errors import InvalidArgumentError
from stagecut.validate import check_int, shown

__all__ = ["synthetic_operator_graph", "SHAPES"]

#: The shapes :func:`synthetic_operator_graph` draws.
SHAPES = ("cnn", "transformer", "alexnet", "vgg")


#: op types without a cost in every synthetic graph (sources)
_SOURCES = ("VariableV2", "Const", "Placeholder")
#: op types without a cost in the training graphs (metadata and control operators as well)
_FREE = (*_SOURCES, "Identity", "Shape", "ShapeN", "NoOp", "Reshape", "ExpandDims", "Squeeze", "StopGradient")


class _Builder:
    """Operators and links of a synthetic graph (times in microseconds, sizes in bits)."""

    FLOPS = 15e6      # flops per microsecond (15 TFLOP/s)
    BYTES = 9e5       # bytes per microsecond of memory bandwidth (900 GB/s)

    def __init__(self, n: int, seed: int, devices: int) -> None:
        self.n, self.rng = n, np.random.default_rng(seed)
        self.devices = [f"GPU:{d}" for d in range(devices)]
        self.nodes: list[dict[str, Any]] = []
        self.links: list[dict[str, Any]] = []
        self.out_bits: list[float] = []

    def room(self) -> int:
        return self.n - len(self.nodes)

    def op(self, op_type: str, scope: str, preds: Sequence[int], *, flops: float = 0.0, out_bytes: float,
           weight_bytes: float = 0.0, moved: float | None = None, free: Sequence[str] = _SOURCES,
           tensors: Mapping[int, float] | None = None) -> int:
        """Add an operator reading ``preds``; its time is ``flops`` at :attr:`FLOPS` plus the bytes
        it reads and writes at :attr:`BYTES`, times a noise in [0.85, 1.15] (0 for the op types in
        ``free``). ``tensors``: bytes carried by the link from some of ``preds`` when it is not
        that producer's main output (a second output, a control edge: 0)."""
        i = len(self.nodes)
        tensors = tensors or {}
        sent = [tensors.get(p, self.out_bits[p] / 8) for p in preds]
        traffic = (moved if moved is not None else out_bytes + sum(sent))
        t = 0.0 if op_type in free else \
            (flops / self.FLOPS + traffic / self.BYTES + 2.0) * float(self.rng.uniform(0.85, 1.15))
        self.nodes.append({"id": f"{scope}/{op_type}_{i}", "op_type": op_type, "mem": float(weight_bytes + out_bytes),
                           "comp_cost": dict.fromkeys(self.devices, round(t, 3))})
        self.out_bits.append(out_bytes * 8.0)
        for p, b in zip(preds, sent):
            self.links.append({"source": self.nodes[p]["id"], "target": self.nodes[i]["id"],
                               "tensor_size_in_bit": b * 8.0})
        return i

    def chain(self, ops: Sequence[str], scope: str, x: int, size: float) -> int:
        for op in ops:
            x = self.op(op, scope, [x], out_bytes=size)
        return x

    def weighted(self, op_type: str, scope: str, x: int, flops: float, out_bytes: float, weight: float) -> int:
        """A variable, its read and the operator that uses it."""
        v = self.op("VariableV2", scope, [], out_bytes=weight)
        r = self.op("Identity", scope, [v], out_bytes=weight)
        return self.op(op_type, scope, [x, r], flops=flops, out_bytes=out_bytes, weight_bytes=weight)

    def tail(self, x: int) -> None:
        ops = ("Mul", "Add", "Relu", "Sub", "Mean")
        k = 0
        while self.room() > 0:
            x = self.op(ops[k % len(ops)], "tail", [x], out_bytes=4096.0)
            k += 1

    def data(self, shape: str, seed: int) -> dict[str, Any]:
        return {"directed": True, "multigraph": False, "graph": {"shape": shape, "seed": seed},
                "nodes": self.nodes, "links": self.links}


def _cnn(b: _Builder, batch: int) -> None:
    bn = ("Mul", "Add")
    skips: list[tuple[int, int, int]] = []   # (node, side, channels) of encoder stages
    x = b.op("Placeholder", "input", [], out_bytes=batch * 224 * 224 * 3 * 4)
    side, ch, stage = 112, 64, 0
    half = b.n // 2
    while b.room() >= 60:
        decoding = len(b.nodes) >= half and skips
        scope = f"{'dec' if decoding else 'enc'}{stage}"
        act = batch * side * side * ch * 4.0
        mid = batch * side * side * (ch // 4) * 4.0
        if decoding:
            sx, sside, sch = skips.pop()
            side, ch = sside, sch
            act = batch * side * side * ch * 4.0
            up = b.op("ResizeBilinear", scope, [x], out_bytes=act)
            x = b.op("ConcatV2", scope, [up, sx], out_bytes=2 * act)
        blocks = int(b.rng.integers(2, 4))
        for k in range(blocks):
            if b.room() < 60:
                break
            s = f"{scope}/block{k}"
            h = x
            for j, (cin, cout, kk) in enumerate(((ch, ch // 4, 1), (ch // 4, ch // 4, 9), (ch // 4, ch, 1))):
                out = act if j == 2 else mid
                h = b.weighted("Conv2D", f"{s}/conv{j}", h, 2.0 * batch * side * side * cin * cout * kk, out,
                               cin * cout * kk * 4.0)
                h = b.chain(bn, f"{s}/bn{j}", h, out)
                if j < 2:
                    h = b.op("Relu", f"{s}/bn{j}", [h], out_bytes=out)
            x = b.op("AddV2", s, [x, h], out_bytes=act)
            x = b.op("Relu", s, [x], out_bytes=act)
        if not decoding:
            skips.append((x, side, ch))
            if side > 7:
                side, ch = side // 2, min(2 * ch, 2048)
                x = b.op("MaxPool", f"{scope}/pool", [x], out_bytes=batch * side * side * ch / 2 * 4.0)
        stage += 1
    b.tail(x)


def _transformer(b: _Builder, batch: int) -> None:
    seq, d, ffn, heads = 512, 1024, 4096, 16
    act = batch * seq * d * 4.0
    att = batch * heads * seq * seq * 4.0
    mm = 2.0 * batch * seq * d * d
    x = b.op("Placeholder", "input", [], out_bytes=batch * seq * 4.0)
    if b.room() < 95:   # no room for the embedding, the mask and one layer
        b.tail(x)
        return
    x = b.weighted("GatherV2", "embed", x, 0.0, act, 30000 * d * 4.0)
    mask = b.op("Placeholder", "mask", [], out_bytes=batch * seq * seq * 4.0)
    layer = 0

    def norm(scope: str, x: int) -> int:
        mean = b.op("Mean", scope, [x], out_bytes=batch * seq * 4.0)
        c = b.op("Sub", scope, [x, mean], out_bytes=act)
        v = b.op("Mean", scope, [b.op("Square", scope, [c], out_bytes=act)], out_bytes=batch * seq * 4.0)
        r = b.chain(("AddV2", "Rsqrt"), scope, v, batch * seq * 4.0)
        return b.chain(("Mul", "AddV2"), scope, b.op("Mul", scope, [c, r], out_bytes=act), act)

    while b.room() >= 90:
        s = f"layer{layer}"
        h = norm(f"{s}/ln1", x)
        qkv = []
        for name in ("q", "k", "v"):
            t = b.weighted("MatMul", f"{s}/attn/{name}", h, mm, act, d * d * 4.0)
            qkv.append(b.chain(("BiasAdd", "Reshape", "Transpose"), f"{s}/attn/{name}", t, act))
        sc = b.op("BatchMatMulV2", f"{s}/attn", qkv[:2], flops=2.0 * batch * seq * seq * d, out_bytes=att)
        sc = b.op("Mul", f"{s}/attn", [sc], out_bytes=att)
        sc = b.op("AddV2", f"{s}/attn", [sc, mask], out_bytes=att)
        mx = b.op("Max", f"{s}/softmax", [sc], out_bytes=att / seq)
        e = b.op("Exp", f"{s}/softmax", [b.op("Sub", f"{s}/softmax", [sc, mx], out_bytes=att)], out_bytes=att)
        p = b.op("RealDiv", f"{s}/softmax", [e, b.op("Sum", f"{s}/softmax", [e], out_bytes=att / seq)],
                 out_bytes=att)
        o = b.op("BatchMatMulV2", f"{s}/attn", [p, qkv[2]], flops=2.0 * batch * seq * seq * d, out_bytes=act)
        o = b.chain(("Transpose", "Reshape"), f"{s}/attn", o, act)
        o = b.chain(("BiasAdd",), f"{s}/attn/out", b.weighted("MatMul", f"{s}/attn/out", o, mm, act,
                                                              d * d * 4.0), act)
        x = b.op("AddV2", s, [x, o], out_bytes=act)
        h = norm(f"{s}/ln2", x)
        wide = act * ffn / d
        h = b.chain(("BiasAdd",), f"{s}/ffn", b.weighted("MatMul", f"{s}/ffn/in", h, mm * ffn / d, wide,
                                                         d * ffn * 4.0), wide)
        g = b.chain(("Pow", "Mul", "AddV2", "Mul", "Tanh", "AddV2"), f"{s}/gelu", h, wide)
        h = b.op("Mul", f"{s}/gelu", [b.op("Mul", f"{s}/gelu", [h], out_bytes=wide), g], out_bytes=wide)
        h = b.chain(("BiasAdd",), f"{s}/ffn", b.weighted("MatMul", f"{s}/ffn/out", h, mm * ffn / d, act,
                                                         d * ffn * 4.0), act)
        x = b.op("AddV2", s, [x, h], out_bytes=act)
        layer += 1
    b.tail(x)


#: The layers of the training graphs: ("conv", channels, kernel, stride), ("lrn",), ("pool",),
#: ("fc", units), ("drop",).
_NETS: dict[str, tuple[tuple[Any, ...], ...]] = {
    "alexnet": (("conv", 96, 11, 4), ("lrn",), ("pool",), ("conv", 256, 5, 1), ("lrn",), ("pool",),
                ("conv", 384, 3, 1), ("conv", 384, 3, 1), ("conv", 256, 3, 1), ("pool",),
                ("fc", 4096), ("drop",), ("fc", 4096), ("drop",), ("fc", 1000)),
    "vgg": (*(layer for ch, reps in ((64, 2), (128, 2), (256, 3), (512, 3), (512, 3))
              for layer in (*[("conv", ch, 3, 1)] * reps, ("pool",))),
            ("fc", 4096), ("drop",), ("fc", 4096), ("drop",), ("fc", 1000)),
}


def _training(b: _Builder, net: str, batch: int) -> None:
    """A data-flow training graph as TensorFlow writes it: the forward layers (variables read
    through ``Identity``, ``Conv2D``/``MatMul``, ``BiasAdd``, ``Relu``, ``LRN``, ``MaxPool``,
    dropout), the loss with L2 regularisation, the gradients (each reading the forward activations
    it needs, thousands of operators back, and grouped by ``NoOp``/``Identity`` tuples with control
    edges of size 0), momentum updates reading shared constants, and shape plumbing (``Shape``,
    ``Const``, ``StridedSlice``, ``Pack``) feeding the compute operators until the graph has
    exactly ``n`` operators. Most operators cost nothing or a few microseconds."""
    F, f4 = _FREE, 4.0

    def op(op_type: str, scope: str, preds: Sequence[int], **kw: Any) -> int:
        return b.op(op_type, scope, preds, free=F, **kw)

    x = op("Placeholder", "input", [], out_bytes=batch * 224 * 224 * 3 * f4)
    labels = op("Placeholder", "input", [], out_bytes=batch * f4)
    side, ch = 224, 3
    layers: list[dict[str, Any]] = []
    weights: list[int] = []   # variable reads, for the L2 loss
    for k, spec in enumerate(_NETS[net]):
        kind, s = spec[0], f"{net}/{spec[0]}{k}"
        rec: dict[str, Any] = {"kind": kind, "x": x, "scope": s, "first": k == 0}
        if kind == "conv":
            _, cout, kk, stride = spec
            side = max(1, side // stride)
            out = batch * side * side * cout * f4
            wb = kk * kk * ch * cout * f4
            w = op("VariableV2", s, [], out_bytes=wb, weight_bytes=wb)
            wr = op("Identity", s, [w], out_bytes=wb)
            bv = op("VariableV2", s, [], out_bytes=cout * f4, weight_bytes=cout * f4)
            br = op("Identity", s, [bv], out_bytes=cout * f4)
            flops = 2.0 * batch * side * side * kk * kk * ch * cout
            c = op("Conv2D", s, [x, wr], flops=flops, out_bytes=out)
            x = op("Relu", s, [op("BiasAdd", s, [c, br], out_bytes=out)], out_bytes=out)
            rec.update(w=w, wr=wr, b=bv, br=br, y=x, flops=flops, out=out, wb=wb, bb=cout * f4)
            weights.append(wr)
            ch = cout
        elif kind == "fc":
            units = spec[1]
            if rec["x"] is not None and len(layers) and layers[-1]["kind"] in ("pool", "conv", "lrn"):
                shp = op("Shape", s, [x], out_bytes=16.0)
                x = op("Reshape", s, [x, op("Pack", s, [shp, op("Const", s, [], out_bytes=4.0)], out_bytes=8.0)],
                       out_bytes=batch * side * side * ch * f4)
                rec.update(flat=x, flat_shape=shp)
                ch, side = side * side * ch, 1
            wb = ch * units * f4
            w = op("VariableV2", s, [], out_bytes=wb, weight_bytes=wb)
            wr = op("Identity", s, [w], out_bytes=wb)
            bv = op("VariableV2", s, [], out_bytes=units * f4, weight_bytes=units * f4)
            br = op("Identity", s, [bv], out_bytes=units * f4)
            flops = 2.0 * batch * ch * units
            out = batch * units * f4
            m = op("MatMul", s, [rec.get("flat", x), wr], flops=flops, out_bytes=out)
            x = op("BiasAdd", s, [m, br], out_bytes=out)
            last = k == len(_NETS[net]) - 1
            if not last:
                x = op("Relu", s, [x], out_bytes=out)
            rec.update(x=rec.get("flat", rec["x"]), w=w, wr=wr, b=bv, br=br, y=x, flops=flops, out=out, wb=wb,
                       bb=units * f4, last=last)
            weights.append(wr)
            ch = units
        elif kind in ("lrn", "pool"):
            if kind == "pool":
                side = max(1, side // 2)
            out = batch * side * side * ch * f4
            x = op("LRN" if kind == "lrn" else "MaxPool", s, [x], out_bytes=out)
            rec.update(y=x, out=out)
        else:   # dropout
            out = batch * ch * f4
            keep = op("Const", s, [], out_bytes=f4)
            rnd = op("RandomUniform", s, [op("Shape", s, [x], out_bytes=8.0)], out_bytes=out)
            mask = op("Floor", s, [op("AddV2", s, [rnd, keep], out_bytes=out)], out_bytes=out)
            x = op("Mul", s, [op("RealDiv", s, [x, keep], out_bytes=out), mask], out_bytes=out)
            rec.update(y=x, keep=keep, mask=mask, out=out)
        layers.append(rec)
    # the loss: a two-output op (the loss per example, and its gradient for the backward pass)
    s = f"{net}/loss"
    logits_bytes = batch * ch * f4
    xent = op("SparseSoftmaxCrossEntropyWithLogits", s, [x, labels], out_bytes=logits_bytes)
    per_ex = {xent: batch * f4}
    mean = op("Mean", s, [xent, op("Const", s, [], out_bytes=f4)], out_bytes=f4, tensors=per_ex)
    l2 = [op("L2Loss", f"{s}/l2", [w], out_bytes=f4) for w in weights]
    decay = op("Const", s, [], out_bytes=f4)
    reg = op("Mul", s, [op("AddN", s, l2, out_bytes=f4), decay], out_bytes=f4)
    total = op("AddV2", s, [mean, reg], out_bytes=f4)
    # gradients
    g = op("Fill", "gradients", [op("Shape", "gradients", [total], out_bytes=4.0),
                                 op("Const", "gradients", [], out_bytes=f4)], out_bytes=f4)
    greg = op("Mul", "gradients/reg", [g, decay], out_bytes=f4)
    gm = op("RealDiv", "gradients/mean", [op("Tile", "gradients/mean", [op("Reshape", "gradients/mean", [g],
                                                                          out_bytes=f4)], out_bytes=batch * f4),
                                          op("Cast", "gradients/mean", [op("Const", "gradients/mean", [],
                                                                              out_bytes=f4)], out_bytes=f4)],
            out_bytes=batch * f4)
    g = op("Mul", "gradients/xent", [op("ExpandDims", "gradients/xent", [gm], out_bytes=batch * f4), xent],
           out_bytes=logits_bytes)
    grads: list[tuple[int, int, float]] = []   # (variable, gradient, bytes)
    for rec in reversed(layers):
        kind, s = rec["kind"], f"gradients/{rec['scope']}"
        if kind in ("conv", "fc"):
            if not rec.get("last"):
                g = op("ReluGrad", s, [g, rec["y"]], out_bytes=rec["out"])
            bg = op("BiasAddGrad", s, [g], out_bytes=rec["bb"])
            x_in = rec["x"]
            if kind == "conv":
                shapes = op("ShapeN", s, [x_in, rec["wr"]], out_bytes=32.0)
                gw = op("Conv2DBackpropFilter", s, [x_in, shapes, g], flops=rec["flops"], out_bytes=rec["wb"])
                gx = None if rec["first"] else op("Conv2DBackpropInput", s, [shapes, rec["wr"], g],
                                                  flops=rec["flops"], out_bytes=b.out_bits[x_in] / 8)
            else:
                gw = op("MatMul", s, [x_in, g], flops=rec["flops"], out_bytes=rec["wb"])
                gx = op("MatMul", s, [g, rec["wr"]], flops=rec["flops"], out_bytes=b.out_bits[x_in] / 8)
            gw = op("AddN", s, [gw, op("Mul", f"{s}/l2", [rec["wr"], greg], out_bytes=rec["wb"])],
                    out_bytes=rec["wb"])
            deps = op("NoOp", s, [gw, bg] + ([gx] if gx is not None else []), out_bytes=0.0,
                      tensors={gw: 0.0, bg: 0.0, **({gx: 0.0} if gx is not None else {})})
            grads.append((rec["w"], op("Identity", s, [gw, deps], out_bytes=rec["wb"], tensors={deps: 0.0}),
                          rec["wb"]))
            grads.append((rec["b"], op("Identity", s, [bg, deps], out_bytes=rec["bb"], tensors={deps: 0.0}),
                          rec["bb"]))
            if gx is None:
                break
            g = op("Identity", s, [gx, deps], out_bytes=b.out_bits[gx] / 8, tensors={deps: 0.0})
            if "flat_shape" in rec:
                g = op("Reshape", s, [g, rec["flat_shape"]], out_bytes=b.out_bits[g] / 8)
        elif kind == "pool":
            g = op("MaxPoolGrad", s, [rec["x"], rec["y"], g], out_bytes=b.out_bits[rec["x"]] / 8)
        elif kind == "lrn":
            g = op("LRNGrad", s, [g, rec["x"], rec["y"]], out_bytes=b.out_bits[rec["x"]] / 8)
        else:
            g = op("RealDiv", s, [op("Mul", s, [g, rec["mask"]], out_bytes=rec["out"]), rec["keep"]],
                   out_bytes=rec["out"])
    # momentum updates, reading two constants shared by all of them
    lr = op("Const", "train", [], out_bytes=f4)
    momentum = op("Const", "train", [], out_bytes=f4)
    updates = []
    for var, grad, nbytes in grads:
        acc = op("VariableV2", "train", [], out_bytes=nbytes, weight_bytes=nbytes)
        updates.append(op("ApplyMomentum", "train", [var, acc, lr, grad, momentum], out_bytes=nbytes,
                          moved=4 * nbytes))
    op("NoOp", "train", updates, out_bytes=0.0, tensors=dict.fromkeys(updates, 0.0))
    if b.room() < 0:
        raise InvalidArgumentError(f"n: the {net} training graph needs at least {len(b.nodes)} operators, "
                                   f"got {b.n}")
    # shape plumbing until the graph has n operators: Shape(an input of op) -> StridedSlice ->
    # Pack(.., Const) -> op, for the costly operators in turn
    first_input: dict[str, str] = {}
    for ln in b.links:
        first_input.setdefault(ln["target"], ln["source"])
    index = {nd["id"]: i for i, nd in enumerate(b.nodes)}
    costly = [i for i, nd in enumerate(b.nodes) if nd["op_type"] not in F and nd["id"] in first_input
              and next(iter(nd["comp_cost"].values()), 0.0) > 20.0]
    k = 0
    while b.room() > 0:
        v = costly[k % len(costly)]
        s = f"plumbing/{k}"
        if b.room() >= 4:
            shp = b.op("Shape", s, [index[first_input[b.nodes[v]["id"]]]], out_bytes=16.0, free=F)
            sl = b.op("StridedSlice", s, [shp], out_bytes=4.0, free=F)
            pk = b.op("Pack", s, [sl, b.op("Const", s, [], out_bytes=4.0, free=F)], out_bytes=8.0, free=F)
        else:
            pk = b.op("Const", s, [], out_bytes=4.0, free=F)
        b.links.append({"source": b.nodes[pk]["id"], "target": b.nodes[v]["id"], "tensor_size_in_bit": b.out_bits[pk]})
        k += 1


def synthetic_operator_graph(n: int, shape: str = "cnn", *, seed: int = 0, devices: int = 8,
                             batch: int | None = None) -> dict[str, Any]:
    """A synthetic operator graph of exactly ``n`` operators as node-link data (see the module
    docs; read it with :func:`~stagecut.latency.quickp.opgraph.operator_graph_from_data`).

    Parameters
    ----------
    n : int
        Operators (at least 2; whole blocks while they fit, then a chain of small operators; a
        training graph needs its layers, loss, gradients and updates: 233 for ``"alexnet"``,
        417 for ``"vgg"``, the rest is shape plumbing).
    shape : {"cnn", "transformer", "alexnet", "vgg"}
    seed : int
        Seeds the times' noise and the CNN's blocks per stage.
    devices : int
        Identical GPUs ``GPU:0``... in each ``comp_cost``.
    batch : int, optional
        Batch size (default 32 for the CNN and VGG, 8 for the transformer, 128 for AlexNet).

    Returns
    -------
    dict
        ``{"directed": true, "nodes": [...], "links": [...], "graph": {...}}``.

    Raises
    ------
    InvalidArgumentError
        An unknown shape, ``n`` < 2 (or below a training graph's size), a bad seed, device
        count or batch.
    """
    n = check_int(n, "n", minimum=2, error=InvalidArgumentError)
    seed = check_int(seed, "seed", minimum=0, error=InvalidArgumentError)
    devices = check_int(devices, "devices", minimum=1, error=InvalidArgumentError)
    if shape not in SHAPES:
        raise InvalidArgumentError(f"shape: expected one of {', '.join(SHAPES)}, got {shown(shape)}")
    default = {"cnn": 32, "transformer": 8, "alexnet": 128, "vgg": 32}[shape]
    bs = check_int(batch if batch is not None else default, "batch", minimum=1,
                   error=InvalidArgumentError)
    b = _Builder(n, seed, devices)
    if shape in _NETS:
        _training(b, shape, bs)
    else:
        (_cnn if shape == "cnn" else _transformer)(b, bs)
    return b.data(shape, seed)
