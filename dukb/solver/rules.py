"""Rule sets: loading, validating and compiling Horn rules over ``holds/3`` for clingo and for the numpy evaluator.

A rule set is a set of positive Horn rules (Wu et al. 2025, Sec. 2: ``B_1 ∧ ... ∧ B_n → A``) written in ASP over
``holds(S, R, O)`` ("O is S's R"), with the background predicates of the KB's schema (:mod:`dukb.kb.kbschema`: one
per entity type, plus the entity predicate true of every entity; the family schema's are ``male/1``, ``female/1``,
``person/1``) and the comparisons ``X = Y`` and ``X != Y`` as guards. A rule set is checked against one schema
(default: the family schema); a KB directory with a ``schema.yaml`` brings its own ``rules.lp``
(:func:`kb_rules`). Built-in sets live in ``dukb/data/rules``:

- ``family``: the 48 EDU-RELAT rules with the gender/irreflexivity guards of the spec;
- ``family_paper_compat``: the same with the two "newphe" rules dead, as in the paper's code.

A rule file is read by clingo's own parser (``clingo.ast.parse_string``; Potassco, clingo Python API, module
``clingo.ast``) and every statement is checked on its syntax tree; nothing is ever cut out of the text. The accepted
fragment (:func:`parse_rules`) is exactly what :mod:`dukb.solver.horn` compiles and what clingo grounds the same way:

- a rule ``holds(S,R,O) :- B_1, ..., B_n.`` with n >= 1 and at least one body atom ``holds(S,R,O)``;
- every body element a positive literal: ``holds(S,R,O)``, a background atom ``t(X)`` (family: ``male(X)``,
  ``female(X)``, ``person(X)``), or one comparison ``X = Y`` / ``X != Y``;
- S, O and the arguments of guards and comparisons are named variables; R is a named variable or one of the
  schema's relations (family: the 11 of :data:`dukb.kb.schema.RELATIONS`); a variable stands either for relations
  or for people, never both;
- every variable occurs in a ``holds`` atom of the body (safety).

Anything else is refused with ``FILE:LINE: problem`` (:class:`RulesError`): negation, choice, disjunction,
aggregates, conditional literals, classical negation, ordering comparisons, other predicates, facts, integrity
constraints, string/number/function terms, pools, intervals, arithmetic, ``_``, external calls (``@f``) and every
directive (``#include``, ``#external``, ``#const``, ``#show``, ``#program``, ``#script``, ...). ``#include`` is refused
before clingo could open its target: no other file is ever read, and no message quotes one.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

import clingo
from clingo import SymbolType, ast

from dukb import InputError
from dukb.kb.csvfile import decode_text, read_bytes
from dukb.kb.io import resolve_kb_path
from dukb.kb.kbschema import SCHEMA_FILE, Schema, family_schema
from dukb.kb.model import KB

if TYPE_CHECKING:  # for annotations only: the functions below import clingo themselves
    from clingo.ast import AST, ASTType

#: Names of the built-in rule sets.
BUILTIN_RULES = ("family", "family_paper_compat")
#: The help text of every ``--rules`` option (one wording for every command).
RULES_HELP = (
    "Rule set: 'family' (48 EDU-RELAT rules), 'family_paper_compat' (the paper code's, two 'newphe' "
    "rules dead) or a .lp file of positive Horn rules over holds(S,R,O). Default: the KB's own rules.lp "
    "when its directory has a schema.yaml, else family."
)

#: The file of a KB directory's own rule set (used when the directory has a schema.yaml and no rules are given).
KB_RULES_FILE = "rules.lp"
INSTANCE_PRED = "dukb_inst"
#: Largest rule file read, in bytes (the built-in ``family.lp`` has about 15 kB).
MAX_RULES_BYTES = 1 << 20
#: Deepest syntax tree a rule may have, in AST levels below the statement (a valid rule needs about 6: statement,
#: literal, atom, function, argument). Deeper terms are refused before clingo's recursive printer sees them.
MAX_TERM_DEPTH = 100
#: Most brackets and operators one statement of a rule file may hold (a rule of the family set has about 10; a rule
#: with 300 body atoms about 1000). clingo's parser builds, and frees, a syntax tree about as deep as this count
#: recursively in C++, and crashes the process (a segmentation fault) at about 100000 levels, so a statement above
#: the limit is refused on its text, before clingo parses it.
MAX_STATEMENT_OPERATORS = 5000

# clingo's parser opens the file of an ``#include`` while it lexes, before any statement reaches the callback (an
# included empty file leaves no trace in the syntax tree at all). So every ``#include`` token is replaced by a
# token of the same length that clingo's lexer refuses: in a comment nothing changes, outside one clingo reports a
# lexer error at that line, which is reported as the refused #include. No file is opened.
_INCLUDE = "#include"
_NO_INCLUDE = "#dukbinc"

_DIRECTIVES = {
    "Definition": "#const",
    "ShowSignature": "#show",
    "ShowTerm": "#show",
    "Minimize": "#minimize",
    "External": "#external",
    "Heuristic": "#heuristic",
    "Script": "#script",
    "Program": "#program",
    "ProjectAtom": "#project",
    "ProjectSignature": "#project",
    "Edge": "#edge",
    "Defined": "#defined",
    "TheoryDefinition": "#theory",
}


class RulesError(InputError):
    """A rule file is malformed or outside the accepted fragment (``FILE:LINE: problem`` in the message).

    Example:
        >>> err = RulesError("negation is not allowed", "my.lp", 3)
        >>> str(err), isinstance(err, InputError)
        ('my.lp:3: negation is not allowed', True)
    """


@dataclass(frozen=True)
class Rule:
    """One validated rule.

    Attributes:
        index: 0-based position in the rule set.
        text: the rule as written (normalised by clingo's printer).
        head: text of the head atom's arguments, e.g. ``"A,husband,B"``.
        body_holds: text of each ``holds`` body atom's arguments, in order.
        line: 1-based line in the source file.

    Example:
        >>> rule = parse_rules("holds(A,wife,B) :- holds(B,husband,A), female(B).")[0]
        >>> rule.head, rule.body_holds, rule.line
        ('A,wife,B', ('B,husband,A',), 1)
        >>> rule.text
        'holds(A,wife,B) :- holds(B,husband,A); female(B).'
    """

    index: int
    text: str
    head: str
    body_holds: tuple[str, ...]
    line: int


@dataclass(frozen=True)
class RuleSet:
    """A validated rule set and its clingo compilation.

    Attributes:
        name: built-in name or the file path.
        path: the .lp file.
        rules: the rules in file order.
        program: ASP text that derives ``holds/3`` and records every ground rule instance as
            ``dukb_inst(I, (S,R,O), ((S1,R1,O1), ...))`` (I = rule index).
        schema: the KB schema whose relations and background predicates the rules were checked against.

    Example:
        >>> family = load_rules("family")
        >>> family.name, len(family.rules), family.path.name
        ('family', 48, 'family.lp')
        >>> "dukb_inst(" in family.program, len(family.fingerprint)
        (True, 16)
    """

    name: str
    path: Path
    rules: tuple[Rule, ...]
    program: str
    schema: Schema = field(default_factory=family_schema, repr=False)

    def __len__(self) -> int:
        return len(self.rules)

    @property
    def fingerprint(self) -> str:
        """SHA-256 (first 16 hex digits) of the compiled program: two rule sets with the same fingerprint derive the
        same closure (comments and layout of the .lp file do not count)."""
        return hashlib.sha256(self.program.encode()).hexdigest()[:16]


def load_rules(name_or_file: str | Path = "family", schema: Schema | None = None) -> RuleSet:
    """Load, validate and compile a rule set, checked against a KB schema's relations and background predicates.

    The file is read through :func:`dukb.kb.csvfile.read_bytes` (only a regular file of at most
    :data:`MAX_RULES_BYTES` bytes; never a FIFO, device or directory) and parsed by :func:`parse_rules`.

    Args:
        name_or_file: ``"family"``, ``"family_paper_compat"`` or a path to a user ``.lp`` file.
        schema: the KB schema (None: the family schema).

    Returns:
        The :class:`RuleSet`.

    Raises:
        RulesError: no such rule file; not a regular file, too large or unreadable; not UTF-8 or a NUL byte; a
            clingo syntax error; a statement outside the accepted fragment (see :func:`parse_rules`). The message
            is ``FILE[:LINE]: problem``.

    Source: Wu et al. 2025, Sec. 2 (rules as Horn clauses); the built-in sets are EDU-RELAT's 48 family rules.

    Example:
        >>> load_rules().rules[0].text
        'holds(A,husband,B) :- holds(B,wife,A); male(B); female(A); A != B.'
        >>> load_rules("no_such_rules")
        Traceback (most recent call last):
            ...
        dukb.solver.rules.RulesError: ...
    """
    s = str(name_or_file)
    if s in BUILTIN_RULES:
        path = Path(str(resources.files("dukb.data").joinpath("rules", s + ".lp")))
    else:
        path = Path(s)
    try:
        text = decode_text(read_bytes(path, "rule file", limit=MAX_RULES_BYTES), path)
    except InputError as e:
        if e.message.startswith("missing "):
            raise RulesError(f"no such rule file (built-in rule sets: {', '.join(BUILTIN_RULES)})", path) from None
        raise RulesError(e.message, path, e.line) from None
    return _load_cached(s, str(path), text, family_schema() if schema is None else schema)


def default_rules(kb: str | Path | None) -> str:
    """The rule set a KB uses when none is given (every command's ``--rules`` left out): the path of its directory's
    ``rules.lp`` when that directory has a ``schema.yaml`` and a ``rules.lp``, else ``"family"`` (every KB without a
    schema, the built-in ones and the generated default, None: the rule set they have always used).

    The one resolution of the default: :func:`kb_rules` (the symbolic commands, the library) and the neural
    protocols' :meth:`dukb.neural.runconfig.RunConfig.check_run` (recorded in config.json) both call it.

    Args:
        kb: a KB directory or built-in name (:func:`dukb.kb.io.resolve_kb_path`), or None.

    Returns:
        ``str(DIR / "rules.lp")`` (the directory as given) or ``"family"``. A KB that cannot be found gives
        ``"family"``: loading it reports the problem.

    Source: Wu et al. 2025, Sec. 2 (a KB K comes with its rules R).

    Example:
        >>> default_rules(None), default_rules("demo")
        ('family', 'family')
    """
    if kb is None:
        return "family"
    try:
        root = resolve_kb_path(kb)
    except InputError:
        return "family"
    path = root / KB_RULES_FILE
    if os.path.lexists(root / SCHEMA_FILE) and os.path.lexists(path):
        return str(path)
    return "family"


def kb_rules(kb: KB) -> RuleSet:
    """The default rule set of a KB: the ``rules.lp`` of its directory when that directory has a ``schema.yaml``,
    else the built-in ``family`` set (every KB without a schema, as before schemas existed).

    Raises:
        RulesError: a KB with a schema other than the family one and no rules.lp beside it (give one with
            ``--rules``); the rules.lp is malformed (``FILE:LINE: problem``).

    Source: Wu et al. 2025, Sec. 2 (a KB K comes with its rules R).

    Example:
        >>> from dukb.kb.io import load_kb
        >>> kb_rules(load_kb("demo")).name
        'family'
    """
    root = kb.source
    spec = default_rules(root)
    if spec != "family":
        return load_rules(Path(spec), kb.schema)
    if kb.schema.is_family:
        return load_rules("family")
    raise RulesError(
        f"KB {root} has schema '{kb.schema.name}' and no {KB_RULES_FILE}: put its rules there or give --rules FILE"
    )


@lru_cache(maxsize=16)
def _load_cached(name: str, path_s: str, text: str, schema: Schema) -> RuleSet:
    path = Path(path_s)
    rules, program = _parse(text, path, schema)
    _check_grounds(program, path)
    return RuleSet(name, path, rules, program, schema)


def parse_rules(text: str, path: str | Path = "<rules>", schema: Schema | None = None) -> tuple[Rule, ...]:
    """Parse and validate the text of a rule file with clingo's parser.

    Args:
        text: the rule file's text.
        path: the file name used in messages.
        schema: the KB schema giving the relations and the background predicates (None: the family schema).

    Returns:
        The rules in file order (comments and clingo's implicit ``#program base.`` skipped).

    Raises:
        RulesError: ``FILE:LINE: problem`` for a clingo syntax error, an ``#include`` (refused without opening its
            target) or any other directive, or a rule outside the accepted fragment (module docstring): the line
            is the one of the offending statement or term in clingo's AST locations.

    Source: Wu et al. 2025, Sec. 2 (positive Horn rules); clingo's AST: Potassco, clingo Python API, ``clingo.ast``
    (``parse_string``, ``ASTType``, ``Location``).

    Example:
        >>> [r.head for r in parse_rules("holds(A,wife,B) :- holds(B,husband,A), female(B).")]
        ['A,wife,B']
        >>> parse_rules("holds(A,wife,B) :- holds(B,husband,A), not female(B).", "my.lp")
        Traceback (most recent call last):
            ...
        dukb.solver.rules.RulesError: my.lp:1: negation ('not female(B)') is not allowed: rules must be positive Horn
        rules
    """
    return _parse(text, Path(str(path)), family_schema() if schema is None else schema)[0]


def _parse(text: str, path: Path, schema: Schema) -> tuple[tuple[Rule, ...], str]:

    safe = text
    while _INCLUDE in safe:
        safe = safe.replace(_INCLUDE, _NO_INCLUDE)
    _check_operators(safe, path)
    messages: list[str] = []
    stmts: list = []
    try:
        ast.parse_string(safe, stmts.append, logger=lambda _code, msg: messages.append(msg), message_limit=20)
    except RuntimeError:
        raise _syntax_error(messages, path) from None
    rules: list[Rule] = []
    lines: list[str] = []
    for k, st in enumerate(stmts):
        line = st.location.begin.line
        if st.location.begin.filename != "<string>":  # pragma: no cover - no #include reaches the parser
            raise RulesError("#include is not allowed in a rule file", path)
        kind = st.ast_type
        if kind.name == "Comment" or (k == 0 and kind == ast.ASTType.Program and _implicit(st)):
            continue
        if kind != ast.ASTType.Rule:
            what = _DIRECTIVES.get(kind.name)
            what = f"a {what} directive" if what else f"a {_kind_name(kind)} statement"
            raise RulesError(f"only rules are allowed in a rule file, found {what}", path, line)
        rule, compiled = _check_rule(st, len(rules), path, schema)
        rules.append(rule)
        lines.append(compiled)
    if not rules:
        raise RulesError("the rule file contains no rules", path)
    program = "\n".join(lines) + f"\nholds(S,R,O) :- {INSTANCE_PRED}(_,(S,R,O),_).\n"
    return tuple(rules), program


# The text that matters for counting brackets and operators: block comments (nested, as clingo's lexer nests them),
# line comments, strings, the statement end ".", the interval "..", ":-" and ":~" (not operators), brackets and
# operators, line breaks. Inside a block comment only its delimiters and line breaks count.
_SCAN = re.compile(r'%\*|%[^\n]*|"(?:[^"\\\n]|\\.)*"?|\.\.|\.|:[-~]|[(\[{+\-*/\\&?^|~@]|\n')
_SCAN_BLOCK = re.compile(r"%\*|\*%|\n")


def _check_operators(text: str, path: Path) -> None:
    """Refuse a statement with more than :data:`MAX_STATEMENT_OPERATORS` brackets and operators, on the text alone.

    clingo's parser and its syntax tree's destructor recurse once per level of nesting (``f(f(...))``, ``-(-(...))``,
    ``A+A+...+A``), and a tree about 100000 levels deep crashes the process, so such a statement must never reach
    clingo. The count skips comments and strings, and starts again after every statement's final ``.``.

    Args:
        text: the rule file's text (``#include`` already neutralised).
        path: the file name used in messages.

    Returns:
        None.

    Raises:
        RulesError: ``FILE:LINE`` of the first such statement.
    """
    line, start, count, pos, n = 1, None, 0, 0, len(text)
    while pos < n:
        m = _SCAN.search(text, pos)
        gap = text[pos : n if m is None else m.start()]  # identifiers, numbers, commas, spaces
        if start is None and gap.strip():
            start = line + gap[: len(gap) - len(gap.lstrip())].count("\n")
        line += gap.count("\n")
        if m is None:
            break
        tok, pos = m.group(), m.end()
        if tok == "\n":
            line += 1
        elif tok == "%*":
            depth = 1
            while depth and pos < n:
                b = _SCAN_BLOCK.search(text, pos)
                if b is None:
                    pos = n
                    break
                line += text.count("\n", pos, b.end())
                depth += {"%*": 1, "*%": -1}.get(b.group(), 0)
                pos = b.end()
        elif tok.startswith("%"):
            continue
        elif tok == ".":
            start, count = None, 0
        else:
            if start is None:
                start = line
            if len(tok) == 1:  # a bracket or an operator (not a string, "..", ":-" or ":~")
                count += 1
                if count > MAX_STATEMENT_OPERATORS:
                    raise RulesError(
                        f"a statement holds more than {MAX_STATEMENT_OPERATORS} brackets and "
                        "operators (a term nested this deep is not allowed; rules use only variables "
                        "and relation names)",
                        path,
                        start,
                    )


def _implicit(st: AST) -> bool:
    """clingo's own ``#program base.``, the first statement of every parse (a ``#program base.`` written in the file
    comes after it, as a statement of its own)."""
    return st.name == "base" and not st.parameters


def _syntax_error(messages: list[str], path: Path) -> RulesError:
    """A clingo parser message as ``FILE:LINE: problem (column C)``; an #include (neutralised) as its refusal."""
    parsed = []
    for msg in messages:
        first = msg.strip().splitlines()[0] if msg.strip() else ""
        m = re.match(r"^<string>:(\d+):(\d+)(?:-[\d:]+)?:\s*(?:error:\s*)?(.*)$", first)
        if m:
            parsed.append((int(m.group(1)), int(m.group(2)), m.group(3)))
    for line, _col, text in parsed:
        if _NO_INCLUDE in text:
            return RulesError(
                "#include is not allowed in a rule file: put every rule in the file itself (the "
                "named file is not read)",
                path,
                line,
            )
    if parsed:
        line, col, text = parsed[0]
        return RulesError(f"{text} (column {col})", path, line)
    return RulesError("clingo could not parse the file", path)


def _kind_name(kind: ASTType) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", " ", kind.name).lower()


def _short(node: object, limit: int = 40) -> str:
    s = str(node)
    return s if len(s) <= limit else s[: limit - 3] + "..."


def _check_terms(st: AST, path: Path) -> None:
    """Refuse a statement with an external function call ``@f(...)`` (Python/Lua code in the grounder) or with a
    syntax tree nested more than :data:`MAX_TERM_DEPTH` levels deep (``male(f(f(...(A)...)))``).

    The walk is iterative (an explicit stack) and stops at the depth limit, so neither Python's recursion limit nor
    clingo's recursive printer (which crashes on terms nested ~100000 deep) is ever reached.

    Args:
        st: a clingo AST statement (``clingo.ast.AST``).
        path: the rule file, for messages.

    Returns:
        None.

    Raises:
        RulesError: ``FILE:LINE`` of the statement, for an external call or a too deeply nested term.
    """

    line = st.location.begin.line
    stack = [(st, 0)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_TERM_DEPTH:
            raise RulesError(
                f"a term is nested more than {MAX_TERM_DEPTH} levels deep; rules may use only "
                "variables (and relation names for R)",
                path,
                line,
            )
        if node.ast_type == ast.ASTType.Function and getattr(node, "external", False):
            raise RulesError("external function calls (@f(...)) are not allowed in rules", path, line)
        for key in node.child_keys:
            child = getattr(node, key)
            children = child if isinstance(child, (list, tuple, ast.ASTSequence)) else [child]
            stack.extend((c, depth + 1) for c in children if isinstance(c, ast.AST))


def _check_rule(st: AST, index: int, path: Path, schema: Schema) -> tuple[Rule, str]:
    """Validate one Rule statement against ``schema``; return the :class:`Rule` and its compiled clingo line."""

    relations, background = schema.relation_names, schema.background

    T = ast.ASTType
    line = st.location.begin.line
    head = st.head
    if head.ast_type != T.Literal or head.atom.ast_type != T.SymbolicAtom:
        what = {T.Disjunction: "a disjunction", T.Aggregate: "a choice rule", T.HeadAggregate: "an aggregate"}.get(
            head.ast_type, "not a plain atom"
        )
        if head.ast_type == T.Literal and head.atom.ast_type == T.BooleanConstant:
            what = "an integrity constraint"
        raise RulesError(
            f"rule head is {what}; only positive Horn rules with a holds(S,R,O) head are allowed", path, line
        )
    if head.sign != ast.Sign.NoSign:
        raise RulesError("negated rule head; only positive Horn rules are allowed", path, line)
    _check_terms(st, path)
    hsym = head.atom.symbol
    if not (hsym.ast_type == T.Function and hsym.name == "holds" and len(hsym.arguments) == 3):
        raise RulesError(
            f"rule head {_short(head)} is not holds(S,R,O); rules may derive only relationship facts", path, line
        )
    if not st.body:
        raise RulesError(f"{_short(st)} is a fact; facts belong in the KB, not in a rule file", path, line)
    rel_vars: set[str] = set()
    person_vars: set[str] = set()
    body_vars: set[str] = set()
    h = _holds_args(hsym, path, rel_vars, person_vars, relations)
    need = {v for v, is_var in h if is_var}
    body_holds: list[str] = []
    for lit in st.body:
        lline = lit.location.begin.line
        if lit.ast_type != T.Literal:
            raise RulesError(
                f"body element '{_short(lit)}' is a conditional literal; only plain atoms are allowed", path, lline
            )
        if lit.sign != ast.Sign.NoSign:
            raise RulesError(
                f"negation ('{_short(lit)}') is not allowed: rules must be positive Horn rules", path, lline
            )
        atom = lit.atom
        if atom.ast_type == T.Comparison:
            if len(atom.guards) != 1:
                raise RulesError(
                    f"chained comparison '{_short(lit)}': write one comparison per body element", path, lline
                )
            g = atom.guards[0]
            if g.comparison not in (ast.ComparisonOperator.Equal, ast.ComparisonOperator.NotEqual):
                raise RulesError(
                    f"ordering comparison '{_short(lit)}' is not allowed: names have no order; only X = Y and X != Y",
                    path,
                    lline,
                )
            for t in (atom.term, g.term):
                need.add(_variable(t, "a comparison", path, relations))
                person_vars.add(t.name)
            continue
        if atom.ast_type != T.SymbolicAtom:
            raise RulesError(
                f"body element '{_short(lit)}' is not allowed (no aggregates or theory atoms)", path, lline
            )
        sym = atom.symbol
        if sym.ast_type != T.Function:
            raise RulesError(f"body atom '{_short(lit)}' is not a predicate", path, lline)
        if sym.name == "holds" and len(sym.arguments) == 3:
            args = _holds_args(sym, path, rel_vars, person_vars, relations)
            body_vars |= {v for v, is_var in args if is_var}
            body_holds.append(",".join(v for v, _ in args))
        elif sym.name in background and len(sym.arguments) == 1:
            need.add(_variable(sym.arguments[0], f"{sym.name}/1", path, relations))
            person_vars.add(sym.arguments[0].name)
        else:
            unary = ", ".join(f"{b}/1" for b in background)
            raise RulesError(
                f"unknown predicate {sym.name}/{len(sym.arguments)} in '{_short(lit)}'; rules may use "
                f"holds/3, {unary} and the comparisons = and !=",
                path,
                lline,
            )
    if not body_holds:
        raise RulesError("rule body has no holds(S,R,O) atom", path, line)
    both = sorted(rel_vars & person_vars)
    if both:
        raise RulesError(f"variable {both[0]} stands both for a relation and for a person", path, line)
    unsafe = sorted(need - body_vars)
    if unsafe:
        raise RulesError(f"unsafe variable {unsafe[0]}: it occurs in no holds(S,R,O) atom of the body", path, line)
    head_s = ",".join(v for v, _ in h)
    body_src = "; ".join(str(lit) for lit in st.body)  # validated: variables, relations, holds/guards, = and !=
    body_args = ", ".join(f"({b})" for b in body_holds)
    # two spaces after ":-": the program text, hence RuleSet.fingerprint, of earlier dukb versions is kept
    compiled = f"{INSTANCE_PRED}({index},({head_s}),({body_args},)) :-  {body_src}."
    return Rule(index, str(st), head_s, tuple(body_holds), line), compiled


def _holds_args(
    sym: AST, path: Path, rel_vars: set[str], person_vars: set[str], relations: tuple[str, ...]
) -> list[tuple[str, bool]]:
    """The (text, is_variable) of the three arguments of a holds atom: S and O variables, R a variable or one of
    ``relations``."""
    s, r, o = sym.arguments
    where = f"the {{}} of {_short(sym)}"
    out = []
    for t, role in ((s, "subject"), (r, "relation"), (o, "object")):
        if role == "relation" and _is_constant(t):
            name = t.symbol.name
            if name not in relations:
                raise RulesError(
                    f"unknown relation '{name}' in {_short(sym)} (known: {', '.join(relations)})",
                    path,
                    t.location.begin.line,
                )
            out.append((name, False))
            continue
        v = _variable(t, where.format(role), path, relations)
        (rel_vars if role == "relation" else person_vars).add(v)
        out.append((v, True))
    return out


def _is_constant(t: AST) -> bool:

    return (
        t.ast_type == ast.ASTType.SymbolicTerm
        and t.symbol.type == SymbolType.Function
        and not t.symbol.arguments
        and t.symbol.positive
    )


def _variable(t: AST, where: str, path: Path, relations: tuple[str, ...]) -> str:
    """The name of a named variable term, or RulesError naming what the term is instead."""

    T = ast.ASTType
    line = t.location.begin.line
    if t.ast_type == T.Variable:
        if t.name == "_":
            raise RulesError(f"anonymous variable '_' in {where}: give every variable a name", path, line)
        return t.name
    if _is_constant(t):
        what = f"the constant '{t.symbol.name}'"
        if t.symbol.name in relations:
            what = f"the relation '{t.symbol.name}'"
    elif t.ast_type == T.SymbolicTerm and t.symbol.type == SymbolType.String:
        what = "a string constant"
    elif t.ast_type == T.SymbolicTerm and t.symbol.type == SymbolType.Number:
        what = f"the number {t.symbol.number}"
    elif t.ast_type == T.Function or (t.ast_type == T.SymbolicTerm and t.symbol.type == SymbolType.Function):
        what = f"the function term '{_short(t)}'"
    else:
        what = f"the term '{_short(t)}'"
    raise RulesError(
        f"{what} in {where} is not allowed: rules may use only variables (and relation names for R); "
        "a person is never named in a rule",
        path,
        line,
    )


def _check_grounds(program: str, path: Path) -> None:
    """Ground the compiled program on an empty KB once: clingo must accept what the validation let through."""

    messages: list[str] = []
    ctl = clingo.Control(["--warn=none"], logger=lambda _c, m: messages.append(m), message_limit=3)
    try:
        ctl.add("base", [], program)
        ctl.ground([("base", [])])
    except RuntimeError:  # pragma: no cover - the validation admits only programs clingo grounds
        first = messages[0].strip().splitlines()[0] if messages else "unknown error"
        raise RulesError(f"clingo refused the compiled rules: {first}", path) from None
