"""An independent judge of a bundle, for the mutation campaign (selftest.py).

It shares no code with the checker (``tfcert.verify``): its own JSON reading
(``fractions.Fraction`` for every number), a dense forward pass of every layer
on every token, and each claim kind decided from its definition in
docs/certificates.md and docs/softmax.md:

* region claims (a hat is 0 outside its window; a snap's plateau lands on its
  target, the snap is 0 outside its reach) are decided exactly without z3:
  a group of ReLU units on one direction is piecewise linear in t, so it is 0
  on (−∞, lo] iff it is 0 at lo, at every breakpoint below lo and one step
  past the lowest, and likewise above hi; on a plateau with no breakpoint
  inside it is affine, so its two ends decide it;
* softmax: exp enters only through mpmath (60 digits, rounded up by a
  relative 1e-40). The collapse output of token i at every 0 < τ ≤ τ* lies on
  the segment ρx_i + t·u with |t − μ_S| ≤ Σ_{l∉S} exp(−Δ_l/τ*)·|v·x_l − μ_S|/|S|
  (each term grows with τ); a feed-forward layer maps a polyline exactly; a
  scored layer that is not of that form makes a token opaque, and every
  claim that reads an opaque token is false. This is the conservative
  decision for softmax: a claim is judged true only when that enclosure
  shows it;
* a claim on a layer is judged on exact points only (hat, separation,
  clusters), as the claim kinds are defined; argmax and tau_star need a scored
  attention layer (A ≠ 0, not the identity ρ = 1, V = 0; under softmax V = u vᵀ).

``judge`` answers True when the files are well formed and every claim holds,
else False with the reason; a malformed file (which verify must refuse with
exit 2) is False too.
"""
from __future__ import annotations

import hashlib
import json
import re
from fractions import Fraction as Q

import mpmath

NUMBER = re.compile(r"[+-]?(\d+/\d+|(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?)", re.ASCII)
NAME = re.compile(r"[A-Za-z0-9_.:/()+ -]{1,80}")
THEOREM = {"hardmax": "1.6", "softmax": "1.8"}
CLAIM_FIELDS = {  # kind: (required, optional)
    "uniform_attention": ({"block"}, set()),
    "separation": ({"block", "direction"}, {"min_gap"}),
    "hat": ({"block", "units", "window", "moves", "to"}, {"margin", "above"}),
    "argmax": ({"block", "tokens", "ties"}, set()),
    "clusters": ({"block", "distinct"}, set()),
    "exact": (set(), set()),
    "size": ({"theorem", "bounds", "blocks", "width", "parameters", "d_sum_m", "within"}, set()),
    "snap": ({"block", "units", "coordinate", "center", "radius", "reach", "moves", "to"}, set()),
    "tau_star": ({"block", "tau_star", "radius", "noise_bound"}, {"step", "closed_form", "reason"}),
}


class Invalid(Exception):
    """The files break the format."""


def need(condition: bool, why: str) -> None:
    if not condition:
        raise Invalid(why)


# ---------------------------------------------------------------- reading

def load(raw: bytes) -> object:
    def pairs(items):
        keys = [k for k, _ in items]
        need(len(set(keys)) == len(keys), "duplicate key")
        return dict(items)

    def constant(text):
        raise Invalid(f"{text}")
    return json.loads(raw.decode("utf-8"), object_pairs_hook=pairs, parse_float=lambda t: ("float", t),
                      parse_constant=constant)


def num(v) -> Q:
    if isinstance(v, tuple) and v[0] == "float":
        v = v[1]
    if isinstance(v, int) and not isinstance(v, bool):
        return Q(v)
    need(isinstance(v, str) and NUMBER.fullmatch(v.strip()) is not None, f"not a number: {v!r}")
    text = v.strip()
    if "/" in text:
        need(int(text.split("/")[1]) != 0, "zero denominator")
    return Q(text)


def integer(v, low: int, high: int) -> int:
    need(isinstance(v, int) and not isinstance(v, bool) and low <= v <= high, f"bad integer {v!r}")
    return v


def keys(v, required: set, optional: set = frozenset()) -> dict:
    need(isinstance(v, dict), "expected an object")
    need(required <= set(v) <= required | set(optional), f"fields {sorted(v)}")
    return v


def vec(v, d: int) -> tuple:
    need(isinstance(v, list) and len(v) == d, "bad vector")
    return tuple(num(x) for x in v)


