"""An exact emulation of a hardmax (or softmax) model's float run that, unlike
tests/floatemu.py, covers every form docs/float.md ("The float run it speaks
about") allows: each sum evaluated along a random binary tree (any order, any
association), each addition of a product fused (FMA) or not at random; the
scores in the dense form (Â x̂_i first or Âᵀ x̂_l first, Â's entries computed in
floats), the low-rank vector forms (either side) and the low-rank bilinear
form; a hardmax tie averaged as Σ fl(1/n)·x_l, (Σ x_l)/n or (Σ x_l)·fl(1/n);
softmax normalised before or after the weighted sum, by dividing by Σ ê or
multiplying by fl(1/Σ ê), each ê anywhere within its 2 ulps (``exp_within``);
V m dense (entries computed in floats) or low-rank. Every operation is
tfcert.verify.floats.round_nearest of the exact rational result (ties to even,
gradual underflow). Used by the red team's tests of the exact evaluation lemma
(tests/test_exact_attack.py)."""
from __future__ import annotations

import random
from contextlib import contextmanager

from flint import arb, ctx, fmpq

from tfcert.verify.enclose import coordinate_range
from tfcert.verify.floats import FORMATS, grain, round_nearest
from tfcert.verify.formats import LowRank, Model

SCORE_FORMS = ("dense", "dense_t", "vector", "vector_t", "bilinear")
TIE_FORMS = ("scaled", "divided", "reciprocal")  # Σ fl(1/n)·x_l, (Σ x_l)/n, (Σ x_l)·fl(1/n)
V_FORMS = ("dense", "low_rank")
# softmax: p_l = ê_l/Ŝ or ê_l·fl(1/Ŝ) before the weighted sum, or (Σ ê_l y_l)/Ŝ or (Σ ê_l y_l)·fl(1/Ŝ) after it
NORM_FORMS = ("divided", "reciprocal", "divided_after", "reciprocal_after")
PUSHES = (1, -1, 0)  # exp at the top of its 2 ulps, at the bottom, correctly rounded


