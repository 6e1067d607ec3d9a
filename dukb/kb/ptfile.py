"""Read the EDU-RELAT benchmark's PyTorch ``.pt`` files without torch and without running code from them.

``torch.save`` writes a zip archive holding ``<name>/data.pkl`` (a Python pickle) next to ``<name>/version``,
``<name>/byteorder`` and, for tensors, ``<name>/data/<key>`` storages. The benchmark's files (Wu et al. 2025,
EDU-RELAT; ../shared/edu-relat/original) hold only plain Python objects: lists, dicts, tuples, strings, numbers,
booleans, numpy int64 arrays, and objects of the generator's own classes ``__main__.Person`` and ``__main__.Rule``.
None uses a tensor storage.

Unpickling is code execution unless the loader decides which callables a pickle may reach. This module uses a
restricted unpickler (:class:`_RestrictedUnpickler`, a subclass of the pure-Python ``pickle._Unpickler``, the class
``pickle.Unpickler`` falls back to) that

- overrides ``find_class`` with an allow-list: the stand-ins :class:`PickledPerson` / :class:`PickledRule` for
  ``__main__.Person`` / ``__main__.Rule`` (only the module ``__main__``, the one the benchmark's pickles name), and
  guarded wrappers of the numpy reconstruction globals (``numpy.core.multiarray._reconstruct`` / ``scalar``,
  ``numpy.ndarray``, ``numpy.dtype``, ``_codecs.encode``; ``numpy._core.multiarray`` as well). Every other global
  (``os.system``, ``builtins.eval``, ...) raises :class:`dukb.InputError` before anything is called;
- for the cached minimal sets (:func:`load_id_sets`) allows only ``set`` / ``frozenset`` of integers (module
  ``__builtin__`` or ``builtins``) and numpy's scalar reconstruction;
- refuses persistent ids (tensor storages) and the copyreg extension opcodes (EXT1/2/4);
- refuses tuples nested deeper than :data:`MAX_TUPLE_DEPTH` (hashing a deeper one can crash the interpreter);
  other deep nesting (lists, dicts) is harmless to build, and error messages show it with :func:`short_repr`;
- replaces the BUILD opcode: state may only be applied to a stand-in (a dict of plain attribute names), to a numpy
  dtype (simple dtypes only: no fields, no sub-arrays, no object flag) or to a numpy array of a non-object dtype.
  This is why the pure-Python unpickler is used: the C one cannot vet BUILD, and numpy's ``dtype.__setstate__``
  accepts a state that turns ``V8`` into an object dtype, whose array data would then be read as pointers.

Errors: every problem (missing file, not a zip archive, no data.pkl, malformed pickle, a refused global, content of
the wrong type) raises :class:`dukb.InputError` naming the file.
"""

from __future__ import annotations

import io
import keyword
import lzma
import math
import pickle
import re
import reprlib
import zipfile
import zlib
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import IO, Any, cast

import numpy as np

from dukb import InputError
from dukb.kb.csvfile import open_regular

try:
    from numpy._core import multiarray as _multiarray
except ImportError:  # numpy < 2
    from numpy.core import multiarray as _multiarray  # type: ignore[no-redef]

#: Largest data.pkl read (bytes). The benchmark's largest is about 100 KB.
MAX_PICKLE_BYTES = 64 * 1024 * 1024

#: Largest numpy array (elements) a pickle may create.
MAX_ARRAY_ELEMENTS = 1 << 24

#: Deepest nesting of tuples in tuples a pickle may build. Python hashes a tuple (as a dict key, a set or frozenset
#: element) by recursing in C without a depth guard: a tuple nested a million deep crashes the interpreter
#: (segmentation fault). The benchmark's tuples are at most 2 deep.
MAX_TUPLE_DEPTH = 100

#: Stand-in class names the benchmark's pickles use (module ``__main__``).
BENCHMARK_CLASSES = frozenset({"Person", "Rule"})

_DATA_PKL = re.compile(r"^[^/]+/data\.pkl$")
_NUMPY_MULTIARRAY = ("numpy.core.multiarray", "numpy._core.multiarray")