def dataset_of(raw: bytes):
    top = keys(load(raw), {"format", "d", "pairs"})
    need(top["format"] == "tfcert.dataset/1", "format")
    d = integer(top["d"], 2, 100_000)
    need(isinstance(top["pairs"], list) and top["pairs"], "pairs")
    kept, seen = [], {}
    for j, p in enumerate(top["pairs"]):
        keys(p, {"input", "output"})
        X, Y = ([vec(t, d) for t in p[s]] if isinstance(p[s], list) else need(False, s) for s in ("input", "output"))
        need(X and Y and len(set(X)) == len(X) and len(set(Y)) == len(Y) and len(Y) <= len(X), f"pair {j}")
        if frozenset(X) in seen:
            need(seen[frozenset(X)] == frozenset(Y), "equal inputs, other outputs")
            continue
        seen[frozenset(X)] = frozenset(Y)
        kept.append((j, X, Y))
    return d, kept


def matrix(v, d: int) -> list[list[Q]]:
    keys(v, {"scale", "low_rank"})
    s = num(v["scale"])
    m = [[s if i == k else Q(0) for k in range(d)] for i in range(d)]
    need(isinstance(v["low_rank"], list), "low_rank")
    for term in v["low_rank"]:
        keys(term, {"u", "v"})
        u, w = vec(term["u"], d), vec(term["v"], d)
        for i in range(d):
            for k in range(d):
                m[i][k] += u[i] * w[k]
    return m


def model_of(raw: bytes):
    top = load(raw)
    need(isinstance(top, dict) and top.get("attention") in THEOREM, "attention")
    soft = top["attention"] == "softmax"
    keys(top, {"format", "d", "attention", "blocks"} | ({"temperature"} if soft else set()))
    need(top["format"] == "tfcert.model/1", "format")
    d = integer(top["d"], 1, 100_000)
    tau = num(top["temperature"]) if soft else None
    need(tau is None or tau > 0, "temperature")
    need(isinstance(top["blocks"], list), "blocks")
    blocks = []
    for b in top["blocks"]:
        keys(b, {"ff", "sa"})
        ff, sa = keys(b["ff"], {"eta", "U", "b", "W"}), keys(b["sa"], {"rho", "A", "V"})
        need(isinstance(ff["U"], list) and isinstance(ff["W"], list) and len(ff["W"]) == d, "ff")
        U = [vec(r, d) for r in ff["U"]]
        w = len(U)
        V = sa["V"]
        rank_one = None
        if isinstance(V, dict) and num(V.get("scale", "1")) == 0 and isinstance(V.get("low_rank"), list) \
                and len(V["low_rank"]) == 1:
            rank_one = (vec(V["low_rank"][0]["u"], d), vec(V["low_rank"][0]["v"], d))
        blocks.append({"eta": num(ff["eta"]), "U": U, "b": vec(ff["b"], w), "W": [vec(r, w) for r in ff["W"]],
                       "rho": num(sa["rho"]), "A": matrix(sa["A"], d), "V": matrix(V, d), "rank_one": rank_one,
                       "terms": (len(sa["A"]["low_rank"]), len(V["low_rank"]))})
    return {"d": d, "soft": soft, "tau": tau, "blocks": blocks}


# ---------------------------------------------------------------- the dense replay

def dot(a, b) -> Q:
    return sum((x * y for x, y in zip(a, b)), Q(0))


def mat_vec(m, x) -> tuple:
    return tuple(dot(row, x) for row in m)


def is_zero(m) -> bool:
    return all(v == 0 for row in m for v in row)


def ff_point(b: dict, x: tuple) -> tuple:
    h = [max(dot(u, x) + c, Q(0)) for u, c in zip(b["U"], b["b"])]
    return tuple(b["eta"] * xi + dot(w, h) for xi, w in zip(x, b["W"]))


def ff_token(b: dict, x):
    """A point maps to a point; a polyline (tuple of points, in a list) to its exact image."""
    if not isinstance(x, list):
        return x if x is None else ff_point(b, x)
    out = [ff_point(b, x[0])]
    for p, r in zip(x, x[1:]):
        delta = tuple(v - u for u, v in zip(p, r))
        cuts = set()
        for u, c in zip(b["U"], b["b"]):
            slope = dot(u, delta)
            if slope != 0 and 0 < -(dot(u, p) + c) / slope < 1:
                cuts.add(-(dot(u, p) + c) / slope)
        cuts = sorted(cuts)
        out += [ff_point(b, tuple(a + s * e for a, e in zip(p, delta))) for s in cuts] + [ff_point(b, r)]
    kept = [out[0]] + [v for u, v in zip(out, out[1:]) if v != u]
    return kept[0] if len(kept) == 1 else kept