class Run:
    """One float run: ``mode`` "forward", "reverse" (chains, no FMA), "fma" (a forward FMA
    chain) or "random" (a random tree, FMA at random, forms at random per call); "wide", each
    sum accumulated in binary32 and rounded once, is outside the float model (not in MODES).
    ``skew`` ±1: every softmax pushes exp up (down, for −1) for the tokens above the mean of the
    coordinate that varies most across them and the other way below it — about the pattern of
    pushes that moves a weighted mean farthest, which pushes at random almost never hit."""

    def __init__(self, fmt: str, mode: str = "random", seed: int = 0, score_form: str | None = None,
                 v_form: str | None = None, norm_form: str | None = None, push: int | None = None,
                 skew: int = 0):
        self.fmt, self.mode, self.rng = FORMATS[fmt], mode, random.Random(seed)
        self.score_form, self.v_form, self.norm_form, self.push = score_form, v_form, norm_form, push
        self.skew = skew

    def r(self, q: fmpq) -> fmpq:
        return round_nearest(q, self.fmt)

    def sum(self, terms: list) -> fmpq:
        """Σ of terms: ("p", a, b) a product of two format numbers, ("v", a) a format number."""
        if not terms:
            return fmpq(0)
        terms = list(terms)
        if self.mode == "wide":  # torch's float16 and bfloat16 matmul: a binary32 accumulator, rounded once
            acc, wide = fmpq(0), FORMATS["binary32"]
            for t in terms:  # each product of two narrow numbers is exact in binary32
                acc = round_nearest(acc + (t[1] * t[2] if t[0] == "p" else t[1]), wide)
            return self.r(acc)
        if self.mode in ("forward", "reverse", "fma"):
            if self.mode == "reverse":
                terms.reverse()
            acc = None
            for t in terms:
                if acc is None:
                    acc = self.r(t[1] * t[2]) if t[0] == "p" else t[1]
                elif t[0] == "p" and self.mode == "fma":
                    acc = self.r(t[1] * t[2] + acc)
                else:
                    acc = self.r((self.r(t[1] * t[2]) if t[0] == "p" else t[1]) + acc)
            return acc
        items = terms
        rng = self.rng
        while len(items) > 1:
            i, j = rng.sample(range(len(items)), 2)
            a, b = items[i], items[j]
            for k in sorted((i, j), reverse=True):
                items.pop(k)
            if a[0] == "p" and rng.random() < 0.5:  # fused: fl(a₁a₂ + b̂), b a number or a rounded product
                new = self.r(a[1] * a[2] + (self.r(b[1] * b[2]) if b[0] == "p" else b[1]))
            elif b[0] == "p" and rng.random() < 0.5:
                new = self.r(b[1] * b[2] + (self.r(a[1] * a[2]) if a[0] == "p" else a[1]))
            else:
                va = self.r(a[1] * a[2]) if a[0] == "p" else a[1]
                vb = self.r(b[1] * b[2]) if b[0] == "p" else b[1]
                new = self.r(va + vb)
            items.append(("v", new))
        t = items[0]
        return self.r(t[1] * t[2]) if t[0] == "p" else t[1]

    def dot(self, a, b) -> fmpq:
        return self.sum([("p", x, y) for x, y in zip(a, b)])

    def exp(self, x: fmpq, push: int | None = None) -> fmpq:
        """exp(x) anywhere docs/float.md allows: ``push``, the run's, or a random one in random mode."""
        if push is None:
            push = self.push if self.push is not None else self.rng.choice(PUSHES) if self.mode == "random" else 0
        return exp_within(x, self.fmt, push)

    def exps(self, z: list[fmpq], seq) -> list[fmpq]:
        """A softmax's exponentials, of the scores z over the tokens seq (see ``skew``)."""
        if not self.skew:
            return [self.exp(self.r(v - max(z))) for v in z]
        j = max(range(len(seq[0])), key=lambda j: max(y[j] for y in seq) - min(y[j] for y in seq))
        mean = sum(y[j] for y in seq) / len(seq)
        return [EXTREME(self.r(v - max(z)), self.fmt, self.skew * ((y[j] > mean) - (y[j] < mean)))
                for v, y in zip(z, seq)]

    def pick(self, forms, fixed):
        return fixed if fixed is not None else (self.rng.choice(forms) if self.mode == "random" else forms[0])


def spacing(x: fmpq, fmt) -> fmpq:
    """The spacing of the format's numbers in [2^e, 2^(e+1)) ∋ x (x > 0), or tiny below the normal range."""
    return fmpq(2) ** grain(x, fmt)


def exp_within(t: fmpq, fmt, push: int) -> fmpq:
    """exp(t) correctly rounded (push 0), or the farthest number of the format
    within its 2 ulps above (push > 0) or below (push < 0): relative 4u, and 2
    subnormal spacings below the normal range."""
    with ctx.workprec(300):
        man, ex = arb(t).exp().mid().man_exp()  # within 2^-290 relative of e^t: exact enough
    E = fmpq(int(man)) * (fmpq(2) ** int(ex) if ex >= 0 else fmpq(1, 2 ** int(-ex)))
    if push == 0:
        return round_nearest(E, fmt)
    below_normal = E < fmt.normal
    if push > 0:
        target = E + 2 * fmt.tiny if below_normal else E * (1 + 4 * fmt.unit)
        x = round_nearest(target, fmt)
        return x if x <= target else x - spacing(x - fmt.tiny / 2, fmt)
    target = max(E - 2 * fmt.tiny, fmpq(0)) if below_normal else E * (1 - 4 * fmt.unit)
    x = round_nearest(target, fmt)
    return x if x >= target else x + spacing(x, fmt)



EXTREME = exp_within  # the skewed runs' exp, at the ends of its 2 ulps even where exp_anywhere is patched in


def exp_anywhere(rng: random.Random):
    """An exp_within whose pushes pick any number of the format within exp's 4u, the interior ones
    too (exp_within pushes to the ends), at random: patch it in for exp_within. A lone softmax
    token's worst run may need one of exp(0)'s seven values (1 − 3u, say) with one normalisation."""
    within = exp_within  # the one this replaces

    def pick(t: fmpq, fmt, push: int) -> fmpq:
        if push == 0:
            return within(t, fmt, 0)
        values, x = [], within(t, fmt, -1)
        while x <= within(t, fmt, 1):
            values.append(x)
            x += spacing(x, fmt) if x > 0 else fmt.tiny
        return rng.choice(values)
    return pick