# -- stand-ins for the benchmark's classes ------------------------------------------------------------------------
class _StandIn:
    """Plain attribute holder for an object of one of the benchmark's classes.

    Unpickling creates it empty (``__new__``) and fills it with :meth:`__setstate__`; nothing else runs.
    """

    def __setstate__(self, state: object) -> None:
        """Set the pickled attributes.

        Args:
            state: a dict mapping attribute names (identifiers not starting with "_") to values.

        Raises:
            InputError: state is not such a dict (the caller adds the file name).
        """
        if not isinstance(state, dict):
            raise InputError(
                f"state of a pickled {type(self).__name__[7:]} is a {type(state).__name__}, "
                "expected a dict of attributes"
            )
        for key, value in state.items():
            if not isinstance(key, str) or not key.isidentifier() or key.startswith("_") or keyword.iskeyword(key):
                raise InputError(f"pickled {type(self).__name__[7:]} has an invalid attribute name {key!r}")
            self.__dict__[key] = value

    def __repr__(self) -> str:
        # Never recursive: Person objects reference each other (father, mother, children, husband, wife), so other
        # stand-ins inside the attributes are shown as <Person name> only.
        parts = ", ".join(f"{key}={_SHORT.repr(value)}" for key, value in self.__dict__.items())
        return f"{type(self).__name__}({parts})"


class _ShortRepr(reprlib.Repr):
    """reprlib with stand-ins shown by name only and huge integers by their size (reprlib nests at most
    ``maxlevel`` deep, so a deeply nested pickled list cannot exhaust the stack)."""

    def _tag(self, obj: Any, level: int) -> str:
        return f"<{type(obj).__name__[7:]} {obj.__dict__.get('name', '?')!r}>"

    repr_PickledPerson = repr_PickledRule = _tag

    def repr_int(self, x: int, level: int) -> str:
        # repr() of an int over 4300 digits raises ValueError (sys.int_info.str_digits_check_threshold)
        return f"<int of {x.bit_length()} bits>" if x.bit_length() > 256 else repr(x)


_SHORT = _ShortRepr()
_SHORT.maxlist = _SHORT.maxtuple = 8
_SHORT.maxstring = _SHORT.maxother = 60


def short_repr(obj: object, limit: int = 60) -> str:
    """A short ``repr`` of an unpickled object for an error message: never more than ``limit`` characters (plus
    "..."), at most 6 levels of nesting, and never raising (a deeply nested list, an integer of a million digits).

    Args:
        obj: any object a restricted unpickler returned.
        limit: maximum length before "..." is added.

    Returns:
        The text.

    Example:
        >>> short_repr(list(range(100)))
        '[0, 1, 2, 3, 4, 5, 6, 7, ...]'
        >>> short_repr(10 ** 5000)
        '<int of 16610 bits>'
        >>> short_repr("x" * 100, limit=10)
        "'xxxxxxxxx..."
    """
    try:
        text = _SHORT.repr(obj)
    except Exception:  # RecursionError, ValueError, anything a numpy repr might raise
        text = f"<{type(obj).__name__}>"
    return text if len(text) <= limit else text[:limit] + "..."


class PickledPerson(_StandIn):
    """Stand-in for the benchmark generator's ``__main__.Person``.

    Attributes (as pickled in family-200-graph.pt): ``name`` (int, index into the name list), ``gender``
    ("male"/"female"), ``father``, ``mother``, ``husband``, ``wife`` (PickledPerson or None), ``children`` (list of
    PickledPerson), ``age`` (birth year, AD), ``birthplace`` (numpy int array of one index into
    us_population_distribution), ``job`` (str), ``generation`` (int), ``if_build`` (bool).

    Source: EDU-RELAT (Wu et al. 2025), the generator's Person class, read from the pickle.

    Example:
        >>> import tempfile
        >>> raw = (b"\\x80\\x02c__main__\\nPerson\\n)\\x81}(X\\x04\\x00\\x00\\x00nameK\\x05"
        ...        b"X\\x06\\x00\\x00\\x00genderX\\x06\\x00\\x00\\x00femaleub.")  # a pickled __main__.Person
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     with zipfile.ZipFile(Path(tmp) / "graph.pt", "w") as zf:
        ...         zf.writestr("archive/data.pkl", raw)
        ...     person = load_benchmark_pickle(Path(tmp) / "graph.pt")
        >>> type(person).__name__, person.name, person.gender
        ('PickledPerson', 5, 'female')
    """


