"""What README.md, bench/RESULTS.md and docs/**/*.md cite exists (issue: results that cannot vanish).

A fast check (no model, no torch import beyond the CLI's light catalog) that fails when a document names
something that is not there. Each rule below returns a list of problems ``FILE:LINE: what`` and the tests assert
that list is empty, so a failure names every broken reference at once.

Rules
-----
1. **Sections of bench/RESULTS.md.** A section is *cited* when
   - a quoted name follows a mention of ``RESULTS`` / ``RESULTS.md`` (``bench/RESULTS.md, "Attacks"``,
     ``RESULTS "On a GPU"``, ``bench/RESULTS.md`` ("A" and "B")): the quoted names right after it, joined by
     ``,``, ``;``, ``and`` or ``or``;
   - a description follows a RESULTS mention as ``bench/RESULTS.md, the section on X`` (X up to the next ``.``,
     ``,``, ``;``, ``:`` or ``)``; ``X and on Y`` names two sections): every word of X except ``the a an of on in
     at and with for to by``, without backticks and a plural ``s``, must be a word of one heading or of the
     ``##`` section above it;
   - a markdown link points at RESULTS.md with an anchor (``bench/RESULTS.md#attacks``,
     ``[..](../bench/RESULTS.md#x)``);
   - inside any document, a quoted name followed by ``above`` or ``below`` (``"On a GPU" below``) or a link
     ``(#anchor)`` names a section of that same document.
   A cited name exists when, after normalising both (markdown links reduced to their text, backticks and ``*``
   removed, typographic apostrophes made plain, whitespace collapsed, case folded, a leading section number such
   as ``3`` or ``3.2`` dropped, trailing ``.:,;`` dropped), it equals a heading or is the start of one followed
   by a separator (space, ``:``, ``,``, ``;``, ``(``, ``.``, ``?`` or a dash); ``...`` in a cited name stands for
   any text. An anchor exists when it is the GitHub slug or the mkdocs (python-markdown ``toc``) slug of a
   heading, with either generator's suffix for a repeated heading (``-1`` / ``_1``). Headings inside fenced code
   are not headings.
2. **Repository files.** Every relative markdown link (outside fenced code) must resolve from the document's
   folder; every path beginning ``bench/``, ``tests/``, ``docs/``, ``neural/``, ``cli/``, ``data/``, ``kb/``,
   ``solver/`` or ``.ci/`` (in prose, inline code and code blocks, not preceded by another path segment, so
   ``../shared/x`` and ``/work/x`` are not repository paths) and every bare ``LICENSE``, ``CITATION.cff``,
   ``CHANGELOG.md``, ``mkdocs.yml`` must exist in the repository. Not paths: patterns (``*``, ``<name>``,
   ``{a,b}``, ``$VAR``), pytest node ids' ``::name`` tails, and placeholders a tutorial asks the reader to create
   (a segment starting ``my`` or ``your``: ``neural/methods/mymethod.py``). A link to a page that mkdocs.yml's
   ``nav`` declares counts as existing: reference pages are generated at build time, and the strict mkdocs build
   checks those links.
3. **Commands.** In fenced code blocks and inline code spans (shell comments removed), every ``dukb SUBCOMMAND``
   (also ``python -m dukb.cli.main SUBCOMMAND``) must be a registered command, and every ``--flag`` after it on
   the same command line must be listed by that command's ``--help`` (``--help`` itself always is). The commands
   of bench/RESULTS.md's "Superseded runs" section (records of their time, headings marked ``(superseded``) are
   held to the first half only. The segment splitter and option table are tests/docs/test_readme.py's.
4. **README's figures are in RESULTS.** In README's prose and tables (fenced code, inline code, link targets,
   HTML comments and the generated ``<!-- dukb methods -->`` block left out), a *figure* is
   - an ``A ± B`` pair (each a number): the same pair, whitespace aside, must appear in bench/RESULTS.md;
   - a decimal with two or more digits after the point (``0.78``, ``0.996``, ``363.62``) that is not part of a
     dotted version (``2.13.0``) or a word (``x1.25y``): the same digits must appear in bench/RESULTS.md, not
     adjacent to another digit (so ``0.50`` is not found in ``10.50`` or ``0.505``).
   Integers and one-digit decimals (timings such as ``79 s``, ``5.3 h``) are not figures for this rule.
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

import pytest
from test_readme import COMMAND, FLAG, _options, _segments

from conftest import REPO_ROOT

RESULTS = REPO_ROOT / "bench" / "RESULTS.md"
README = REPO_ROOT / "README.md"


def documents(root: Path = REPO_ROOT) -> list[Path]:
    """README.md, bench/RESULTS.md and every docs/**/*.md that exists under ``root``."""
    docs = [root / "README.md", root / "bench" / "RESULTS.md"]
    docs += sorted((root / "docs").rglob("*.md")) if (root / "docs").is_dir() else []
    return [p for p in docs if p.is_file()]


# ----------------------------------------------------------------------------------------------------------------
# Markdown structure


_FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", flags=re.S | re.M)


def blank(text: str, pattern: re.Pattern | str, flags: int = 0) -> str:
    """``text`` with every match of ``pattern`` replaced by spaces (newlines kept), so offsets and lines stay."""
    return re.sub(pattern, lambda m: re.sub(r"[^\n]", " ", m.group(0)), text, flags=flags)


def prose(text: str) -> str:
    """``text`` without fenced code blocks and HTML comments (blanked, offsets kept)."""
    return blank(blank(text, _FENCE), r"<!--.*?-->", re.S)


def line_of(text: str, offset: int) -> int:
    """1-based line number of ``offset`` in ``text``."""
    return text.count("\n", 0, offset) + 1


def headings(text: str) -> list[str]:
    """ATX headings (``#`` to ``######``) outside fenced code, as written (without the hashes)."""
    return [m.group(1).strip() for m in re.finditer(r"^#{1,6}[ \t]+(.+?)[ \t#]*$", prose(text), flags=re.M)]


def normalise(name: str) -> str:
    """A heading or cited name reduced for comparison (rule 1)."""
    s = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", name)
    s = s.replace("`", "").replace("*", "").replace("\u2019", "'").replace("\u2018", "'")
    s = re.sub(r"\s+", " ", s).strip().casefold()
    s = re.sub(r"^\d+(?:\.\d+)*\.?\s+", "", s)
    return s.rstrip(".:,; ")


def section_exists(cited: str, heads: list[str]) -> bool:
    """Whether a cited section name matches one of ``heads`` (rule 1)."""
    c = normalise(cited)
    parts = [p.strip() for p in re.split(r"\.\.\.|\u2026", c)]
    for h in map(normalise, heads):
        if len(parts) > 1:
            if not h.startswith(parts[0]):
                continue
            pos, ok = len(parts[0]), True
            for p in parts[1:]:
                pos = h.find(p, pos)
                if pos < 0:
                    ok = False
                    break
                pos += len(p)
            if ok:
                return True
        elif h == c or (h.startswith(c) and h[len(c)] in " :,;(.?-\u2013\u2014"):
            return True
    return False


def github_slug(heading: str) -> str:
    """GitHub's anchor for a heading: markdown stripped, lower case, punctuation dropped, spaces to hyphens."""
    s = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).strip().lower()
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")


