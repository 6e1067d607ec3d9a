"""dukb: evaluating deep unlearning in large language models.

The package root only holds the version and the error type every layer raises for bad input. The work lives in
the subpackages: :mod:`dukb.kb` (facts and people), :mod:`dukb.solver` (clingo closure, minimal deep unlearning
sets, recall/accuracy), :mod:`dukb.neural` (models, finetuning, unlearning, probing) and :mod:`dukb.cli`.

Source: Wu, Yadav, Salakhutdinov, Chaudhuri, "Evaluating Deep Unlearning in Large Language Models" (2025).
"""

__version__ = "0.1.0"


class DukbError(Exception):
    """Bad input from a user: a malformed KB, rule file, target or option.

    The CLI prints ``str(error)`` on one line and exits with code 2, without a traceback. Subclasses carry the
    file and line where known.
    """


class InputError(DukbError):
    """A user-supplied file or value is malformed.

    Args:
        message: what is wrong.
        path: the file it is in, if any.
        line: 1-based line number in that file, if known.
    """

    def __init__(self, message: str, path: object | None = None, line: int | None = None):
        self.message = message
        self.path = None if path is None else str(path)
        self.line = line
        super().__init__(self.__str__())

    def __str__(self) -> str:
        where = ""
        if self.path is not None:
            where = self.path + (f":{self.line}" if self.line is not None else "") + ": "
        return one_line(where + self.message)


def one_line(text: str) -> str:
    """``text`` safe to print as one line: every character that is not printable (``str.isprintable``; the space
    is kept), such as a line break, tab, NUL, U+2028 or an undecodable file-name byte (a lone surrogate), is
    written as its Python escape (``\\n``, ``\\x00``, ``\\u2028``).

    Args:
        text: any string, e.g. an error message that echoes user input or a file name.

    Returns:
        The escaped string; ``text`` itself when it is all printable.
    """
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() or c == " " else repr(c)[1:-1] for c in text)


__all__ = ["DukbError", "InputError", "__version__", "one_line"]