class PickledRule(_StandIn):
    """Stand-in for the benchmark's ``__main__.Rule``.

    Attributes (as pickled in family_rule.pt): ``left_tuples`` (list of (var, relation, var) body atoms),
    ``right_tuple`` ((var, relation, var) head), ``num_var`` (int).

    Source: EDU-RELAT (Wu et al. 2025), family_rule.pt.

    Example:
        >>> import tempfile
        >>> raw = b"\\x80\\x02c__main__\\nRule\\n)\\x81}(X\\x07\\x00\\x00\\x00num_varK\\x03ub."  # __main__.Rule
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     with zipfile.ZipFile(Path(tmp) / "family_rule.pt", "w") as zf:
        ...         zf.writestr("archive/data.pkl", raw)
        ...     rule = load_benchmark_pickle(Path(tmp) / "family_rule.pt", allowed_classes={"Rule"})
        >>> isinstance(rule, PickledRule), rule.num_var
        (True, 3)
    """


_STAND_INS = {"Person": PickledPerson, "Rule": PickledRule}


# -- guarded numpy reconstruction globals -----------------------------------------------------------------------


class _Guard:
    """A callable the restricted unpickler hands out instead of a real global. Refuses BUILD on itself."""

    __slots__ = ()

    def __setstate__(self, state: object) -> None:
        raise InputError("pickle tries to set the state of a reconstruction function")


class _NdarrayToken(_Guard):
    """What ``numpy.ndarray`` resolves to: only usable as the first argument of ``_reconstruct``."""

    __slots__ = ()


_NDARRAY = _NdarrayToken()


def _check_dtype(dtype: Any, what: str) -> Any:

    if not isinstance(dtype, np.dtype):
        raise InputError(f"{what}: expected a numpy dtype, got {type(dtype).__name__}")
    if dtype.hasobject or dtype.fields is not None or dtype.subdtype is not None or dtype.kind not in "biufcSU":
        raise InputError(f"{what}: numpy dtype {dtype} is not allowed (only plain bool/int/float/complex/str)")
    return dtype


class _Dtype(_Guard):
    """``numpy.dtype(spec, align, copy)`` for a plain (non-object, non-structured) dtype given as a string."""

    __slots__ = ()

    def __call__(self, spec: object, align: object = False, copy: object = False) -> Any:

        if not isinstance(spec, str) or not isinstance(align, bool) or not isinstance(copy, bool):
            raise InputError("numpy.dtype: only a dtype string is allowed")
        return _check_dtype(np.dtype(spec, align, copy), "numpy.dtype")


class _Reconstruct(_Guard):
    """``numpy.core.multiarray._reconstruct(ndarray, shape, typecode)``: an empty ndarray, filled by BUILD."""

    __slots__ = ()

    def __call__(self, subtype: object, shape: object, typecode: object) -> Any:

        if subtype is not _NDARRAY:
            raise InputError("_reconstruct: only numpy.ndarray may be reconstructed")
        if (
            not isinstance(shape, tuple)
            or not all(type(n) is int and n >= 0 for n in shape)
            or math.prod(shape) > MAX_ARRAY_ELEMENTS
            or typecode not in (b"b", "b")
        ):
            raise InputError("_reconstruct: malformed arguments")
        return _multiarray._reconstruct(np.ndarray, shape, typecode)


class _Scalar(_Guard):
    """``numpy.core.multiarray.scalar(dtype, data)``: a numpy scalar of a plain dtype from its bytes."""

    __slots__ = ()

    def __call__(self, dtype: Any, data: object = None) -> Any:
        _check_dtype(dtype, "numpy scalar")
        if not isinstance(data, bytes) or len(data) != dtype.itemsize:
            raise InputError("numpy scalar: malformed data")
        return _multiarray.scalar(dtype, data)