def mkdocs_slug(heading: str) -> str:
    """python-markdown ``toc``'s default anchor (what mkdocs uses): ASCII only, runs of spaces/hyphens to one."""
    s = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    s = unicodedata.normalize("NFKD", s).encode("ascii", "ignore").decode("ascii")
    s = re.sub(r"[^\w\s-]", "", s).strip().lower()
    return re.sub(r"[-\s]+", "-", s)


def anchors(heads: list[str]) -> set[str]:
    """Every anchor either generator gives ``heads``, repeated headings included (``x-1`` / ``x_1``)."""
    out: set[str] = set()
    for slug, sep in ((github_slug, "-"), (mkdocs_slug, "_")):
        seen: dict[str, int] = {}
        for h in heads:
            s = slug(h)
            n = seen.get(s, 0)
            out.add(s if n == 0 else f"{s}{sep}{n}")
            seen[s] = n + 1
    return out


# ----------------------------------------------------------------------------------------------------------------
# Rule 1: sections


_QUOTED = r'"([^"\n]+(?:\n[^"\n]+)?)"'
_RESULTS_CITE = re.compile(
    r"RESULTS(?:\.md)?[`'*]*\s*[,:;]?\s*\(?\s*"
    + _QUOTED
    + r'((?:\s*(?:,|;|\band\b|\bor\b)\s*"[^"\n]+(?:\n[^"\n]+)?")*)'
)
_LINK = re.compile(r"!?\[(?:[^\]\n]|\n(?!\n))*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_REF_LINK = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$", flags=re.M)


