"""The ONNX export: one sequence ``x`` (n × d, n a dynamic axis) → ``y`` (n × d), block = SA ∘ FF exactly as
the model format defines it (docs/export.md), in float32 or float64, with the parameters of
``tfcert.export.parameters`` (rounded once from the exact rationals) as initializers named like the torch
module's state_dict keys.

    FF(x)   = η x + W relu(U x + b)                      Gemm(x, U, b, transB) → Relu → Gemm(·, W, transB)
    SA(x)_i = ρ x_i + V m_i,  s_il = ⟨A x_i, x_l⟩         A x = scale·x + (x A_vᵀ) A_u, then Gemm(A x, x, transB)
    hardmax m_i = (Σ_{l: s_il = max_l s_il} x_l) / |{…}|  Equal(s, ReduceMax(s)) → Cast → MatMul / ReduceSum
    softmax m_i = Σ_l softmax(s_i / τ)_l x_l              Div(s, τ) → Softmax → MatMul

Needs the ``onnx`` package (to build the graph); ``onnxruntime`` runs it. Opset and IR version are fixed,
so the bytes depend only on the model and the dtype.
"""
from __future__ import annotations

import numpy as np

from tfcert.errors import InputError

FORMAT = "tfcert.onnx/1"
OPSET = 17
IR_VERSION = 8
DTYPES = ("float64", "float32")
NEED_ONNX = "ONNX export needs onnx: pip install onnx onnxruntime (in a tfcert checkout: pip install '.[onnx]')"


def _onnx():
    try:
        import onnx
    except ImportError:
        raise InputError(NEED_ONNX) from None
    return onnx


class _Graph:
    """Nodes and initializers, appended in order; every node's output is named after the node."""

    def __init__(self, onnx, dtype: str):
        self.onnx, self.np = onnx, {"float64": np.float64, "float32": np.float32}[dtype]
        self.nodes, self.initializers = [], []

    def const(self, name: str, array, np_dtype=None) -> str:
        array = np.asarray(array, dtype=np_dtype or self.np)  # exact: the values are numbers of the dtype
        self.initializers.append(self.onnx.numpy_helper.from_array(array, name))
        return name

    def op(self, kind: str, inputs: list[str], out: str, **attrs) -> str:
        self.nodes.append(self.onnx.helper.make_node(kind, inputs, [out], name=out, **attrs))
        return out

    def low_rank(self, p: str, x: str, scale: np.ndarray, u: np.ndarray, v: np.ndarray) -> str:
        """(scale·I + Σ u_k v_kᵀ) applied to every row of x: scale·x + (x vᵀ) u."""
        out = self.op("Mul", [x, self.const(p + "_scale", scale)], p + ".scaled")
        if u.shape[0]:
            xv = self.op("Gemm", [x, self.const(p + "_v", v)], p + ".xv", transB=1)
            xvu = self.op("MatMul", [xv, self.const(p + "_u", u)], p + ".xvu")
            out = self.op("Add", [out, xvu], p + ".out")
        return out


def _block(g: _Graph, k: int, x: str, t: dict, attention: str, tau: str | None) -> str:
    p = f"blocks.{k}."
    ex = g.op("Mul", [x, g.const(p + "ff.eta", t["ff.eta"])], p + "ff.eta_x")
    if t["ff.U"].shape[0]:
        pre = g.op("Gemm", [x, g.const(p + "ff.U", t["ff.U"]), g.const(p + "ff.b", t["ff.b"])], p + "ff.pre",
                   transB=1)
        relu = g.op("Relu", [pre], p + "ff.relu")
        out = g.op("Gemm", [relu, g.const(p + "ff.W", t["ff.W"])], p + "ff.W_relu", transB=1)
        x = g.op("Add", [ex, out], p + "ff.out")
    else:
        x = ex
    ax = g.low_rank(p + "sa.A", x, t["sa.A_scale"], t["sa.A_u"], t["sa.A_v"])
    s = g.op("Gemm", [ax, x], p + "sa.scores", transB=1)  # s[i, l] = ⟨A x_i, x_l⟩
    if attention == "hardmax":
        top = g.op("ReduceMax", [s], p + "sa.max", axes=[1], keepdims=1)
        chosen = g.op("Cast", [g.op("Equal", [s, top], p + "sa.argmax")], p + "sa.chosen",
                      to=g.onnx.helper.np_dtype_to_tensor_dtype(np.dtype(g.np)))
        total = g.op("MatMul", [chosen, x], p + "sa.sum")
        count = g.op("ReduceSum", [chosen, g.const(p + "sa.axis", [1], np.int64)], p + "sa.count", keepdims=1)
        mixed = g.op("Div", [total, count], p + "sa.mean")
    else:
        weights = g.op("Softmax", [g.op("Div", [s, tau], p + "sa.scaled")], p + "sa.weights", axis=1)
        mixed = g.op("MatMul", [weights, x], p + "sa.mixed")
    rx = g.op("Mul", [x, g.const(p + "sa.rho", t["sa.rho"])], p + "sa.rho_x")
    vm = g.low_rank(p + "sa.V", mixed, t["sa.V_scale"], t["sa.V_u"], t["sa.V_v"])
    return g.op("Add", [rx, vm], p + "sa.out")


def to_onnx(model, dtype: str = "float64", name: str = "model", sha256: str | None = None) -> bytes:
    """The serialized ONNX model of ``model`` (a Model or a model.json path) in ``dtype`` (float64 / float32):
    input ``x`` [n, d], output ``y`` [n, d]; ``metadata_props`` hold the export file's ``__metadata__``
    (format ``tfcert.onnx/1``, the exact temperature, the model's sha256)."""
    onnx = _onnx()
    from tfcert.export import parameters

    if dtype not in DTYPES:
        raise InputError(f"--dtype: ONNX export offers float64 or float32, got {dtype!r}")
    blocks, temperature, meta = parameters(model, dtype, name, sha256)
    meta = dict(meta, format=FORMAT)
    d, elem = int(meta["d"]), onnx.helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    g = _Graph(onnx, dtype)
    tau = g.const("temperature", temperature) if temperature is not None else None
    x = "x"
    for k, t in enumerate(blocks):
        x = _block(g, k, x, t, meta["attention"], tau)
    g.op("Identity", [x], "y")
    graph = onnx.helper.make_graph(g.nodes, "tfcert", [onnx.helper.make_tensor_value_info("x", elem, ["n", d])],
                                   [onnx.helper.make_tensor_value_info("y", elem, ["n", d])], g.initializers)
    proto = onnx.helper.make_model(graph, producer_name="tfcert", ir_version=IR_VERSION,
                                   opset_imports=[onnx.helper.make_opsetid("", OPSET)])
    onnx.helper.set_model_props(proto, meta)
    return proto.SerializeToString()


def run_session(session, sequence) -> list[list[float]]:
    """One sequence of exact numbers through an onnxruntime session of an export: the inputs rounded once
    to the session's dtype (``tfcert.export.rounded_array``), the output rows as Python floats."""
    from tfcert.export import rounded_array

    dtype = {"tensor(double)": "float64", "tensor(float)": "float32"}[session.get_inputs()[0].type]
    x = rounded_array(sequence, dtype).astype(dtype)
    (y,) = session.run(["y"], {"x": x})
    return y.astype(np.float64).tolist()