class _Latin1Encode(_Guard):
    """``_codecs.encode(text, "latin1")``: how protocol-2 pickles store bytes."""

    __slots__ = ()

    def __call__(self, text: object, encoding: str = "utf-8", errors: str = "strict") -> bytes:
        if not isinstance(text, str) or encoding not in ("latin1", "latin-1") or errors != "strict":
            raise InputError("_codecs.encode: only latin1 encoding of a string is allowed")
        return text.encode("latin-1")


_NUMPY_GLOBALS = {("numpy", "ndarray"): _NDARRAY, ("numpy", "dtype"): _Dtype(), ("_codecs", "encode"): _Latin1Encode()}
for _m in _NUMPY_MULTIARRAY:
    _NUMPY_GLOBALS[(_m, "_reconstruct")] = _Reconstruct()
    _NUMPY_GLOBALS[(_m, "scalar")] = _Scalar()


class _SetOf(_Guard):
    """``builtins.set`` / ``frozenset`` (module ``__builtin__`` in protocol-2 pickles) called with one list of
    hashable items: plain integers, numpy integer scalars or (for ``set``) frozensets. No other item type, and at
    most :data:`MAX_ARRAY_ELEMENTS` items, so that no pickled object's ``__hash__`` or ``__eq__`` runs."""

    __slots__ = ("kind",)

    def __init__(self, kind: type) -> None:
        self.kind = kind

    def __call__(self, items: object = ()) -> Any:

        allowed: tuple[type, ...] = (int, np.integer) + ((frozenset,) if self.kind is set else ())
        if not isinstance(items, (list, tuple)) or len(items) > MAX_ARRAY_ELEMENTS:
            raise InputError(f"{self.kind.__name__}: expected a list of items")
        for x in items:
            if isinstance(x, (bool, np.bool_)) or not isinstance(x, allowed):
                raise InputError(
                    f"{self.kind.__name__} of a {type(x).__name__} is not allowed (only integers"
                    + (" and frozensets of integers)" if self.kind is set else ")")
                )
        return self.kind(items)


#: the globals of a pickled set of frozensets of numpy integers (the benchmark's unlearn_minimal_set/<id>.pt)
_SET_GLOBALS = {
    (m, name): _SetOf(kind)
    for m in ("__builtin__", "builtins")
    for name, kind in (("set", set), ("frozenset", frozenset))
}


def _safe_build(self: Any) -> None:
    """The BUILD opcode: apply state only to stand-ins, plain numpy dtypes and arrays of plain dtypes."""

    state = self.stack.pop()
    inst = self.stack[-1]
    if isinstance(inst, _StandIn):
        inst.__setstate__(state)
    elif isinstance(inst, np.dtype):
        # (version, byteorder, subarray, names, fields, elsize, alignment, flags[, metadata])
        if not (
            isinstance(state, tuple)
            and len(state) in (8, 9)
            and state[2] is None
            and state[3] is None
            and state[4] is None
            and state[7] == 0
            and (len(state) == 8 or state[8] is None)
        ):
            raise InputError("numpy dtype state is not that of a plain dtype")
        cast(Any, inst).__setstate__(state)
        _check_dtype(inst, "numpy dtype")
    elif type(inst) is np.ndarray:
        # (version, shape, dtype, is_fortran, raw bytes)
        if not (isinstance(state, tuple) and len(state) == 5 and isinstance(state[4], bytes)):
            raise InputError("numpy array state is malformed")
        _check_dtype(state[2], "numpy array")
        inst.__setstate__(state)
    else:
        raise InputError(f"pickle tries to set the state of a {type(inst).__name__}")


def _refuse_ext(self: Any) -> None:
    raise InputError("pickle uses a copyreg extension code (EXT opcode), which is refused")


def _depth_checked(load_tuple: Callable[[Any], None]) -> Callable[[Any], None]:
    """Wrap a TUPLE/TUPLE1/TUPLE2/TUPLE3 opcode: record the new tuple's nesting depth, refuse one deeper than
    :data:`MAX_TUPLE_DEPTH` before anything can hash it."""

    def op(self: Any) -> None:
        load_tuple(self)
        new = self.stack[-1]
        depth = 1 + max((self._tuple_depth.get(id(x), 1) for x in new if type(x) is tuple), default=0)
        if depth > MAX_TUPLE_DEPTH:
            raise InputError(f"malformed pickle: tuples nested more than {MAX_TUPLE_DEPTH} deep")
        # every tuple of the pickle is made here, so the id of a live item is that of the tuple recorded for it
        self._tuple_depth[id(new)] = depth

    return op