_RESULTS_ON = re.compile(
    r"RESULTS(?:\.md)?[`'*]*\s*[,:;]?\s*\(?\s*the\s+sections?\s+on\s+"
    r"([^.,;:)\n]+(?:\n[^.,;:)\n]+)?)"
)
_STOP = {"the", "a", "an", "of", "on", "in", "at", "and", "with", "for", "to", "by"}


def _words(s: str) -> set[str]:
    return {w[:-1] if len(w) > 3 and w.endswith("s") else w for w in re.findall(r"[\w-]+", normalise(s))} - _STOP


def described_results_sections(text: str) -> list[tuple[int, str]]:
    """(offset, description) of each ``RESULTS.md, the section on X``."""
    out = []
    for m in _RESULTS_ON.finditer(prose(text)):
        pos = m.start(1)
        for part in re.split(r"(\s+and\s+(?:the\s+sections?\s+)?on\s+)", m.group(1)):
            if not re.fullmatch(r"\s+and\s+(?:the\s+sections?\s+)?on\s+", part):
                out.append((pos, part))
            pos += len(part)
    return out


def section_described(description: str, text: str) -> bool:
    """Whether some heading of ``text`` (with its ``##`` section's heading) holds every word of ``description``."""
    want, top = _words(description), ""
    for m in re.finditer(r"^(#{1,6})[ \t]+(.+?)[ \t#]*$", prose(text), flags=re.M):
        top = m.group(2) if len(m.group(1)) <= 2 else top
        if want <= _words(m.group(2)) | _words(top):
            return True
    return False


def cited_results_sections(text: str) -> list[tuple[int, str]]:
    """(offset, name) of each RESULTS section named by a quoted name after a RESULTS mention."""
    out = []
    for m in _RESULTS_CITE.finditer(prose(text)):
        out.append((m.start(1), m.group(1)))
        out += [(m.start(2) + k.start(1), k.group(1)) for k in re.finditer(_QUOTED, m.group(2))]
    return out


def cited_own_sections(text: str) -> list[tuple[int, str]]:
    """(offset, name) of each ``"Name" above`` / ``"Name" below`` reference to the same document."""
    return [(m.start(1), m.group(1)) for m in re.finditer(_QUOTED + r"\)?,?\s+(?:above|below)\b", prose(text))]


def links(text: str) -> list[tuple[int, str]]:
    """(offset, target) of each inline or reference-style markdown link outside fenced code."""
    p = blank(prose(text), r"`[^`\n]+`")
    return [(m.start(1), m.group(1)) for m in _LINK.finditer(p)] + [
        (m.start(1), m.group(1)) for m in _REF_LINK.finditer(p)
    ]


