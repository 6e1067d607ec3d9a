"""Rule sets: loading, validating and compiling Horn rules over ``holds/3`` for clingo.

A rule set is a set of positive Horn rules (Wu et al. 2025, Sec. 2: ``B_1 ∧ ... ∧ B_n → A``) written in ASP over
``holds(S, R, O)`` ("O is S's R"), with the background predicates ``male/1``, ``female/1``, ``person/1`` and
comparisons (``A != B``) as guards. Built-in sets live in ``dukb/data/rules``:

- ``family``: the 48 EDU-RELAT rules with the gender/irreflexivity guards of the spec;
- ``family_paper_compat``: the same with the two "newphe" rules dead, as in the paper's code.

Anything else (negation, choice, disjunction, aggregates, conditional literals, other predicates, facts, ``#``
directives) is refused with the file and line, because the closure must be the unique least model and every ground
rule instance must be a plain hyperedge ``head <- body atoms``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path

from dukb import InputError
from dukb.kb.csvfile import read_text
from dukb.kb.schema import RELATIONS

#: Names of the built-in rule sets.
BUILTIN_RULES = ("family", "family_paper_compat")

BACKGROUND = {"male": 1, "female": 1, "person": 1}
INSTANCE_PRED = "dukb_inst"


class RulesError(InputError):
    """A rule file is malformed or not a positive Horn program over holds/3 (file and line in the message)."""


@dataclass(frozen=True)
class Rule:
    """One validated rule.

    Attributes:
        index: 0-based position in the rule set.
        text: the rule as written (normalised by clingo's printer).
        head: text of the head atom's arguments, e.g. ``"A,husband,B"``.
        body_holds: text of each ``holds`` body atom's arguments, in order.
        line: 1-based line in the source file.
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
    """

    name: str
    path: Path
    rules: tuple[Rule, ...]
    program: str

    def __len__(self) -> int:
        return len(self.rules)

    @property
    def fingerprint(self) -> str:
        """SHA-256 (first 16 hex digits) of the compiled program: two rule sets with the same fingerprint derive the
        same closure (comments and layout of the .lp file do not count)."""
        import hashlib

        return hashlib.sha256(self.program.encode()).hexdigest()[:16]


def _rules_path(name_or_file: str | Path) -> tuple[str, Path]:
    s = str(name_or_file)
    if s in BUILTIN_RULES:
        return s, Path(str(resources.files("dukb.data").joinpath("rules", s + ".lp")))
    path = Path(s)
    try:
        is_file = path.is_file()
    except OSError as e:  # a parent folder that may not be searched
        raise RulesError(f"cannot read: {e.strerror or e}", path) from None
    if not is_file:
        raise RulesError(f"no such rule file (built-in rule sets: {', '.join(BUILTIN_RULES)})", path)
    return s, path


def load_rules(name_or_file: str | Path = "family") -> RuleSet:
    """Load, validate and compile a rule set.

    Args:
        name_or_file: ``"family"``, ``"family_paper_compat"`` or a path to a user ``.lp`` file.

    Returns:
        The :class:`RuleSet`.

    Raises:
        RulesError: missing or unreadable file, not UTF-8, NUL byte, clingo syntax error, or a statement that is
            not a positive Horn rule over ``holds/3`` with guards (message names file and line).
    """
    name, path = _rules_path(name_or_file)
    return _load_rules_cached(name, str(path.resolve()), path.stat().st_mtime_ns)


@lru_cache(maxsize=16)
def _load_rules_cached(name: str, path_s: str, _mtime: int) -> RuleSet:
    import clingo
    from clingo import ast

    path = Path(path_s)
    try:
        text = read_text(path)
    except InputError as e:  # unreadable, not UTF-8, NUL byte (clingo would stop reading at a NUL)
        raise RulesError(e.message, path, e.line) from None
    messages: list[str] = []

    def logger(_code, msg: str) -> None:
        messages.append(msg.strip())

    stmts: list = []
    try:
        ast.parse_string(text, stmts.append, logger=logger, message_limit=5)
    except RuntimeError:
        raise RulesError(_clingo_message(messages, path) or "clingo could not parse the file", path) from None

    rules: list[Rule] = []
    for st in stmts:
        line = st.location.begin.line
        kind = st.ast_type
        if st.location.begin.filename != "<string>":
            raise RulesError("#include is not allowed in a rule file: put every rule in the file itself", path,
                             _include_line(text))
        if kind == ast.ASTType.Program and st.name == "base" and not st.parameters:
            continue
        if kind.name == "Comment":
            continue
        if kind != ast.ASTType.Rule:
            raise RulesError(f"only rules are allowed in a rule file, found a {_kind_name(kind)} statement",
                             path, line)
        rules.append(_check_rule(st, len(rules), path, line))
    if not rules:
        raise RulesError("the rule file contains no rules", path)
    program = "\n".join(_compile(r) for r in rules)
    program += f"\nholds(S,R,O) :- {INSTANCE_PRED}(_,(S,R,O),_).\n"
    # ground once on an empty KB to surface unsafe variables and similar errors with file/line
    ctl = clingo.Control(["--warn=none"], logger=logger, message_limit=5)
    messages.clear()
    try:
        ctl.add("base", [], _relocate(program, rules))
        ctl.ground([("base", [])])
    except RuntimeError:
        raise RulesError(_clingo_message(messages, path) or "clingo could not ground the rules", path) from None
    return RuleSet(name, path, tuple(rules), program)


def _include_line(text: str) -> int | None:
    for n, raw in enumerate(text.splitlines(), 1):
        if raw.split("%", 1)[0].strip().startswith("#include"):
            return n
    return None


def _external_call(node) -> bool:
    """True when an AST node contains an external function call ``@f(...)`` (Python/Lua code in the grounder)."""
    from clingo import ast

    if node.ast_type == ast.ASTType.Function and getattr(node, "external", 0):
        return True
    for key in node.child_keys:
        child = getattr(node, key)
        children = child if isinstance(child, (list, tuple, ast.ASTSequence)) else [child]
        for c in children:
            if isinstance(c, ast.AST) and _external_call(c):
                return True
    return False


def _kind_name(kind) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", " ", kind.name).lower()


def _clingo_message(messages: list[str], path: Path) -> str:
    if not messages:
        return ""
    msg = messages[0].splitlines()[0]
    # "<string>:3:5-6: error: syntax error, unexpected ..." -> "line 3, column 5: syntax error, unexpected ..."
    m = re.match(r"^<[^>]*>:(\d+):(\d+)(?:-[\d:]+)?:\s*(?:error:\s*)?(.*)$", msg)
    if m:
        return f"line {m.group(1)}, column {m.group(2)}: {m.group(3)}"
    return msg


def _check_rule(st, index: int, path: Path, line: int) -> Rule:
    from clingo import ast

    head = st.head
    if head.ast_type != ast.ASTType.Literal or head.atom.ast_type != ast.ASTType.SymbolicAtom:
        what = {ast.ASTType.Disjunction: "a disjunction", ast.ASTType.Aggregate: "a choice rule",
                ast.ASTType.HeadAggregate: "an aggregate"}.get(head.ast_type, "not a plain atom")
        if head.ast_type == ast.ASTType.Literal and head.atom.ast_type == ast.ASTType.BooleanConstant:
            what = "an integrity constraint"
        raise RulesError(f"rule head is {what}; only positive Horn rules with a holds(S,R,O) head are allowed",
                         path, line)
    if head.sign != ast.Sign.NoSign:
        raise RulesError("negated rule head; only positive Horn rules are allowed", path, line)
    hsym = head.atom.symbol
    if not (hsym.ast_type == ast.ASTType.Function and hsym.name == "holds" and len(hsym.arguments) == 3):
        raise RulesError(f"rule head {head} is not holds(S,R,O); rules may derive only relationship facts",
                         path, line)
    _check_relation(hsym, path, line)
    if not st.body:
        raise RulesError(f"{st} is a fact; facts belong in the KB, not in a rule file", path, line)
    if _external_call(st):
        raise RulesError("external function calls (@f(...)) are not allowed in rules", path, line)
    body_holds: list[str] = []
    for lit in st.body:
        if lit.ast_type != ast.ASTType.Literal:
            raise RulesError(f"body element '{lit}' is a conditional literal; only plain atoms are allowed",
                             path, line)
        if lit.sign != ast.Sign.NoSign:
            raise RulesError(f"negation ('{lit}') is not allowed: rules must be positive Horn rules", path, line)
        atom = lit.atom
        if atom.ast_type == ast.ASTType.Comparison:
            continue
        if atom.ast_type != ast.ASTType.SymbolicAtom:
            raise RulesError(f"body element '{lit}' is not allowed (no aggregates or theory atoms)", path, line)
        sym = atom.symbol
        if sym.ast_type != ast.ASTType.Function:
            raise RulesError(f"body atom '{lit}' is not a predicate", path, line)
        if sym.name == "holds" and len(sym.arguments) == 3:
            _check_relation(sym, path, line)
            body_holds.append(",".join(str(a) for a in sym.arguments))
        elif BACKGROUND.get(sym.name) == len(sym.arguments):
            continue
        else:
            raise RulesError(f"unknown predicate {sym.name}/{len(sym.arguments)} in '{lit}'; rules may use "
                             "holds/3, male/1, female/1, person/1 and comparisons", path, line)
    if not body_holds:
        raise RulesError("rule body has no holds(S,R,O) atom", path, line)
    return Rule(index, str(st), ",".join(str(a) for a in hsym.arguments), tuple(body_holds), line)


def _check_relation(sym, path: Path, line: int) -> None:
    from clingo import ast

    rel = sym.arguments[1]
    if rel.ast_type == ast.ASTType.Variable:
        return
    if rel.ast_type == ast.ASTType.SymbolicTerm and rel.symbol.type.name == "Function" \
            and not rel.symbol.arguments and rel.symbol.name in RELATIONS:
        return
    raise RulesError(f"unknown relation '{rel}' in {sym} (known: {', '.join(RELATIONS)})", path, line)


def _compile(rule: Rule) -> str:
    body = ", ".join(f"({b})" for b in rule.body_holds)
    body_src = rule.text.split(":-", 1)[1].rstrip().rstrip(".")
    return f"{INSTANCE_PRED}({rule.index},({rule.head}),({body},)) :- {body_src}."


def _relocate(program: str, rules: list[Rule]) -> str:
    """Pad the compiled program so that rule i sits on its source line (errors then cite the right line)."""
    lines: list[str] = []
    compiled = program.splitlines()
    for rule, text in zip(rules, compiled):
        while len(lines) < rule.line - 1:
            lines.append("")
        lines.append(text)
    lines.extend(compiled[len(rules):])
    return "\n".join(lines)