class _RestrictedUnpickler(pickle._Unpickler):
    """Pure-Python unpickler with an allow-list of globals, no persistent ids and a vetted BUILD.

    Args:
        file: binary file holding the pickle.
        allowed: (module, name) -> object to return from ``find_class``.
    """

    dispatch = dict(pickle._Unpickler.dispatch)
    dispatch[pickle.BUILD[0]] = _safe_build
    for _op in (pickle.EXT1, pickle.EXT2, pickle.EXT4):
        dispatch[_op[0]] = _refuse_ext
    for _op in (pickle.TUPLE, pickle.TUPLE1, pickle.TUPLE2, pickle.TUPLE3):
        dispatch[_op[0]] = _depth_checked(dispatch[_op[0]])
    del _op

    def __init__(self, file: IO[bytes], allowed: Mapping[tuple[str, str], object]):
        super().__init__(file)
        self._allowed = allowed
        self._tuple_depth: dict[int, int] = {}  # id(tuple) -> nesting depth, for every tuple the pickle made

    def find_class(self, module: str, name: str) -> Any:
        """Return the allowed stand-in or guarded callable; raise InputError for every other global."""
        try:
            return self._allowed[(module, name)]
        except (KeyError, TypeError):
            hint = (
                "; tensors are not read: save plain lists (tensor.tolist())"
                if str(module).split(".")[0] == "torch"
                else ""
            )
            allowed = (
                "set, frozenset and numpy integer scalars"
                if ("builtins", "set") in self._allowed
                else "the benchmark's Person/Rule and numpy array reconstruction"
            )
            raise InputError(f"refused global {module}.{name} (only {allowed} are allowed{hint})") from None

    def persistent_load(self, pid: object) -> Any:
        """Refuse persistent ids (tensor storages)."""
        raise InputError(
            "holds tensor storage (persistent id), which dukb does not read; expected plain Python objects"
        )


def _read_data_pkl(path: Path) -> bytes:
    """The bytes of ``<name>/data.pkl`` inside a torch.save zip archive.

    The archive must be a regular file of at most :data:`dukb.kb.csvfile.MAX_INPUT_BYTES` bytes
    (:func:`dukb.kb.csvfile.open_regular`), and data.pkl at most :data:`MAX_PICKLE_BYTES` bytes once inflated.

    Raises:
        InputError: (naming the file) missing, not a regular file, too large, unreadable, not a zip archive, not
            one data.pkl, data.pkl too large or corrupt.
    """
    # a regular file of at most MAX_INPUT_BYTES bytes (no FIFO, device or folder); data.pkl is bounded below
    fh = open_regular(path, "file")
    try:
        zf = zipfile.ZipFile(fh)
    except zipfile.BadZipFile:
        fh.close()
        raise InputError("not a zip archive as written by torch.save (legacy or foreign format?)", path) from None
    except OSError as e:
        fh.close()
        raise InputError(f"cannot read: {e.strerror or e}", path) from None
    with fh, zf:
        names = [n for n in zf.namelist() if _DATA_PKL.match(n)]
        if len(names) != 1:
            raise InputError(f"not a torch.save archive: expected one <name>/data.pkl, found {len(names)}", path)
        info = zf.getinfo(names[0])
        if info.file_size > MAX_PICKLE_BYTES:
            raise InputError(f"data.pkl is {info.file_size} bytes, more than the limit of {MAX_PICKLE_BYTES}", path)
        try:
            with zf.open(info) as fh:
                data = fh.read(MAX_PICKLE_BYTES + 1)
        except (
            zipfile.BadZipFile,
            zlib.error,
            lzma.LZMAError,
            EOFError,
            NotImplementedError,
            RuntimeError,
            OSError,
            ValueError,
        ) as e:
            # a corrupt member (CRC mismatch, bad deflate/bz2/lzma stream, truncated data) or an unsupported method
            raise InputError(f"cannot read the zip archive: {type(e).__name__}: {e}", path) from None
    if len(data) > MAX_PICKLE_BYTES:
        raise InputError(f"data.pkl is larger than the limit of {MAX_PICKLE_BYTES} bytes", path)
    return data