def attention(b: dict, X: list) -> list[tuple[tuple, Q | None, list[Q]]]:
    """Per token: the argmax set, the gap, and the scores."""
    out = []
    for x in X:
        ax = mat_vec(b["A"], x)
        s = [dot(ax, y) for y in X]
        best = max(s)
        rest = [v for v in s if v != best]
        out.append((tuple(l for l, v in enumerate(s) if v == best), best - max(rest) if rest else None, s))
    return out


def noise(att, values) -> tuple[Q, list[tuple[Q, Q]]]:
    S, _, s = att
    mu = sum((values[l] for l in S), Q(0)) / len(S)
    return mu, [(s[S[0]] - s[l], abs(values[l] - mu) / len(S)) for l in range(len(s)) if l not in S and values[l] != mu]


def bound(terms, tau: Q, up: bool = True) -> Q:
    """Σ exp(−Δ/τ)·D, rounded outward by a relative 1e-40."""
    if not terms:
        return Q(0)
    def real(x: Q):
        return mpmath.mpf(x.numerator) / x.denominator

    with mpmath.workdps(60):
        total = mpmath.fsum(mpmath.exp(-real(g / tau)) * real(spread) for g, spread in terms)
        man, exp = mpmath.mpf(total).man_exp
    if int(exp) + int(man).bit_length() < -2000:  # below 2^-2000: only its bound matters
        return Q(1, 2**2000) if up else Q(0)
    value = Q(int(man)) * Q(2) ** int(exp)
    slack = abs(value) / 10**40 + Q(1, 2**2000)
    return value + slack if up else max(value - slack, Q(0))


def sa_tokens(b: dict, X: list, soft: bool, tau: Q | None):
    """(new tokens, attention table or None) of one attention layer on one sequence."""
    d = len(b["A"])
    identity = b["rho"] == 1 and is_zero(b["V"])
    if identity:
        return X, None
    points = all(isinstance(x, tuple) for x in X)
    if not points:
        return [None] * len(X), None
    if is_zero(b["A"]):
        mean = tuple(sum((x[k] for x in X), Q(0)) / len(X) for k in range(d))
        shift = mat_vec(b["V"], mean)
        return [tuple(b["rho"] * xi + si for xi, si in zip(x, shift)) for x in X], None
    table = attention(b, X)
    if not soft:
        out = []
        for x, (S, _, _) in zip(X, table):
            mean = tuple(sum((X[l][k] for l in S), Q(0)) / len(S) for k in range(d))
            out.append(tuple(b["rho"] * xi + si for xi, si in zip(x, mat_vec(b["V"], mean))))
        return out, table
    if b["rank_one"] is None:
        return [None] * len(X), None
    u, v = b["rank_one"]
    values = [dot(v, x) for x in X]
    out = []
    for x, att in zip(X, table):
        mu, terms = noise(att, values)
        B = bound(terms, tau)
        lo, hi = max(mu - B, min(values)), min(mu + B, max(values))
        ends = [tuple(b["rho"] * xi + t * ui for xi, ui in zip(x, u)) for t in (lo, hi)]
        out.append(ends[0] if ends[0] == ends[1] else ends)
    return out, table


def replay(model: dict, seqs: list[list[tuple]]) -> list[dict]:
    """Per block: tokens before the FF, after it, after the attention, and the attention table."""
    steps = []
    for b in model["blocks"]:
        mid = [[ff_token(b, x) for x in X] for X in seqs]
        after, tables = [], []
        for X in mid:
            new, table = sa_tokens(b, X, model["soft"], model["tau"])
            after.append(new)
            tables.append(table)
        steps.append({"in": seqs, "mid": mid, "out": after,
                      "att": tables if all(t is not None for t in tables) else None})
        seqs = after
    return steps


# ---------------------------------------------------------------- region claims, exactly

def group(b: dict, units, t: Q) -> tuple:
    return tuple(sum((w[j] * max(t + b["b"][j], Q(0)) for j in units), Q(0)) for w in b["W"])


