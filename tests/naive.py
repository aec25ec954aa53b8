"""An independent dense forward pass for the tests: every layer on every
token with FLINT rational matrices, straight from the model JSON, sharing no
code with tfcert's replay."""
from __future__ import annotations

from fractions import Fraction

from flint import fmpq, fmpq_mat


def q(s) -> fmpq:
    f = Fraction(str(s))
    return fmpq(f.numerator, f.denominator)


def dense(low_rank: dict, d: int) -> fmpq_mat:
    m = fmpq_mat(d, d)
    for i in range(d):
        m[i, i] = q(low_rank["scale"])
    for term in low_rank["low_rank"]:
        for i in range(d):
            for k in range(d):
                m[i, k] += q(term["u"][i]) * q(term["v"][k])
    return m


def forward(model: dict, inputs: list[list[list]]) -> list[set[tuple]]:
    """Hardmax forward pass of ``model`` (parsed JSON) on each input sequence."""
    d = model["d"]
    seqs = [fmpq_mat([[q(v) for v in t] for t in X]) for X in inputs]
    for block in model["blocks"]:
        ff, sa = block["ff"], block["sa"]
        width = len(ff["U"])
        if width:
            U = fmpq_mat([[q(v) for v in row] for row in ff["U"]])
            W = fmpq_mat([[q(v) for v in row] for row in ff["W"]])
            b = [q(v) for v in ff["b"]]
        for j, X in enumerate(seqs):
            out = X * q(ff["eta"])
            if width:
                H = X * U.transpose()
                for r in range(H.nrows()):
                    for c in range(width):
                        H[r, c] = max(H[r, c] + b[c], fmpq(0))
                out = out + H * W.transpose()
            seqs[j] = out
        A, V, rho = dense(sa["A"], d), dense(sa["V"], d), q(sa["rho"])
        for j, X in enumerate(seqs):
            n = X.nrows()
            S = X * A.transpose() * X.transpose()  # S[i, l] = <A x_i, x_l>
            P = fmpq_mat(n, n)  # hardmax attention: uniform on each row's argmax set
            for i in range(n):
                row = [S[i, l] for l in range(n)]
                arg = [l for l in range(n) if row[l] == max(row)]
                for l in arg:
                    P[i, l] = fmpq(1, len(arg))
            new = X * rho + P * X * V.transpose()
            seqs[j] = new
    return [{tuple(X[i, k] for k in range(d)) for i in range(X.nrows())} for X in seqs]
