"""``tfcert report``: one self-contained HTML page of a verified bundle, for a reviewer who does not run
Python — the verdict, every phase and claim with its margin, the float bounds and the pictures. Nothing is
fetched: the CSS is inline and the pictures are data: URIs. Long rationals show a decimal approximation;
the exact value is in the number's title and in each claim's JSON (docs/guide.md#report)."""
from __future__ import annotations

import base64
import html
import json
import re

from flint import fmpq

from tfcert.errors import InputError
from tfcert.verify.check import Report, Result

CLAIM_PATH = re.compile(r"\$\.phases\[(\d+)\]\.claims\[(\d+)\]$")
SHORT = 14  # a rational this long or shorter is shown as it is

# claim kind -> (certificate field, what it measures): the distance the claim keeps
MARGINS = {"separation": ("min_gap", "least gap"), "hat": ("margin", "isolation margin"),
           "snap": ("radius", "plateau radius"), "float": ("bound", "error bound")}

CSS = """
body{font:15px/1.45 system-ui,sans-serif;margin:2em auto;max-width:72em;padding:0 1em;color:#1b1b1b}
h1{font-size:1.5em;margin-bottom:.2em} h2{margin-top:1.6em;border-bottom:1px solid #ccc}
.verdict{font-size:1.3em;font-weight:600;padding:.6em 1em;border-radius:6px;margin:1em 0}
.verdict.holds{background:#e3f4e1;color:#15591a;border:1px solid #9bd39a}
.verdict.fails{background:#fbe3e1;color:#8a1c12;border:1px solid #e79c93}
table{border-collapse:collapse;margin:.5em 0 1em;width:100%} th,td{text-align:left;padding:.25em .6em;
border-bottom:1px solid #e4e4e4;vertical-align:top} th{background:#f4f4f4}
td.ok{color:#15591a} td.bad{color:#8a1c12;font-weight:600} tr.fails{background:#fff4f2}
.num{border-bottom:1px dotted #888;cursor:help} code,pre{font:13px ui-monospace,monospace}
pre{white-space:pre-wrap;word-break:break-all;background:#f7f7f7;padding:.5em;margin:.3em 0}
details summary{cursor:pointer;color:#2a55a0} figure{margin:1em 0} img{max-width:100%;border:1px solid #ddd}
body.only-failures tr.holds{display:none} .muted{color:#666}
"""

SCRIPT = """
document.getElementById("only-failures").addEventListener("change", function (event) {
  document.body.classList.toggle("only-failures", event.target.checked);
});
document.body.setAttribute("data-script", "ran");
"""


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _rational(value: object) -> fmpq | None:
    from tfcert.verify.numbers import parse_number

    if isinstance(value, bool) or not isinstance(value, (int, str)):
        return None
    try:
        return parse_number(value, "")
    except InputError:
        return None


def number(x: fmpq) -> str:
    """A rational as HTML: as it is when short, else a decimal approximation with the exact value as title."""
    from tfcert.cli.plot import approx

    exact = str(x)
    if len(exact) <= SHORT:
        return f"<span class=\"exact\">{_e(exact)}</span>"
    shown = "0" if x == 0 else ("−" if x < 0 else "") + approx(abs(x))
    return f"<span class=\"num\" title=\"{_e(exact)}\">≈ {_e(shown)}</span>"


def margin(claim: dict) -> str:
    """The distance a claim keeps (HTML), or an empty string for a claim without one."""
    kind = claim.get("kind")
    if kind in MARGINS:
        key, what = MARGINS[kind]
        x = _rational(claim.get(key))
        return "" if x is None else f"{_e(what)} {number(x)}"
    if kind == "argmax":  # per sequence, per token: [argmax set, gap]
        gaps = [g for seq in claim.get("tokens") or [] if isinstance(seq, list) for t in seq
                if isinstance(t, list) and len(t) == 2 for g in [_rational(t[1])] if g is not None]
        return f"least argmax gap {number(min(gaps))}" if gaps else ""
    if kind == "tau_star":
        radius, noise = _rational(claim.get("radius")), _rational(claim.get("noise_bound"))
        if radius is None or noise is None:
            return ""
        return f"snap radius {number(radius)} − noise bound {number(noise)} = {number(radius - noise)}"
    if kind == "size" and isinstance(claim.get("bounds"), dict):
        return ", ".join(f"{_e(k)} {_e(claim.get(k))} ≤ {_e(v)}" for k, v in claim["bounds"].items())
    return ""