def zero_on(b: dict, units, lo: Q | None, hi: Q | None, value: tuple | None = None) -> bool:
    """The group (as a function of t = u·x) is 0 — or ``value`` — on (−∞, hi] (lo None) or on
    [lo, ∞) (hi None): piecewise linear, so its breakpoints there, the end and one step past
    the last breakpoint decide it."""
    breaks = sorted(-b["b"][j] for j in units)
    if lo is None:
        points = [p for p in breaks if p <= hi] + [hi, min(breaks + [hi]) - 1]
    else:
        points = [p for p in breaks if p >= lo] + [lo, max(breaks + [lo]) + 1]
    value = value or (Q(0),) * len(b["W"])
    return all(group(b, units, p) == value for p in points)


# ---------------------------------------------------------------- claims

def flat(seqs):
    return [x for X in seqs for x in X]


def refs(v, pairs) -> set:
    need(isinstance(v, list), "refs")
    out = []
    for r in v:
        need(isinstance(r, list) and len(r) == 2, "ref")
        j = integer(r[0], 0, 10**9)
        need(j in pairs, "no such sequence")
        out.append((j, integer(r[1], 0, len(pairs[j][0]) - 1)))
    need(len(set(out)) == len(out), "repeated ref")
    return set(out)


def units_of(v, width: int) -> list[int]:
    need(isinstance(v, list) and v, "units")
    out = [integer(u, 0, width - 1) for u in v]
    need(len(set(out)) == len(out), "repeated unit")
    return out


def size_of(model: dict, sm: int, n: int, theorem: str) -> dict:
    d = model["d"]
    params = sum(1 + 2 * len(b["U"]) * d + len(b["U"]) + 3 + 2 * d * (b["terms"][0] + b["terms"][1])
                 for b in model["blocks"])
    bound_blocks = 2 * sm + 2 * n + 1 if theorem == "1.6" else 2 * sm + 3 * n
    values = {"blocks": len(model["blocks"]), "width": max((len(b["U"]) for b in model["blocks"]), default=0),
              "parameters": params}
    bounds = {"blocks": bound_blocks, "width": 4, "parameters": bound_blocks * (12 * d + 8)}
    return {"theorem": theorem, **values, "bounds": bounds, "d_sum_m": d * sm,
            "within": all(values[k] <= bounds[k] for k in bounds)}


