"""τ*: the largest temperature at which every collapse output stays within
the snap radius r, found by bisection on certified (arb) checks of the noise
bound max_i B_i(τ) ≤ r and stated as an exact dyadic rational; beside it the
closed form min_i Δ_i / ln((n_j−1)·D_i/r) (docs/softmax.md)."""
from __future__ import annotations

from flint import ctx, fmpq

from tfcert.construct.phase import Phase
from tfcert.construct.snap import noise_radius, top_target
from tfcert.verify.claims.tau_star import RESOLUTION, closed_form_ok, constrained, max_bound
from tfcert.verify.enclose import PREC, Noise, ball, bounds, rank_one
from tfcert.verify.layers import scored
from tfcert.verify.formats import SA, Dataset
from tfcert.verify.numbers import ONE, ZERO, Vec, dot

BITS = 20  # bisection steps below the bracketing power of two: step = τ*/2^20 or less
REASON = ("each term exp(-gap/tau)*spread of a token's noise bound increases with tau, so the enclosures "
          "mu +/- bound(tau_star) that the replay uses contain the collapse output at every 0 < tau <= tau_star; "
          "no other attention layer depends on tau, so the final exact claim holds on the whole range")


def collapse_noise(sa: SA, seqs: list[list[Vec]]) -> tuple[tuple[Noise, ...], ...]:
    """Every token's noise terms at the collapse layer (inputs exact), as
    the replay works them out (one per distinct query)."""
    _, v = rank_one(sa.V)
    return tuple(tuple(nz for _, nz, _ in scored(sa.A, X, [dot(v, x) for x in X])[2]) for X in seqs)


def rounded(x: fmpq, bits: int, up: bool) -> fmpq:
    """x > 0 rounded to a dyadic with about ``bits`` significant bits."""
    shift = bits - (int(x.p).bit_length() - int(x.q).bit_length())
    num, den = int(x.p) * 2 ** max(shift, 0), int(x.q) * 2 ** max(-shift, 0)
    k = -(-num // den) if up else num // den
    return fmpq(k, 2 ** shift) if shift >= 0 else fmpq(k * 2 ** -shift)


def bracket(ok, reach: int = 1 << 24) -> fmpq:
    """A power of two 2^e with ok(2^e) and not ok(2^(e+1)), for ``ok`` true
    below a threshold: the exponent is found by doubling steps, then by
    bisection, so a threshold near 2^±100000 (coordinates near 1e4000) takes
    about 2·17 tests."""
    def at(e: int) -> bool:
        return ok(fmpq(2) ** e)

    lo, hi, stride = (0, None, 1) if at(0) else (None, 0, 1)
    while lo is None or hi is None:
        if stride > reach:
            raise AssertionError("no bracketing power of two for tau_star")  # a construction bug
        e = (lo + stride) if hi is None else (hi - stride)
        if at(e):
            lo = e
        else:
            hi = e
        stride *= 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if at(mid) else (lo, mid)
    return fmpq(2) ** lo


def bisect(noises, radius: fmpq) -> tuple[fmpq, fmpq]:
    """(τ*, step): B(τ*) ≤ r certified and B(τ* + step) > r certified."""
    def ok(tau: fmpq) -> bool:
        return max_bound(noises, tau, 1) <= radius

    lo = bracket(ok)
    hi = 2 * lo
    for _ in range(BITS):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if ok(mid) else (lo, mid)
    step = hi - lo
    while not max_bound(noises, lo + step, 0) > radius:
        step *= 2
        if step > lo / RESOLUTION:
            raise AssertionError("tau_star threshold not certified")  # a construction bug
    return lo, step


def closed_form(tokens: list[tuple[fmpq, fmpq]], radius: fmpq) -> fmpq | None:
    """min_i Δ_i / ln(scaled_i / r), rounded down to a certified dyadic."""
    if not tokens:
        return None
    with ctx.workprec(PREC):
        value = min(bounds(ball(gap) / (ball(scaled) / ball(radius)).log())[0] for gap, scaled in tokens)
    tau = rounded(value, 24, up=False)
    while not closed_form_ok(tokens, tau, radius):
        tau /= 2
    return tau


def tau_star_claim(dataset: Dataset, lead: Phase, share: int = 0) -> tuple[fmpq, dict]:
    """τ* and the certificate's tau_star claim for the collapse, the SA of
    the leader phase's last block, on the leaders' tokens. The noise may use
    the radius left around the codes divided by 2^share: a lower τ*, whose
    exact noise leaves the rest of the snaps' plateaus to a float run's error
    (bundle.build asks for it where a float analysis stops at or after the collapse)."""
    block = lead.span[1] - 1
    radius = noise_radius(lead.leaders, dataset.d, top_target(dataset)) / 2 ** share
    noises = collapse_noise(lead.blocks[-1].sa, lead.tokens)
    if not any(n.terms for row in noises for n in row):
        tau, step = ONE, None  # no token has noise: every temperature works
    else:
        tau, step = bisect(noises, radius)
    worst = max_bound(noises, tau, 1)
    stated = min(rounded(worst, 32, up=True), radius) if worst > 0 else ZERO
    cf = closed_form(constrained(noises, [len(p.input) for p in dataset.pairs], radius), radius)
    return tau, {"kind": "tau_star", "block": block, "tau_star": str(tau), "radius": str(radius),
                 "noise_bound": str(stated), "step": None if step is None else str(step),
                 "closed_form": None if cf is None else str(cf), "reason": REASON}
