"""tau_star: the softmax model interpolates exactly at every 0 < τ ≤ τ*.

Block k's attention (scores from exact points, V = u vᵀ) is the model's only
temperature-dependent layer: every other attention layer has A = 0 (an exact
mean at every τ) or is the identity. Token i's attention output is
ρx_i + t_i·u with |t_i − μ_S| ≤ B_i(τ) = Σ_{l∉S} exp(−Δ_l/τ)·D_l (enclose.py).
Each term increases with τ (Δ_l > 0), so the replay — asked by this claim for
the enclosures μ_S ± B_i(τ*) — covers every τ ≤ τ* at once, and the final
``exact`` claim then holds at all of them. Checked here, with arb enclosures
of exp turned into rationals:

* τ* equals the model's temperature and the certificate's top-level "tau_star";
* 0 < radius ≤ the least radius of the certificate's snap claims (each
  checked against the model's biases), so τ* speaks about the model's own
  snaps (a snap's centre may sit a little off its code: the construction
  states the radius left around the codes, which is smaller);
* max_i B_i(τ*) ≤ noise_bound ≤ radius;
* τ* is the largest such τ up to ``step`` ≤ τ*/2^16: max_i B_i(τ* + step) > radius
  (``step`` null: no token has any noise, so every τ works);
* ``closed_form`` (null when unconstrained) is a weaker τ of the same kind,
  min_i Δ_i / ln((n_j−1)·D_i/radius) rounded down to 24 bits: for each token
  with (n_j−1)·D_i > radius, (n_j−1)·D_i·exp(−Δ_i/closed_form) ≤ radius, for
  some token closed_form·(1 + 2^-22) breaks it (so the value stated is the
  formula's, not any smaller τ), and closed_form < τ* + step (both lie below
  the true threshold, which τ* meets to within step).
"""
from __future__ import annotations

from dataclasses import dataclass

from flint import ctx, fmpq

from tfcert.verify.errors import InputError
from tfcert.verify.claims import Context, block_of, optional_number, stated
from tfcert.verify.formats import fields, number
from tfcert.verify.numbers import show
from tfcert.verify.enclose import PREC, ball, bounds, noise_bound, rank_one
from tfcert.verify.layers import is_zero_matrix

KIND = "tau_star"
LAYER = "sa"
ENCLOSURES = True
BELOW = True  # the replay must give enclosures valid at every τ up to the model's (docstring)
RESOLUTION = 2 ** 16  # step ≤ τ*/RESOLUTION
TIGHT = fmpq(1, 2 ** 22)  # closed_form·(1 + TIGHT) must break the closed form: 24 bits rounded down


@dataclass(frozen=True)
class Claim:
    block: int
    tau_star: fmpq
    radius: fmpq
    noise_bound: fmpq
    step: fmpq | None
    closed_form: fmpq | None


def parse(raw: dict, where: str, context: Context) -> Claim:
    fields(raw, where, ("kind", "block", "tau_star", "radius", "noise_bound"), ("step", "closed_form", "reason"))
    if not isinstance(raw.get("reason", ""), str):
        raise InputError(f"{where}.reason: expected a string")
    return Claim(block_of(raw, where, context), number(raw.get("tau_star"), f"{where}.tau_star"),
                 number(raw.get("radius"), f"{where}.radius"), number(raw.get("noise_bound"), f"{where}.noise_bound"),
                 optional_number(raw.get("step"), f"{where}.step"),
                 optional_number(raw.get("closed_form"), f"{where}.closed_form"))


def max_bound(noises, tau: fmpq, side: int) -> fmpq:
    """max_i of the lower (side 0) or upper (side 1) rational bound of B_i(τ),
    once per Noise object (the replay shares one among the tokens of a query)."""
    distinct = {id(n): n for seq in noises for n in seq}.values()
    return max((bounds(noise_bound(n, tau))[side] for n in distinct), default=fmpq(0))


def constrained(noises, sizes, radius: fmpq) -> list[tuple[fmpq, fmpq]]:
    """(Δ_i, (n_j−1)·D_i) for every token whose closed form is finite, with
    Δ_i its least gap and D_i its largest spread."""
    out = []
    for n_j, seq in zip(sizes, noises):
        for n in seq:
            if n.terms:
                gap, spread = min(t[0] for t in n.terms), max(t[1] for t in n.terms)
                if (n_j - 1) * spread > radius:
                    out.append((gap, (n_j - 1) * spread))
    return out


def closed_form_noise(tokens: list[tuple[fmpq, fmpq]], tau: fmpq, side: int) -> fmpq:
    """max_i of the lower (side 0) or upper (side 1) rational bound of (n_j−1)·D_i·exp(−Δ_i/τ)."""
    with ctx.workprec(PREC):
        return max((bounds(ball(scaled) * (-ball(gap / tau)).exp())[side] for gap, scaled in tokens), default=fmpq(0))