class Judge:
    def __init__(self, model: dict, pairs: list, cert: dict):
        self.model, self.cert = model, cert
        self.pairs = {j: (X, Y) for j, X, Y in pairs}
        self.order = [j for j, _, _ in pairs]
        self.steps = replay(model, [X for _, X, _ in pairs])
        self.refs = [(j, i) for j, X, _ in pairs for i in range(len(X))]

    def block(self, c) -> int:
        return integer(c.get("block"), 0, len(self.model["blocks"]) - 1)

    def points(self, *seqs) -> bool:
        return all(isinstance(x, tuple) for s in seqs for x in flat(s))

    def parse_and_decide(self, c: dict) -> bool:
        kind = c.get("kind")
        need(kind in CLAIM_FIELDS, "kind")
        required, optional = CLAIM_FIELDS[kind]
        keys(c, required | {"kind"}, optional)
        return getattr(self, kind)(c)

    def uniform_attention(self, c) -> bool:
        return is_zero(self.model["blocks"][self.block(c)]["A"])

    def separation(self, c) -> bool:
        k, d = self.block(c), self.model["d"]
        direction = vec(c["direction"], d)
        gap = None if c.get("min_gap") is None else num(c["min_gap"])
        step = self.steps[k]
        if not self.points(step["mid"], step["out"]):
            return False
        values = sorted(dot(direction, x) for x in flat(step["out"]))
        gaps = [b - a for a, b in zip(values, values[1:])]
        least = min(gaps) if gaps else None
        return least == gap and (least is None or least > 0)

    def hat(self, c) -> bool:
        k = self.block(c)
        b = self.model["blocks"][k]
        units = units_of(c["units"], len(b["U"]))
        need(isinstance(c["window"], list) and len(c["window"]) == 2, "window")
        lo, hi = num(c["window"][0]), num(c["window"][1])
        moves = refs(c["moves"], self.pairs)
        to = vec(c["to"], self.model["d"])
        margin = None if c.get("margin") is None else num(c["margin"])
        above = vec(c["above"], self.model["d"]) if "above" in c else None
        step = self.steps[k]
        w = b["U"][units[0]]
        if not self.points(step["in"], step["mid"]) or any(b["U"][j] != w for j in units) or not lo < hi:
            return False
        if not (zero_on(b, units, None, lo) and zero_on(b, units, hi, None, above)):
            return False
        proj = [(dot(w, x), r) for x, r in zip(flat(step["in"]), self.refs)]
        inside = {r for t, r in proj if lo < t < hi}
        outside = [lo - t if t <= lo else t - hi for t, r in proj if not lo < t < hi]
        if inside != moves or (min(outside) if outside else None) != margin:
            return False
        for j, i in moves:
            pos = self.order.index(j)
            x = step["in"][pos][i]
            own = tuple(b["eta"] * xi + gi for xi, gi in zip(x, group(b, units, dot(w, x))))
            if own != to or step["mid"][pos][i] != to:
                return False
        return True

    def argmax(self, c) -> bool:
        k = self.block(c)
        need(isinstance(c["tokens"], list) and len(c["tokens"]) == len(self.order), "tokens")
        stated = []
        for row, j in zip(c["tokens"], self.order):
            n = len(self.pairs[j][0])
            need(isinstance(row, list) and len(row) == n, "row")
            for e in row:
                need(isinstance(e, list) and len(e) == 2 and isinstance(e[0], list), "entry")
                stated.append((tuple(integer(a, 0, n - 1) for a in e[0]), None if e[1] is None else num(e[1])))
        ties = integer(c["ties"], 0, 10**12)
        step = self.steps[k]
        if step["att"] is None:
            return False
        actual = [(S, gap) for table in step["att"] for S, gap, _ in table]
        return actual == stated and ties == sum(len(S) > 1 for S, _ in actual)

    def clusters(self, c) -> bool:
        k = self.block(c)
        need(isinstance(c["distinct"], list) and len(c["distinct"]) == len(self.order), "distinct")
        counts = [integer(n, 1, 10**9) for n in c["distinct"]]
        step = self.steps[k]
        return self.points(step["mid"], step["out"]) and counts == [len(set(X)) for X in step["out"]]

    def exact(self, c) -> bool:
        final = self.steps[-1]["out"] if self.steps else [self.pairs[j][0] for j in self.order]
        return self.points(final) and all(set(X) == set(self.pairs[j][1]) for X, j in zip(final, self.order))

    def size(self, c) -> bool:
        need(c["theorem"] in ("1.6", "1.8"), "theorem")
        keys(c["bounds"], {"blocks", "width", "parameters"})
        for v in [c[k] for k in ("blocks", "width", "parameters", "d_sum_m")] + list(c["bounds"].values()):
            integer(v, 0, 10**18)
        need(isinstance(c["within"], bool), "within")
        theorem = THEOREM["softmax" if self.model["soft"] else "hardmax"]
        sm = sum(len(self.pairs[j][1]) for j in self.order)
        return {k: v for k, v in c.items() if k != "kind"} == size_of(self.model, sm, len(self.order), theorem)

    def snap(self, c) -> bool:
        k = self.block(c)
        b, d = self.model["blocks"][k], self.model["d"]
        units = units_of(c["units"], len(b["U"]))
        need(len(units) == 4, "snap units")
        axis = integer(c["coordinate"], 0, d - 1)
        centre, r, R = num(c["center"]), num(c["radius"]), num(c["reach"])
        moves = refs(c["moves"], self.pairs)
        to = vec(c["to"], d)
        e = tuple(Q(int(i == axis)) for i in range(d))
        if any(b["U"][j] != e for j in units) or not 0 < r < R:
            return False
        if sorted(-b["b"][j] for j in units) != [centre - R, centre - r, centre + r, centre + R]:
            return False
        for t in (centre - r, centre + r):  # affine in between: no breakpoint inside the plateau
            if tuple(b["eta"] * t * ei + gi for ei, gi in zip(e, group(b, units, t))) != to:
                return False
        if not (zero_on(b, units, None, centre - R) and zero_on(b, units, centre + R, None)):
            return False
        step = self.steps[k]
        inside = set()
        for x, ref in zip(flat(step["in"]), self.refs):
            if x is None:
                return False
            verts = x if isinstance(x, list) else [x]
            a, z = min(p[axis] for p in verts), max(p[axis] for p in verts)
            if z > centre - R and a < centre + R:
                inside.add(ref)
                on_axis = all(p[i] == 0 for p in verts for i in range(d) if i != axis)
                if ref in moves and not (on_axis and centre - r <= a and z <= centre + r):
                    return False
        if inside != moves:
            return False
        return all(step["mid"][self.order.index(j)][i] == to for j, i in moves)

    def tau_star(self, c) -> bool:
        k = self.block(c)
        tau, radius, nb = num(c["tau_star"]), num(c["radius"]), num(c["noise_bound"])
        step_v = None if c.get("step") is None else num(c["step"])
        cf = None if c.get("closed_form") is None else num(c["closed_form"])
        need(isinstance(c.get("reason", ""), str), "reason")
        model, top = self.model, self.cert
        if not model["soft"] or model["tau"] != tau or "tau_star" not in top or num(top["tau_star"]) != tau:
            return False
        radii = [num(s["radius"]) for p in top["phases"] for s in p["claims"] if s["kind"] == "snap"]
        if not radii or not 0 < radius <= min(radii):
            return False
        for i, b in enumerate(model["blocks"]):
            if i != k and not (is_zero(b["A"]) or (b["rho"] == 1 and is_zero(b["V"]))):
                return False
        b, step = model["blocks"][k], self.steps[k]
        if b["rank_one"] is None or step["att"] is None:
            return False
        v = b["rank_one"][1]
        per_token = []
        for X, table in zip(step["mid"], step["att"]):
            values = [dot(v, x) for x in X]
            per_token += [(len(X), noise(att, values)[1]) for att in table]
        worst = max((bound(t, tau) for _, t in per_token), default=Q(0))
        if not worst <= nb <= radius:
            return False
        if step_v is None:
            if any(t for _, t in per_token):
                return False
        elif not (0 < step_v <= tau / 2**16 and max(bound(t, tau + step_v, up=False) for _, t in per_token) > radius):
            return False
        tight = [(min(g for g, _ in t), (n - 1) * max(s for _, s in t)) for n, t in per_token
                 if t and (n - 1) * max(s for _, s in t) > radius]
        if cf is None:
            return not tight
        return step_v is not None and 0 < cf < tau + step_v and all(bound([(g, s)], cf) <= radius for g, s in tight)