def section_problems(path: Path, text: str, results_text: str, root: Path = REPO_ROOT) -> list[str]:
    """Rule 1 for one document: cited RESULTS sections, own-section references and link anchors."""
    rel = path.relative_to(root) if path.is_relative_to(root) else path
    res_heads = headings(results_text)
    own_heads = headings(text)
    bad = []
    for off, name in cited_results_sections(text):
        if not section_exists(name, res_heads):
            bad.append(f"{rel}:{line_of(text, off)}: bench/RESULTS.md has no section {name!r}")
    for off, desc in described_results_sections(text):
        if not section_described(desc, results_text):
            bad.append(f"{rel}:{line_of(text, off)}: bench/RESULTS.md has no section on {desc!r}")
    for off, name in cited_own_sections(text):
        if not section_exists(name, own_heads):
            bad.append(f"{rel}:{line_of(text, off)}: no section {name!r} in this document")
    for off, target in links(text):
        if re.match(r"[a-z][a-z0-9+.-]*:", target, flags=re.I) or "#" not in target:
            continue
        file_part, anchor = target.split("#", 1)
        dest = (path.parent / file_part).resolve() if file_part else None
        if dest is not None and (not dest.is_file() or dest.suffix != ".md"):
            continue  # a missing file is rule 2's; anchors are checked in markdown files only
        heads = own_heads if dest is None or dest == path.resolve() else headings(dest.read_text(encoding="utf-8"))
        if anchor not in anchors(heads):
            bad.append(f"{rel}:{line_of(text, off)}: no section with anchor #{anchor} in {file_part or rel}")
    return bad


# ----------------------------------------------------------------------------------------------------------------
# Rule 2: files


_PATH = re.compile(r"(?<![\w./~$-])((?:bench|tests|docs|neural|cli|data|kb|solver|\.ci)/[\w.\-/]*)")
_PLACEHOLDER = re.compile(r"(?:^|/)(?:my|your)[\w.-]*(?:/|$)")  # a file a tutorial asks the reader to write
_BARE = re.compile(r"(?<![\w./-])(LICENSE|CITATION\.cff|CHANGELOG\.md|mkdocs\.yml)(?![\w-]|\.\w)")


def named_paths(text: str) -> list[tuple[int, str]]:
    """(offset, path) of every repository path a document names (rule 2), patterns left out."""
    out = []
    for m in _PATH.finditer(text):
        path, after = m.group(1), text[m.end() : m.end() + 1]
        if after in "*<{$" and after != "" or "*" in path or _PLACEHOLDER.search(path):
            continue
        if text[max(0, m.start() - 2) : m.start()] == "](":
            continue  # a link target: checked as a link, relative to the document's folder
        path = path.rstrip(".-")
        out.append((m.start(1), path))
    out += [(m.start(1), m.group(1)) for m in _BARE.finditer(text)]
    return out


def site_pages(root: Path = REPO_ROOT) -> set[Path]:
    """The pages mkdocs.yml's ``nav`` declares, as paths under ``root/docs`` (empty without mkdocs.yml). Some are
    generated at build time (reference pages made from the registries), so they need not exist on disk; the strict
    mkdocs build checks them."""
    cfg = root / "mkdocs.yml"
    if not cfg.is_file():
        return set()
    nav = cfg.read_text(encoding="utf-8").partition("\nnav:")[2]
    nav = re.split(r"^\S", nav, maxsplit=1, flags=re.M)[0]  # up to the next top-level key
    return {(root / "docs" / m).resolve() for m in re.findall(r"([\w./-]+\.md)\s*$", nav, flags=re.M)}


def file_problems(path: Path, text: str, root: Path = REPO_ROOT) -> list[str]:
    """Rule 2 for one document: named repository paths and relative links that do not exist."""
    rel = path.relative_to(root) if path.is_relative_to(root) else path
    pages = site_pages(root)
    bad = []
    for off, name in named_paths(text):
        if not (root / name).exists():
            bad.append(f"{rel}:{line_of(text, off)}: names {name}, which does not exist")
    for off, target in links(text):
        if re.match(r"[a-z][a-z0-9+.-]*:", target, flags=re.I) or target.startswith("#"):
            continue
        file_part = target.split("#", 1)[0]
        if not (path.parent / file_part).exists() and (path.parent / file_part).resolve() not in pages:
            bad.append(f"{rel}:{line_of(text, off)}: links to {file_part}, which does not exist")
    return bad


# ----------------------------------------------------------------------------------------------------------------
# Rule 3: commands and flags


def command_lines(text: str) -> list[str]:
    """Command lines of code blocks and inline code spans (tests/docs/test_readme.py's splitter), shell comments
    removed, split at ``&&``, ``||``, ``;`` and ``|``."""
    out = []
    for seg in _segments(text):
        seg = re.sub(r"(?:^|\s)#.*$", "", seg)
        out += [part for part in re.split(r"&&|\|\||;|\|", seg) if part.strip()]
    return out