def closed_form_ok(tokens: list[tuple[fmpq, fmpq]], tau: fmpq, radius: fmpq) -> bool:
    """Whether (n_j−1)·D_i·exp(−Δ_i/τ) ≤ radius for every listed token (construct's search)."""
    return closed_form_noise(tokens, tau, 1) <= radius


def static(claim: Claim, context: Context) -> list[str]:
    model, top = context.model, context.certificate
    failures = []
    if model.attention != "softmax":
        return ["the model is not a softmax model"]
    if model.temperature != claim.tau_star:
        failures.append(stated("tau_star (the model's temperature)", claim.tau_star, model.temperature))
    if "tau_star" not in top:
        failures.append("the certificate has no top-level tau_star")
    elif number(top["tau_star"], "$.tau_star") != claim.tau_star:  # read once already by check.py
        failures.append(f"the certificate's top-level tau_star {show(top['tau_star'])} differs from the "
                        f"claim's {show(claim.tau_star)}")
    radii = [number(c["radius"], "radius") for p in top["phases"] for c in p["claims"] if c["kind"] == "snap"]
    if not radii:
        failures.append("the certificate has no snap claim: the radius is not tied to the model")
    elif not 0 < claim.radius <= min(radii):
        failures.append(f"radius {show(claim.radius)} is not in (0, the least snap radius {show(min(radii))}]")
    for k, block in enumerate(model.blocks):
        sa = block.sa
        free = is_zero_matrix(sa.A, model.d) or (sa.rho == 1 and is_zero_matrix(sa.V, model.d))
        if k != claim.block and not free:
            failures.append(f"block {k}'s attention also depends on the temperature")
    if rank_one(model.blocks[claim.block].sa.V) is None:
        failures.append(f"block {claim.block}'s V is not stored as a single u vᵀ")
    return failures


@dataclass(frozen=True)
class Maxima:
    """What the verdict needs of the tokens, as maxima: the maxima over shards
    of the dataset (tfcert/shards.py merges them) are the whole dataset's."""
    worst: fmpq  # max_i of B_i(τ*)'s upper bound
    noisy: bool  # some token has noise
    above_step: fmpq | None  # max_i of B_i(τ* + step)'s lower bound, where step > 0
    constrained: bool  # some token constrains closed_form
    closed_form: tuple[fmpq, fmpq] | None  # the closed form's noise: upper at closed_form, lower at ·(1 + TIGHT)


def tokens(claim: Claim, context: Context, step) -> Maxima | None:
    """The maxima of the replayed tokens (None: no enclosures over (0, τ*])."""
    if step.noise is None or not step.below:
        return None
    above = claim.step is not None and claim.step > 0
    limited = constrained(step.noise, [len(p.input) for p in context.dataset.pairs], claim.radius)
    cf = claim.closed_form
    return Maxima(max_bound(step.noise, claim.tau_star, 1), any(n.terms for seq in step.noise for n in seq),
                  max_bound(step.noise, claim.tau_star + claim.step, 0) if above else None, bool(limited),
                  (closed_form_noise(limited, cf, 1), closed_form_noise(limited, cf * (1 + TIGHT), 0))
                  if cf is not None and cf > 0 else None)


def verdict(claim: Claim, m: Maxima | None) -> list[str]:
    if m is None:
        return [f"block {claim.block}: the attention was not enclosed by its noise bound over (0, tau_star]"]
    failures = []
    if not m.worst <= claim.noise_bound <= claim.radius:
        failures.append(f"need max noise bound {show(m.worst)} ≤ noise_bound {show(claim.noise_bound)} ≤ radius "
                        f"{show(claim.radius)}")
    if claim.step is None:
        if m.noisy:
            failures.append("step is null but some token has noise")
    elif not 0 < claim.step <= claim.tau_star / RESOLUTION:
        failures.append(f"step {show(claim.step)} is not in (0, tau_star/{RESOLUTION}]")
    elif not m.above_step > claim.radius:
        failures.append(f"tau_star + step = {show(claim.tau_star + claim.step)} also keeps the noise within the "
                        f"radius: tau_star is not the largest to within step")
    if claim.closed_form is None:
        if m.constrained:
            failures.append("closed_form is null but some token constrains it")
    elif not (claim.step is not None and 0 < claim.closed_form < claim.tau_star + claim.step
              and m.closed_form[0] <= claim.radius):
        failures.append(f"closed_form {show(claim.closed_form)} is not a valid bound below tau_star + step")
    elif not m.closed_form[1] > claim.radius:
        failures.append(f"closed_form {show(claim.closed_form)} is not min Δ_i/ln((n_j−1)·D_i/radius) rounded down "
                        f"to 24 bits: closed_form·(1 + 2^-22) is a valid bound too")
    return failures


def check(claim: Claim, context: Context, step) -> list[str]:
    return static(claim, context) or verdict(claim, tokens(claim, context, step))