def _load(path: str | Path, allowed: Mapping[tuple[str, str], object]) -> Any:
    path = Path(path)
    data = _read_data_pkl(path)
    try:
        return _RestrictedUnpickler(io.BytesIO(data), allowed).load()
    except InputError as e:
        raise InputError(e.message, path) from None
    except RecursionError:
        raise InputError("malformed pickle: nested too deeply", path) from None
    except Exception as e:  # any malformed pickle: UnpicklingError, EOFError, KeyError (bad opcode), TypeError...
        raise InputError(f"malformed pickle in data.pkl: {type(e).__name__}: {e}", path) from None


def load_bool_list(path: str | Path) -> list[bool]:
    """Read a ``.pt`` file holding a list of booleans (the benchmark's relationships_correct.pt and
    biographies_correct.pt: entry i says whether the model still knows fact i of the KB, in file order).

    Args:
        path: the .pt file (a torch.save zip archive).

    Returns:
        The booleans as a list of Python ``bool``. A list/tuple of numpy bools or a 1-D numpy bool array is accepted
        too (numpy's scalar/array reconstruction globals are the only globals allowed).

    Raises:
        InputError: (naming the file) missing file, not a zip archive, no data.pkl, malformed pickle, a refused
            global or persistent id, or content that is not a sequence of booleans.

    Source: EDU-RELAT (Wu et al. 2025), example_for_evaluation/*.pt and calculate_recall_and_acc.py.

    Example:
        >>> import tempfile
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     with zipfile.ZipFile(Path(tmp) / "relationships_correct.pt", "w") as zf:
        ...         zf.writestr("archive/data.pkl", pickle.dumps([True, False, True], protocol=2))
        ...     load_bool_list(Path(tmp) / "relationships_correct.pt")
        [True, False, True]
    """

    path = Path(path)
    obj = _load(path, _NUMPY_GLOBALS)
    if isinstance(obj, np.ndarray):
        if obj.ndim != 1 or obj.dtype != np.bool_:
            raise InputError(
                f"expected a list of booleans, found a numpy array of {obj.dtype} with shape {obj.shape}", path
            )
        return [bool(x) for x in obj.tolist()]
    if not isinstance(obj, (list, tuple)):
        raise InputError(f"expected a list of booleans, found {type(obj).__name__}", path)
    out = []
    for i, x in enumerate(obj):
        if type(x) is bool or isinstance(x, np.bool_):
            out.append(bool(x))
        else:
            raise InputError(f"expected a list of booleans, entry {i} is {type(x).__name__} {short_repr(x)}", path)
    return out