def split_superseded(text: str) -> tuple[str, str]:
    """``text`` split into what lies outside and inside sections whose heading says ``(superseded`` (rule 3)."""
    current, superseded, inside, level = [], [], False, 0
    for block in re.split(r"(?m)^(?=#{1,6} )", text):
        m = re.match(r"(#{1,6}) ", block)
        if m and inside and len(m.group(1)) <= level and "(superseded" not in block.split("\n", 1)[0]:
            inside = False
        if m and not inside and "(superseded" in block.split("\n", 1)[0]:
            inside, level = True, len(m.group(1))
        (superseded if inside else current).append(block)
    return "".join(current), "".join(superseded)


def command_problems(rel: str, text: str, options: dict[str, set[str]], flags: bool = True) -> list[str]:
    """Rule 3 for one document: unknown subcommands and, when ``flags``, options a subcommand lacks."""
    bad = []
    for part in command_lines(text):
        m = COMMAND.search(part)
        if not m:
            continue
        cmd = m.group(1)
        if cmd not in options:
            bad.append(f"{rel}: `dukb {cmd}` is not a command (in {part.strip()[:80]!r})")
        elif flags:
            bad += [
                f"{rel}: `dukb {cmd}` has no option {f} (in {part.strip()[:80]!r})"
                for f in FLAG.findall(part[m.end() :])
                if f not in options[cmd] | {"--help"}
            ]
    return sorted(set(bad))


# ----------------------------------------------------------------------------------------------------------------
# Rule 4: README's figures


_PM = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)\s*±\s*(\d+(?:\.\d+)?)(?![\w]|\.\d)")
_DEC = re.compile(r"(?<![\w.])(\d+\.\d{2,})(?![\w]|\.\d)")


def figure_text(text: str) -> str:
    """README's prose and tables for rule 4: code, link targets, comments and the generated block blanked."""
    t = blank(text, r"<!-- dukb methods -->.*?<!-- /dukb methods -->", re.S)
    t = blank(prose(t), r"`[^`\n]+`")
    return blank(t, r"\]\([^)\s]*\)")


def figures(text: str) -> list[tuple[int, str]]:
    """(offset, figure) of each figure of rule 4: ``A ± B`` pairs, then decimals with 2+ digits after the point."""
    t = figure_text(text)
    out = [(m.start(), f"{m.group(1)} ± {m.group(2)}") for m in _PM.finditer(t)]
    return out + [(m.start(1), m.group(1)) for m in _DEC.finditer(t)]


def figure_in(fig: str, results_text: str) -> bool:
    """Whether ``fig`` appears in ``results_text`` (whitespace around ± free, not adjacent to another digit)."""
    body = r"\s*±\s*".join(re.escape(x) for x in fig.split(" ± "))
    return re.search(r"(?<!\d)(?<!\d\.)" + body + r"(?!\d)", results_text) is not None


def figure_problems(rel: str, text: str, results_text: str) -> list[str]:
    """Rule 4: README's figures that bench/RESULTS.md lacks."""
    return [
        f"{rel}:{line_of(text, off)}: figure {fig} is not in bench/RESULTS.md"
        for off, fig in figures(text)
        if not figure_in(fig, results_text)
    ]


# ----------------------------------------------------------------------------------------------------------------
# The checker on small synthetic documents


RES = """# Results
## Attacks: does the fact come back?
### SmolLM2-135M: all five attacks (4 targets)
Figure 0.50 ± 0.24 and 0.78 at 0.996; Python 3.11.7.
## On a GPU: the suite (2026-11-26)
### The du presets (DU_GA_GDR, DU_NPO_GDR) on the 55 targets
```bash
# ## not a heading
```
"""