def judge(model_raw: bytes, dataset_raw: bytes, cert_raw: bytes) -> tuple[bool, str]:
    """(True, "") when every claim holds; (False, why) when one fails or a file is malformed."""
    try:
        d, pairs = dataset_of(dataset_raw)
        model = model_of(model_raw)
        need(model["d"] == d, "d")
        cert = keys(load(cert_raw), {"format", "model_sha256", "dataset_sha256", "attention", "theorem", "phases"},
                    {"tau_star"})
        need(cert["format"] == "tfcert.certificate/1", "format")
        if "tau_star" in cert:
            num(cert["tau_star"])
        j = Judge(model, pairs, cert)
        need(isinstance(cert["phases"], list), "phases")
        verdicts, kinds = [], []
        for p in cert["phases"]:
            keys(p, {"name", "blocks", "claims"})
            need(isinstance(p["name"], str) and NAME.fullmatch(p["name"]) is not None, "name")
            need(isinstance(p["blocks"], list) and len(p["blocks"]) == 2, "blocks")
            first = integer(p["blocks"][0], 0, len(model["blocks"]))
            end = integer(p["blocks"][1], first, len(model["blocks"]))
            need(isinstance(p["claims"], list), "claims")
            for c in p["claims"]:
                need(isinstance(c, dict), "claim")
                verdicts.append((c.get("kind"), j.parse_and_decide(c)))
                if "block" in c:
                    need(first <= c["block"] < end, "block outside the phase")
                kinds.append(c["kind"])
    except (Invalid, KeyError, IndexError, TypeError, ValueError, ZeroDivisionError, UnicodeDecodeError) as exc:
        return False, f"malformed: {type(exc).__name__}: {exc}"
    attention = "softmax" if model["soft"] else "hardmax"
    checks = [(cert["model_sha256"] == hashlib.sha256(model_raw).hexdigest(), "model_sha256"),
              (cert["dataset_sha256"] == hashlib.sha256(dataset_raw).hexdigest(), "dataset_sha256"),
              (cert["attention"] == attention, "attention"), (cert["theorem"] == THEOREM[attention], "theorem"),
              ("exact" in kinds, "no exact claim"),
              ("tau_star" not in cert or "tau_star" in kinds, "tau_star stated without a claim"),
              (attention == "hardmax" or "tau_star" in kinds, "softmax without tau_star"),
              *((ok, f"claim {kind}") for kind, ok in verdicts)]
    failed = [why for ok, why in checks if not ok]
    return (not failed), ", ".join(failed)