def _rounded(m: LowRank, run: Run):
    return run.r(m.scale), [([run.r(v) for v in u], [run.r(v) for v in w]) for u, w in m.terms]


def _dense(m, d: int, run: Run) -> list[list[fmpq]]:
    s, terms = m
    return [[run.sum(([("p", s, fmpq(1))] if a == b else []) + [("p", u[a], v[b]) for u, v in terms])
             for b in range(d)] for a in range(d)]


def scores(m, x, ys, run: Run) -> list[fmpq]:
    s, terms = m
    d = len(x)
    form = run.pick(SCORE_FORMS, run.score_form)
    out = []
    if form in ("dense", "dense_t"):
        A = _dense(m, d, run)
        if form == "dense":
            ax = [run.dot(A[a], x) for a in range(d)]
            return [run.dot(ax, y) for y in ys]
        for y in ys:
            aty = [run.dot([A[a][b] for a in range(d)], y) for b in range(d)]
            out.append(run.dot(aty, x))
        return out
    if form == "vector":
        coeffs = [run.dot(v, x) for _, v in terms]
        vec = [run.sum([("p", s, x[a])] + [("p", u[a], c) for (u, _), c in zip(terms, coeffs)]) for a in range(d)]
        return [run.dot(vec, y) for y in ys]
    if form == "vector_t":
        for y in ys:
            coeffs = [run.dot(u, y) for u, _ in terms]
            vec = [run.sum([("p", s, y[b])] + [("p", v[b], c) for (_, v), c in zip(terms, coeffs)]) for b in range(d)]
            out.append(run.dot(vec, x))
        return out
    cx = [run.dot(v, x) for _, v in terms]
    for y in ys:
        cy = [run.dot(u, y) for u, _ in terms]
        out.append(run.sum([("p", s, run.dot(x, y))] + [("p", a, b) for a, b in zip(cx, cy)]))
    return out


def apply(m, x, run: Run) -> list[fmpq]:
    s, terms = m
    d = len(x)
    if run.pick(V_FORMS, run.v_form) == "dense":
        V = _dense(m, d, run)
        return [run.dot(V[c], x) for c in range(d)]
    coeffs = [run.dot(v, x) for _, v in terms]
    return [run.sum([("p", s, x[c])] + [("p", u[c], k) for (u, _), k in zip(terms, coeffs)]) for c in range(d)]


class ResidualOverflow(OverflowError):
    """A sum written into the residual stream overflowed: the coordinate is ±inf, and every later
    layer keeps it infinite or NaN (it adds the coordinate times η or ρ: inf·0 is NaN, and only a
    ReLU or a comparison could drop it), so the run's output is not finite — a miss. An overflow
    elsewhere (a pre-activation, a score) raises a plain OverflowError: a ReLU may make it 0."""


@contextmanager
def _residual():
    try:
        yield
    except OverflowError as e:
        raise ResidualOverflow(str(e)) from e