@pytest.mark.parametrize(
    "doc,ok",
    [
        ('See bench/RESULTS.md, "Attacks", for the table.', True),
        ('See `bench/RESULTS.md` ("SmolLM2-135M: all five attacks") too.', True),
        ('See RESULTS "On a GPU".', True),
        ('See bench/RESULTS.md ("on a gpu" and "Attacks").', True),
        ('See bench/RESULTS.md, "The du presets ... on the 55 targets".', True),
        ('See bench/RESULTS.md, "The\ndu presets (DU_GA_GDR".', True),
        ('See bench/RESULTS.md, "Citable numbers".', False),
        ('See bench/RESULTS.md ("Attacks" and "Hardening").', False),
        ('See bench/RESULTS.md, "Attack".', False),  # a prefix must end at a separator
        ('See bench/RESULTS.md, "not a heading".', False),  # headings inside code blocks do not count
        ("See [the attacks](bench/RESULTS.md#attacks-does-the-fact-come-back).", True),
        ("See [GPU](bench/RESULTS.md#on-a-gpu-the-suite-2026-11-26).", True),
        ("See [GPU](bench/RESULTS.md#on-a-gpu).", False),
        ('```bash\n# bench/RESULTS.md, "Nothing" in a code block is not prose\n```', True),
        ("See bench/RESULTS.md, the section on GPUs.", True),
        ("See bench/RESULTS.md, the section on the\nattacks of SmolLM2-135M).", True),
        ("See `bench/RESULTS.md`, the section on `du` presets; or", True),
        ("See bench/RESULTS.md, the section on TPUs.", False),
        ("See bench/RESULTS.md, the section on GPUs and on attacks.", True),
        ("See bench/RESULTS.md, the section on GPUs and on TPUs.", False),
        ("See bench/RESULTS.md, the section on attacks on GPUs.", False),  # the words must be under one heading
    ],
)
def test_results_section_rule(tmp_path, doc, ok):
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "RESULTS.md").write_text(RES, encoding="utf-8")
    (tmp_path / "README.md").write_text(doc, encoding="utf-8")
    bad = section_problems(tmp_path / "README.md", doc, RES, root=tmp_path)
    assert (bad == []) is ok, bad


def test_own_section_and_anchor_rule(tmp_path):
    doc = (
        '# T\n## Closed-loop deep unlearning\nAs in "Closed-loop deep unlearning" below, '
        "[x](#closed-loop-deep-unlearning).\n"
    )
    assert section_problems(tmp_path / "a.md", doc, RES, root=tmp_path) == []
    bad = section_problems(tmp_path / "a.md", doc + '"Open loop" above; [y](#open-loop).\n', RES, root=tmp_path)
    assert len(bad) == 2 and "'Open loop'" in bad[0] and "#open-loop" in bad[1]


def test_anchor_slugs_of_both_generators():
    heads = ["`dukb finetune` under FSDP2 (2026-11-27)", "The main job", "The main job", "Café — ok"]
    a = anchors(heads)
    assert {"dukb-finetune-under-fsdp2-2026-11-27", "the-main-job", "the-main-job-1", "the-main-job_1"} <= a
    assert {"café--ok", "cafe-ok"} <= a


def test_file_rule(tmp_path):
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "x.py").write_text("", encoding="utf-8")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("", encoding="utf-8")
    doc = (
        "Run `python bench/x.py` (tests/kb/test_x.py::t is a node id of a missing file); see ../shared/kb/x, "
        "/work/bench/y.py, tests/*/test_*.py, neural/protocols/<name>/run.py, neural/methods/mymethod.py and "
        "[a](docs/a.md#s), [b](docs/b.md), "
        "[w](https://example.org/bench/z.py). LICENSE and CITATION.cff.\n```bash\npython bench/gone.py\n```\n"
    )
    bad = file_problems(tmp_path / "README.md", doc, root=tmp_path)
    assert sorted(b.split(": ", 1)[1] for b in bad) == [
        "links to docs/b.md, which does not exist",
        "names CITATION.cff, which does not exist",
        "names LICENSE, which does not exist",
        "names bench/gone.py, which does not exist",
        "names tests/kb/test_x.py, which does not exist",
    ]