def load_id_sets(path: str | Path) -> list[list[int]]:
    """Read a ``.pt`` file holding a set of frozensets of integer ids (the benchmark's
    ``unlearn_minimal_set/<edge id>.pt``: the cached minimal deep unlearning sets of one target, edge ids as numpy
    int64), with a restricted unpickler that allows only ``set``, ``frozenset`` and numpy's scalar reconstruction.

    Order: the sets in the order CPython iterates the unpickled set, which is the order the reference iterates
    (``minimal_unlearn_set = list(torch.load(...))``, utils_metric.py:106 and :114 of github.com/wrh14/deep_unlearning)
    and the order its ``np.asarray(recall_list).argmax()`` (calculate_recall_and_acc.py:43) breaks ties by. It is
    not always the order the sets are stored in the pickle (the set is rebuilt from that list). Each set's ids are
    returned sorted.

    Args:
        path: the .pt file (a torch.save zip archive).

    Returns:
        list of sets, each a sorted list of Python ints.

    Raises:
        InputError: (naming the file) missing file, not a zip archive, no data.pkl, malformed pickle, any other
            global (a class, ``os.system``, ...: refused before anything is called), a persistent id, or content
            that is not a set of non-empty frozensets of integers.

    Source: Wu et al. 2025 (Eval-DU), synthetic_data/unlearn_minimal_set/*.pt and utils_metric.py:104-124.

    Example:
        >>> import tempfile
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     with zipfile.ZipFile(Path(tmp) / "7.pt", "w") as zf:
        ...         zf.writestr("archive/data.pkl", pickle.dumps({frozenset({7, 3}), frozenset({7, 1})}, protocol=2))
        ...     sorted(load_id_sets(Path(tmp) / "7.pt"))
        [[1, 7], [3, 7]]
    """

    path = Path(path)
    obj = _load(path, {**_NUMPY_GLOBALS, **_SET_GLOBALS})
    if not isinstance(obj, set):
        raise InputError(
            f"expected a set of frozensets of edge ids, found {type(obj).__name__} {short_repr(obj)}", path
        )
    out = []
    for s in obj:  # the iteration order of the rebuilt set: the reference's list(torch.load(...))
        # protocol 4 builds sets with opcodes, not through _SetOf: check every item's type here too
        if (
            not isinstance(s, frozenset)
            or not s
            or not all(isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_)) for x in s)
        ):
            raise InputError(f"expected a set of non-empty frozensets of edge ids, found {short_repr(s)}", path)
        out.append(sorted(int(x) for x in s))
    return out


def load_benchmark_pickle(path: str | Path, allowed_classes: Iterable[str] = BENCHMARK_CLASSES) -> Any:
    """Read one of the benchmark's pickled ``.pt`` files (family-200-graph.pt, family_rule.pt,
    family_relationships.pt, family_biographies.pt, subsample.pt, us_population_distribution) safely.

    Args:
        path: the file (a torch.save zip archive; any file name).
        allowed_classes: which of the benchmark classes ``__main__.Person`` / ``__main__.Rule`` may appear; they are
            loaded as :class:`PickledPerson` / :class:`PickledRule`.

    Returns:
        The unpickled object: built-in types, numpy arrays of plain dtypes and stand-ins only.

    Raises:
        InputError: (naming the file) missing file, not a zip archive, no data.pkl, malformed pickle, any global
            other than the allowed stand-ins and numpy's array/dtype reconstruction (e.g. ``os.system``,
            ``builtins.eval``: refused before anything is called), or a persistent id (tensor storage).
        ValueError: ``allowed_classes`` names a class other than Person/Rule (a programming error).

    Source: EDU-RELAT (Wu et al. 2025), original/*.pt; ../shared/edu-relat/README.md.

    Example:
        >>> import tempfile
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     path = Path(tmp) / "subsample.pt"
        ...     with zipfile.ZipFile(path, "w") as zf:
        ...         zf.writestr("archive/data.pkl", pickle.dumps({"targets": [3, 17]}, protocol=2))
        ...     print(load_benchmark_pickle(path))
        ...     with zipfile.ZipFile(path, "w") as zf:  # a pickle that would call print() when loaded
        ...         zf.writestr("archive/data.pkl", pickle.dumps(print))
        ...     try:
        ...         load_benchmark_pickle(path)
        ...     except InputError as e:
        ...         print(e.message)
        {'targets': [3, 17]}
        refused global builtins.print (only the benchmark's Person/Rule and numpy array reconstruction are allowed)
    """
    unknown = set(allowed_classes) - BENCHMARK_CLASSES
    if unknown:
        raise ValueError(f"unknown benchmark classes {sorted(unknown)}; known: {sorted(BENCHMARK_CLASSES)}")
    allowed: dict[tuple[str, str], object] = dict(_NUMPY_GLOBALS)
    for name in allowed_classes:
        allowed[("__main__", name)] = _STAND_INS[name]
    return _load(path, allowed)


__all__ = [
    "BENCHMARK_CLASSES",
    "MAX_PICKLE_BYTES",
    "MAX_TUPLE_DEPTH",
    "PickledPerson",
    "PickledRule",
    "load_benchmark_pickle",
    "load_bool_list",
    "load_id_sets",
    "short_repr",
]