def forward(model: Model, sequences, run: Run) -> list:
    one = fmpq(1)
    seqs = [[[run.r(v) for v in x] for x in seq] for seq in sequences]
    tau = run.r(model.temperature) if model.temperature is not None else None
    for block in model.blocks:
        ff, sa = block.ff, block.sa
        eta, b = run.r(ff.eta), [run.r(v) for v in ff.b]
        U = [[run.r(v) for v in row] for row in ff.U]
        W = [[run.r(v) for v in row] for row in ff.W]
        new = []
        for seq in seqs:
            out = []
            for x in seq:
                h = []
                for row, bk in zip(U, b):
                    z = run.sum([("p", a, c) for a, c in zip(row, x)] + [("v", bk) if run.rng.random() < 0.5
                                                                         else ("p", bk, one)])
                    h.append(z if z > 0 else fmpq(0))
                with _residual():
                    out.append([run.sum([("p", eta, x[i])] + [("p", w, hk) for w, hk in zip(W[i], h)])
                                for i in range(len(x))])
            new.append(out)
        seqs = new
        if sa.rho == 1 and sa.V.scale == 0 and not any(any(u) and any(v) for u, v in sa.V.terms):
            continue
        rho, A, V = run.r(sa.rho), _rounded(sa.A, run), _rounded(sa.V, run)
        new = []
        for seq in seqs:
            out = []
            for x in seq:
                s = scores(A, x, seq, run)
                if model.attention == "hardmax":
                    top = [l for l, v in enumerate(s) if v == max(s)]
                    if len(top) == 1:
                        m = list(seq[top[0]])
                    else:
                        k, form = run.r(fmpq(1, len(top))), run.pick(TIE_FORMS, None)
                        total = [run.sum([("v", seq[l][j]) for l in top]) for j in range(len(x))]
                        m = ([run.sum([("p", k, seq[l][j]) for l in top]) for j in range(len(x))] if form == "scaled"
                             else [run.r(t / len(top)) for t in total] if form == "divided"
                             else [run.r(t * k) for t in total])
                else:
                    z = [run.r(v / tau) for v in s]
                    e = run.exps(z, seq)
                    total = run.sum([("v", v) for v in e])
                    form = run.pick(NORM_FORMS, run.norm_form)
                    k = run.r(1 / total)
                    if form in ("divided", "reciprocal"):
                        p = [run.r(v / total) if form == "divided" else run.r(v * k) for v in e]
                        m = [run.dot(p, [y[j] for y in seq]) for j in range(len(x))]
                    else:
                        m = [run.dot(e, [y[j] for y in seq]) for j in range(len(x))]
                        m = [run.r(v / total) if form == "divided_after" else run.r(v * k) for v in m]
                vm = apply(V, m, run)
                with _residual():
                    out.append([run.sum([("p", rho, x[j]), ("v", vm[j])]) for j in range(len(x))])
            new.append(out)
        seqs = new
    return seqs


MODES = ("forward", "reverse", "fma", "random")


def configs(runs: int, skewed: bool = False) -> list[tuple]:
    """The attack's runs, in order: the fixed modes (every score and V form each; softmax: each
    normalisation with exp pushed up, down or not, shifted from mode to mode), where ``skewed``
    the skewed ones (Run.skew, each normalisation: for softmax), then ``runs`` random ones
    (attack_runs makes each a Run)."""
    fixed = [(m, sf, vf, NORM_FORMS[(k + i) % 4], PUSHES[(k + 2 * i) % 3])
             for i, m in enumerate(("forward", "reverse", "fma"))
             for k, (sf, vf) in enumerate(zip(SCORE_FORMS, V_FORMS * 3))]
    skews = [("forward", "dense", "dense", form, None, skew) for skew in (1, -1) for form in NORM_FORMS] * skewed
    return fixed + skews + [("random", None, None, None, None)] * runs


def deviation(got, exact) -> fmpq:
    """The largest max-coordinate deviation of a run's final tokens from ``exact``; for an
    enclosure (softmax), the distance from its coordinate range, which the deviation from the
    point inside it is at least."""
    seen = fmpq(0)
    for gs, ws in zip(got, exact):
        for gt, wt in zip(gs, ws):
            for j, g in enumerate(gt):
                lo, hi = coordinate_range(wt, j)
                seen = max(seen, lo - g, g - hi)
    return seen


def attack_runs(fmt: str, runs: int, seed: int, skewed: bool = False):
    """(n, mode, Run) for each of ``configs(runs, skewed)``, run n seeded seed * 1000 + n."""
    for n, (mode, *forms) in enumerate(configs(runs, skewed)):
        yield n, mode, Run(fmt, mode, seed * 1000 + n, *forms)


def worst(model: Model, sequences, exact, fmt: str, runs: int = 4, seed: int = 0) -> fmpq:
    """The largest deviation (``deviation``) over the attack's runs (``attack_runs``)."""
    return max(deviation(forward(model, sequences, run), exact) for _, _, run in attack_runs(fmt, runs, seed))