def test_generated_site_pages_count_as_existing(tmp_path):
    (tmp_path / "docs" / "guide").mkdir(parents=True)
    (tmp_path / "mkdocs.yml").write_text(
        "site_name: x\nnav:\n  - Home: index.md\n  - Reference:\n      - Commands: reference/cli.md\nplugins: []\n",
        encoding="utf-8",
    )
    doc = "[cli](../reference/cli.md#evaluate), [gone](../reference/gone.md)\n"
    bad = file_problems(tmp_path / "docs" / "guide" / "a.md", doc, root=tmp_path)
    assert [b.split(": ", 1)[1] for b in bad] == ["links to ../reference/gone.md, which does not exist"]


def test_command_rule():
    options = {"evaluate": {"--kb", "--methods", "-o"}, "report": set()}
    doc = (
        "```bash\nOMP_NUM_THREADS=1 dukb evaluate --kb x --methods ga -o y   # dukb at 6c2af07, --not-a-flag\n"
        "dukb evaluate --help\n"
        "python -m dukb.cli.main evaluate --kb x \\\n  --gone 1 && dukb report y\ndukb evalute --kb x\n```\n"
        "Inline `dukb report --x` and plain prose dukb is fine.\n"
    )
    bad = command_problems("R.md", doc, options)
    assert len(bad) == 3
    assert any("has no option --gone" in b for b in bad) and any("has no option --x" in b for b in bad)
    assert any("`dukb evalute` is not a command" in b for b in bad)
    assert len(command_problems("R.md", doc, options, flags=False)) == 1
    cur, old = split_superseded(
        "# R\n## A\ndukb evaluate --kb x\n## Old (superseded)\n### B (superseded)\n"
        "dukb evaluate --gone\n## C\n`dukb report`\n"
    )
    assert "--gone" in old and "--gone" not in cur and "## C" in cur and "## A" in cur


def test_figure_rule():
    doc = (
        "GA reaches 0.50 ± 0.24 and DU_CL 0.78 at 0.996; torch 2.13.0 and Python 3.11; 5.3 h; `--lr 0.123`.\n"
        "| m | v |\n|---|---|\n| x | 0.505 |\n```\n0.999\n```\nAlso 0.51 ± 0.24 and 10.50.\n"
    )
    figs = [f for _, f in figures(doc)]
    assert figs == [
        "0.50 ± 0.24",
        "0.51 ± 0.24",
        "0.50",
        "0.24",
        "0.78",
        "0.996",
        "3.11",
        "0.505",
        "0.51",
        "0.24",
        "10.50",
    ]
    bad = figure_problems("README.md", doc, RES)
    assert [b.split("figure ")[1].split(" is")[0] for b in bad] == ["0.51 ± 0.24", "0.505", "0.51", "10.50"]


# ----------------------------------------------------------------------------------------------------------------
# The checker on the repository's documents


DOCS = documents()
RESULTS_TEXT = RESULTS.read_text(encoding="utf-8")


def _id(p: Path) -> str:
    return str(p.relative_to(REPO_ROOT))


def test_the_documents_are_found():
    assert README in DOCS and RESULTS in DOCS
    assert len(headings(RESULTS_TEXT)) > 25  # the parser sees RESULTS' sections


@pytest.mark.parametrize("path", DOCS, ids=_id)
def test_cited_sections_exist(path):
    text = path.read_text(encoding="utf-8")
    assert section_problems(path, text, RESULTS_TEXT) == []


@pytest.mark.parametrize("path", DOCS, ids=_id)
def test_named_files_exist(path):
    text = path.read_text(encoding="utf-8")
    assert file_problems(path, text) == []


@pytest.mark.parametrize("path", DOCS, ids=_id)
def test_shown_commands_exist(path):
    text = path.read_text(encoding="utf-8")
    current, superseded = split_superseded(text)
    options = _options()
    assert (
        command_problems(_id(path), current, options) + command_problems(_id(path), superseded, options, flags=False)
        == []
    )


def test_readme_figures_are_in_results():
    text = README.read_text(encoding="utf-8")
    assert len(figures(text)) > 0 or "±" not in text
    assert figure_problems("README.md", text, RESULTS_TEXT) == []
