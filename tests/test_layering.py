"""The checker's trusted base stays independent (docs/certificates.md, Threat model): nothing
under verify/ imports construction code, the audit, or the CLI."""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO

VERIFY = REPO / "verify"
FORBIDDEN = {
    "construct": ("tfcert.construct", "construct"),
    "audit/cli": ("tfcert.audit", "tfcert.api", "tfcert.cli", "tfcert.bench", "tfcert.selftest", "audit"),
}


def package_of(path: Path) -> str:
    """The dotted package a file under verify/ belongs to (verify/ is tfcert.verify)."""
    parts = path.relative_to(VERIFY).parent.parts
    return ".".join(("tfcert", "verify", *parts))


def imported_modules(path: Path) -> list[tuple[int, str]]:
    """(line, absolute module name) of every import in the file, relative ones
    resolved against the file's package; ``from X import a`` also yields X.a."""
    tree = ast.parse(path.read_text(), filename=str(path))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package_of(path).split(".")
                if node.level - 1 > len(base):
                    raise AssertionError(f"{path}:{node.lineno}: relative import beyond the top package")
                base = base[:len(base) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            out.append((node.lineno, module))
            out += [(node.lineno, f"{module}.{alias.name}") for alias in node.names]
        elif isinstance(node, ast.Call):  # importlib.import_module("…") / __import__("…")
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if name in ("import_module", "__import__") and node.args and isinstance(node.args[0], ast.Constant):
                out.append((node.lineno, str(node.args[0].value)))
    return out


def hits(module: str, banned: tuple[str, ...]) -> bool:
    return any(module == b or module.startswith(b + ".") for b in banned)


SOURCES = sorted(VERIFY.rglob("*.py"))


def test_sources_found():
    assert len(SOURCES) >= 10 and VERIFY / "check.py" in SOURCES and VERIFY / "claims" / "hat.py" in SOURCES


@pytest.mark.parametrize("what", sorted(FORBIDDEN))
def test_verify_imports(what):
    bad = [f"{p.relative_to(REPO)}:{line}: imports {m}"
           for p in SOURCES for line, m in imported_modules(p) if hits(m, FORBIDDEN[what])]
    assert bad == [], "\n".join(bad)


def test_relative_import_resolution():
    """The resolver itself: what a forbidden relative import would look like."""
    check = VERIFY / "check.py"
    hat = VERIFY / "claims" / "hat.py"
    for path, source, expected in (
            (check, "from ..construct import build", "tfcert.construct"),
            (check, "from .. import construct", "tfcert.construct"),
            (hat, "from ...construct.hats import Hat", "tfcert.construct.hats"),
            (hat, "from ... import audit", "tfcert.audit"),
            (check, "import importlib\nimportlib.import_module('tfcert.construct.build')", "tfcert.construct.build")):
        tmp = path.with_name("_layering_probe.py")
        tree_modules = _modules_of_text(source, tmp)
        assert expected in tree_modules, (source, tree_modules)


def _modules_of_text(text: str, as_path: Path) -> list[str]:
    class FakePath(type(as_path)):
        def read_text(self, *args, **kwargs):
            return text
    return [m for _, m in imported_modules(FakePath(as_path))]


def test_importing_the_checker_loads_no_construction_code():
    code = ("import sys; import tfcert.verify.check, tfcert.verify.formats, tfcert.report; "
            "bad = sorted(m for m in sys.modules if m.startswith(('tfcert.construct', 'tfcert.audit', 'tfcert.cli'))); "
            "print(bad); sys.exit(1 if bad else 0)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def code_lines(path: Path) -> int:
    """Lines of code: not blank, not a comment, not inside a docstring."""
    source = path.read_text()
    docs = set()
    for node in ast.walk(ast.parse(source)):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) \
                and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            docs.update(range(body[0].lineno, body[0].end_lineno + 1))
    return sum(1 for i, line in enumerate(source.splitlines(), 1)
               if line.strip() and not line.strip().startswith("#") and i not in docs)


# The trusted base in three parts, each with a limit of its own, so that growth in one part
# is seen there and not absorbed by slack in another.
PARTS = {
    # the layer formulas, exact and (softmax) in arb balls: what "evaluate a layer" means (with
    # softmax scores taken once per group of equal columns and once per distinct query: Scores.columns)
    "formulas": (("layers.py", "enclose.py"), 260),
    # what to evaluate, never how: FF support and sorted projections (one ranking per direction,
    # read for each positive multiple of it: Scaled), the planar argmax table (its scores rational,
    # not integers over one common denominator, which grew with the hull), and the binary64 filter
    # that leaves a long sequence's few keys to score exactly (keys in convex position, d ≥ 3; copies
    # of a key scored once, each query scaled alone)
    "shortcuts": (("shortcuts.py",), 184),
    # the replay driver and the kernel's reading: formats, exact numbers, the certificate's walk
    # (an FF layer evaluates a run of equal tokens once; a softmax layer takes exact points or
    # enclosures sequence by sequence, so that shards replay what one process does; json's error
    # messages without their dangling " at"; a number's digits counted in each of its parts; each
    # tuple a layer sets, which a cluster's tokens share, checked and projected once; each_once, the
    # one way the kernel takes shared objects once; the canonical writer moved out, to tfcert/canonical.py)
    "replay": (("__init__.py", "check.py", "errors.py", "evaluate.py", "formats.py", "numbers.py"), 775),
    # one module per claim kind and the protocol they meet, and z3's region queries (with the
    # hook that hands each query to observers for --emit-smt and --cross-check; hat, snap and
    # tau_star split into static, tokens and verdict, so that shards reuse them; a query's
    # SMT-LIB2 text printed only where an observer reads it; a snap's on-axis test once per tuple,
    # which a cluster's tokens share; a separation's projections over the direction's non-zero
    # entries; the region caches keyed by numerators and denominators, not fmpq's slow hash)
    "claims": (("regions.py", "claims/__init__.py", "claims/argmax.py", "claims/clusters.py",
                "claims/exact.py", "claims/float.py", "claims/hat.py", "claims/separation.py",
                "claims/size.py", "claims/snap.py", "claims/tau_star.py", "claims/uniform.py"), 696),
    # the float-error analysis: the formats' standard model and the layer-by-layer bound
    # (each underflow scaled by what multiplies it later; the softmax mean centred on its
    # argmax token, each weight's error relative to the argmax's and per pair where the weight
    # matters, one per group of equal score columns and one per group of equal queries, over
    # their maxima; hardmax's close competitors one by one; a literal-zero A's mean, hardmax or
    # softmax, as one uniform mean centred on the tokens' midpoint, each exp(0) within 4u of 1;
    # one reach list per direction of a U row, its power-of-two scale moved to the threshold;
    # the exact evaluation lemma: each operand's grain, a sum of terms on one grid with few
    # enough bits rounds nothing, in FF layers and in the copy of a hardmax argmax; rounding
    # counts over the coordinates a low-rank A or V involves, not all d; V's dense entries once
    # per matrix; equal tokens with one error widened once per layer; a pre-activation computed
    # exactly with error bound 0 takes its own last bit as its grain; a token's values where
    # every run the float model allows computes them alike, its error then |x̂ − x| itself;
    # the lemma with each term's sign in an FF output, so that a hat's cancelling units fit;
    # a token's grains from the terms that computed it, kept where it errs, so that a code a
    # rounded sum made meets a snap on the grid its terms share; a softmax sequence of one token,
    # whose weight ê/ê cancels exp's error, its mean on its binade's grid, and where the token is
    # known, the values each exp(0) within 4u of 1 and each normalisation give it, computed; a
    # uniform mean and a tie average taken on the coordinates V reads alone; the score's Âᵀ x̂_l
    # range-checked as Â x̂_i is; where a range check on every token's maxima fails, each
    # sequence's own, and a refusal naming its sequence or token, so that shards agree; a U row's
    # direction found once per row, not per unit and layer; the tokens that enter an FF layer of
    # exact parameters exactly, shown to leave it exactly at once, by the lemma on their maxima;
    # a hardmax query's own score error bound taken only where the sequence's maxima leave its gap
    # in doubt; a known-values output with an unknown term in each form found unknown at once;
    # one tuple of zero errors shared by the tokens an FF layer leaves exact, so that a snap's
    # cluster, equal tokens with that one error, has its magnitude and slacks computed once;
    # an attention mean's two forms of V̂ m̂ and their sums computed once per mean, not once
    # per token that shares it: a sequence's tie average, an argmax token; an attention layer's
    # tokens whose erring coordinates no known value can reach, skipped at once; a run of tokens
    # sharing one tuple and one error tuple, an argmax's image, given one magnitude bound; each
    # input value object, which a parse shares between equal numbers, rounded and sized once; a
    # binary64 bound's grain read off its exponent, not through a rational; each rounded
    # parameter's sign kept beside it, so that an FF output's terms do not compare fmpq with 0; a
    # parameter tuple's rounding found by its entries' ids before its value's key; a V that is
    # one power-of-two entry of at least 1, a collapse's copy of the code, known to multiply a
    # softmax mean exactly; a softmax mean with a unique argmax whose normalisation is counted once,
    # each float sum's rounding bounded by its terms but the argmax's; a softmax mean whose other
    # weights vanish in every run, given a lone token's values and kept over an enclosure; a token's
    # alternatives, where its values are one of a few tuples, each taken through the later layers;
    # a short sum's every evaluation enumerated by its subsets, on integers at one scale with one
    # integer rounding (floats.round_scaled, round_nearest's too), a unit of several values
    # branching its token within the token's share of 16 alternatives; a tie average's values)
    "float analysis": (("floats.py", "float_analysis.py", "determined.py"), 1169),
}


def test_every_file_of_the_trusted_base_is_in_one_part():
    named = [VERIFY / f for files, _ in PARTS.values() for f in files]
    assert sorted(named) == SOURCES and len(set(named)) == len(named)


@pytest.mark.parametrize("part", sorted(PARTS))
def test_trusted_base_stays_small(part):
    """The checker a user must trust stays small, part by part (the limits above)."""
    files, limit = PARTS[part]
    assert sum(code_lines(VERIFY / f) for f in files) <= limit


def test_verify_imports_nothing_of_tfcert_outside_itself():
    """The trusted base is all of verify/: even its error type lives there."""
    bad = [f"{p.relative_to(REPO)}:{line}: imports {m}" for p in SOURCES for line, m in imported_modules(p)
           if (m == "tfcert" or m.startswith("tfcert.")) and not hits(m, ("tfcert.verify",))]
    assert bad == [], "\n".join(bad)


# The rooms of the namespace and what each may import (docs/architecture.md): a room is a
# subpackage of tfcert or a module directly in tfcert/ (tests/import_graph.py draws the edges).
BOTTOM = {"tfcert.canonical", "tfcert.errors", "tfcert.files", "tfcert.process", "tfcert.progress", "tfcert.report"}
LIBRARY = {"tfcert.construct", "tfcert.audit", "tfcert.infoflow", "tfcert.experiments", "tfcert.export", "tfcert.shards"}
TOOLS = {"tfcert.bench", "tfcert.selftest"}
FACES = {"tfcert.cli", "tfcert.api", "tfcert.__main__"}
MAY_IMPORT = {
    "tfcert.verify": set(),
    **{r: {"tfcert.verify"} | BOTTOM for r in BOTTOM},
    **{r: {"tfcert.verify"} | BOTTOM | LIBRARY for r in LIBRARY | TOOLS},
    "tfcert.cli": {"tfcert.verify"} | BOTTOM | LIBRARY | TOOLS,  # everything but the notebook facade
    "tfcert.api": {"tfcert.verify", "tfcert.cli"} | BOTTOM | LIBRARY,  # tfcert.cli.plot draws a Bundle
    "tfcert.__main__": {"tfcert.cli"},
}


def test_every_room_has_rules():
    """A new subpackage or top-level module of tfcert needs its line in MAY_IMPORT."""
    from import_graph import modules, room

    assert {room(m) for m in modules(REPO)} - {None} == set(MAY_IMPORT)


def test_rooms_import_only_what_they_may():
    """The kernel imports no other room, the bottom only the kernel, the library and the tools
    never the command line or the notebook facade, the tools not each other."""
    from import_graph import edges

    bad = [f"{a} imports {b} ({n}×)" for (a, b), n in sorted(edges().items()) if b not in MAY_IMPORT.get(a, ())]
    assert bad == [], "\n".join(bad)


def test_the_rules_see_a_forbidden_import(tmp_path):
    """The graph itself: a library module importing the command line is an edge the rules refuse."""
    from import_graph import edges

    (tmp_path / "pyproject.toml").write_text('package-dir = {"tfcert" = "tfcert", "tfcert.construct" = "construct"}\n')
    for folder, text in (("tfcert", ""), ("tfcert/cli", ""), ("construct", "from ..cli import main\n")):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "__init__.py").write_text(text)
    assert dict(edges(tmp_path)) == {("tfcert.construct", "tfcert.cli"): 1}
    assert "tfcert.cli" not in MAY_IMPORT["tfcert.construct"]