def _claim(cert: dict, r: Result) -> dict | None:
    found = CLAIM_PATH.search(r.where)
    if not found:
        return None
    try:
        claim = cert["phases"][int(found.group(1))]["claims"][int(found.group(2))]
    except (KeyError, IndexError, TypeError):
        return None
    return claim if isinstance(claim, dict) else None


def _row(cert: dict, r: Result) -> str:
    claim = _claim(cert, r)
    verdict = "<td class=\"ok\">holds</td>" if r.ok else "<td class=\"bad\">FAILS</td>"
    failures = "".join(f"<div>{_e(f)}</div>" for f in r.failures)
    raw = "" if claim is None else (f"<details><summary>exact claim</summary><pre>"
                                    f"{_e(json.dumps(claim, indent=1, ensure_ascii=False))}</pre></details>")
    block = "" if r.block is None else r.block
    where = r.where.rsplit(": ", 1)[-1]
    return (f"<tr class=\"{'holds' if r.ok else 'fails'}\"><td>{_e(r.kind)}</td><td>{_e(block)}</td>{verdict}"
            f"<td>{margin(claim) if claim else ''}{failures}</td><td><code>{_e(where)}</code>{raw}</td></tr>")


def _phases(cert: dict, report: Report) -> str:
    """One table per phase, in the certificate's order (integrity first); phases without claims are listed."""
    names = ["integrity"] + [str(p.get("name")) for p in cert.get("phases", []) if isinstance(p, dict)]
    spans = {str(p.get("name")): p.get("blocks") for p in cert.get("phases", []) if isinstance(p, dict)}
    by_phase: dict[str, list[Result]] = {}
    for r in report.results:
        by_phase.setdefault(r.phase, []).append(r)
    out = []
    for name in dict.fromkeys(names + list(by_phase)):
        results = by_phase.get(name, [])
        failed = sum(not r.ok for r in results)
        span = spans.get(name)
        blocks = f", blocks {_e(span[0])} … {_e(span[1])}" if isinstance(span, list) and len(span) == 2 else ""
        head = f"<h3 id=\"phase-{_e(name)}\">{_e(name)} <span class=\"muted\">({len(results)} claims" \
               f"{f', {failed} FAIL' if failed else ''}{blocks})</span></h3>"
        if not results:
            out.append(head + "<p class=\"muted\">no claims</p>")
            continue
        rows = "".join(_row(cert, r) for r in results)
        out.append(f"{head}<table><tr><th>claim</th><th>block</th><th>verdict</th><th>margin</th>"
                   f"<th>where</th></tr>{rows}</table>")
    return "\n".join(out)


def _floats(cert: dict, report: Report, scale: fmpq) -> str:
    rows = []
    for r in report.results:
        claim = _claim(cert, r)
        if r.kind != "float" or claim is None:
            continue
        bound = _rational(claim.get("bound"))
        relative = "" if bound is None else number(bound / scale)
        rows.append(f"<tr class=\"{'holds' if r.ok else 'fails'}\"><td>{_e(claim.get('format'))}</td>"
                    f"<td>{'' if bound is None else number(bound)}</td><td>{relative}</td>"
                    f"<td class=\"{'ok' if r.ok else 'bad'}\">{'proved' if r.ok else 'FAILS'}</td></tr>")
    if not rows:
        return "<p>The certificate makes no float claim: no bound on a float run is proved.</p>"
    return ("<p>Every coordinate of every output token of a float run in the format (inputs and parameters "
            "rounded once to nearest) lies within the bound of the exact output.</p><table><tr><th>format</th>"
            "<th>bound</th><th>relative to 1 + max|y|</th><th>verdict</th></tr>" + "".join(rows) + "</table>")


def _pictures(pictures, note: str | None) -> str:
    if pictures is None:
        return f"<p>Pictures not drawn: {_e(note)}</p>"
    out = [f"<figure><img alt=\"{_e(name)}\" src=\"data:image/png;base64,{base64.b64encode(data).decode()}\">"
           f"<figcaption>{_e(name)}.png</figcaption></figure>" for name, data in pictures.png.items()]
    out += [f"<p class=\"muted\">No {_e(name)} picture: {_e(why)}</p>" for name, why in pictures.skipped.items()]
    return "\n".join(out)


def page(docs: dict, report: Report, pictures=None, note: str | None = None) -> str:
    """The HTML of the report: ``docs`` the model, dataset and certificate Documents, ``report`` verify's
    result, ``pictures`` plot's ``Pictures`` (or None, with ``note`` saying why)."""
    from tfcert.verify.formats import read_dataset, read_model

    cert = docs["certificate"].value if isinstance(docs["certificate"].value, dict) else {}
    model, dataset = read_model(docs["model"]), read_dataset(docs["dataset"])
    scale = 1 + max((abs(v) for p in dataset.pairs for t in p.output for v in t), default=fmpq(0))
    failed = [r for r in report.results if not r.ok]
    if report.ok:
        verdict = f"<div id=\"verdict\" class=\"verdict holds\">VERIFIED: all {len(report.results)} claims hold</div>"
    else:
        verdict = (f"<div id=\"verdict\" class=\"verdict fails\">NOT VERIFIED: {len(failed)} of "
                   f"{len(report.results)} claims fail</div><ul>" +
                   "".join(f"<li><a href=\"#phase-{_e(r.phase)}\">{_e(r.phase)}/{_e(r.kind)}</a>: "
                           f"{_e('; '.join(r.failures))}</li>" for r in failed) + "</ul>")
    tau = "" if model.attention != "softmax" else f"<tr><th>temperature τ</th><td>{number(model.temperature)}</td></tr>"
    files = "".join(f"<tr><th>{_e(slot)}</th><td><code>{_e(doc.path)}</code> <span class=\"muted\">sha256 "
                    f"{_e(doc.sha256)}</span></td></tr>" for slot, doc in docs.items())
    tokens = sum(len(p.input) for p in dataset.pairs)
    summary = (f"<table>{files}<tr><th>attention</th><td>{_e(model.attention)}</td></tr>{tau}"
               f"<tr><th>theorem</th><td>{_e(cert.get('theorem', ''))}</td></tr>"
               f"<tr><th>model</th><td>d = {model.d}, {len(model.blocks)} blocks</td></tr>"
               f"<tr><th>dataset</th><td>{len(dataset.pairs)} sequences, {tokens} tokens</td></tr></table>")
    warnings = "".join(f"<p class=\"muted\">warning: {_e(w)}</p>" for w in report.warnings)
    title = f"tfcert report: {docs['certificate'].path}"
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{_e(title)}</title>
<style>{CSS}</style>
</head>
<body class="{'verified' if report.ok else 'not-verified'}">
<h1>{_e(title)}</h1>
{verdict}
{warnings}
<h2>Bundle</h2>
{summary}
<h2>Float bounds</h2>
{_floats(cert, report, scale)}
<h2>Phases and claims</h2>
<p><label><input type="checkbox" id="only-failures"> show failing claims only</label>
<span class="muted">— a long number shows a decimal approximation; hover it for the exact value, or open
“exact claim”.</span></p>
{_phases(cert, report)}
<h2>Pictures</h2>
{_pictures(pictures, note)}
<script>{SCRIPT}</script>
</body>
</html>
"""
