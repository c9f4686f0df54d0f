"""Payload codecs: how a payload becomes the bytes a journal stores.

Every journal stores bytes, the in-memory one too, and the handler always gets
the payload decoded from those bytes.  So a payload that would not survive a
restart fails at ``send``, in tests, instead of after the first crash.

`JSONCodec` refuses everything that JSON would silently change (tuples become
lists, int dict keys become str, NaN is not JSON, ...): a replay must never
hand the handler a different value than ``send`` was given.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from typing import Final, Protocol, cast

import attrs

from .errors import DecodeError, EncodeError

__all__ = ["Codec", "JSONCodec"]

TYPE_TAG: Final = "$type"
"""The key that marks an encoded attrs instance; user dicts may not use it."""


class Codec(Protocol):
    """**Protocol:** turns payloads into bytes and back.

    ``decode(encode(p)) == p`` must hold for every payload ``encode`` accepts.
    """

    def encode(self, payload: object) -> bytes:
        """Return the bytes for *payload*; raise `EncodeError` if it cannot round-trip."""
        ...

    def decode(self, data: bytes) -> object:
        """Return the payload in *data*; raise `DecodeError` if it is not one."""
        ...


_UNSTABLE_MODULES: Final = frozenset({"__main__", "__mp_main__"})
"""Where a module's name depends on how the program was started, not on the code."""


@attrs.define(eq=False, init=False)
class JSONCodec:
    """JSON values, plus instances of the attrs classes in *types*.

    Accepted: `None`, `bool`, `int`, finite `float`, `str` (valid Unicode),
    `list`, `dict` with `str` keys, and instances of registered attrs classes
    (encoded by field, decoded by calling the class).  Exact types only: a
    subclass (an `enum.IntEnum`, say) would come back as its base type.

    *types* maps a stable name to each class, ``{"payment": PaymentEvent}``;
    the journal stores that name, so the class can move or be renamed.  A
    plain iterable of classes names each by its ``module.qualname``, which is
    no name at all for a class defined in ``__main__`` (it changes with how the
    program is started): that raises `TypeError`.  A payload decodes after its
    class gains a field with a default; a missing or unknown field is a
    `DecodeError`.
    """

    _by_type: dict[type, str]
    _by_name: dict[str, type]
    _encoder: json.JSONEncoder
    _decoder: json.JSONDecoder

    def __init__(self, types: Mapping[str, type] | Iterable[type] = ()) -> None:
        self._by_type = {}
        self._by_name = {}
        # Built once: json.dumps/loads build a new one per call when given options.
        self._encoder = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
        self._decoder = json.JSONDecoder(object_hook=self._from_dict)
        if isinstance(types, Mapping):
            for name, cls in types.items():
                _check_name(name)
                _check_rebuildable(cls)
                self._register(name, cls)
        else:
            for cls in types:
                _check_rebuildable(cls)
                self._register(_qualified_name(cls), cls)

    def _register(self, name: str, cls: type) -> None:
        known = self._by_name.setdefault(name, cls)
        if known is not cls:
            raise ValueError(
                f"{known.__qualname__} and {cls.__qualname__} are both named {name!r}:"
                " a payload type name must mean one class"
            )
        first = self._by_type.setdefault(cls, name)
        if first != name:
            raise ValueError(
                f"{cls.__qualname__} is registered as both {first!r} and {name!r}:"
                " it must have one name (a renamed type keeps its old one)"
            )

    def encode(self, payload: object) -> bytes:
        try:
            if type(payload) is int:  # the commonest payload, an id: as the encoder writes it
                return int.__repr__(payload).encode()
            tree = self._to_tree(payload)
            return self._encoder.encode(tree).encode()
        except RecursionError:
            raise EncodeError("payload is nested too deeply (or contains itself)") from None
        except UnicodeEncodeError:
            raise EncodeError(
                "payload strings must be valid Unicode (no lone surrogates)"
            ) from None
        except ValueError:  # the encoder's only one: an int too long for int -> str
            raise EncodeError(
                "payload ints must have at most sys.get_int_max_str_digits() digits"
            ) from None

    def decode(self, data: bytes) -> object:
        # Each message says where and why, never what: the bytes are the payload.
        try:
            if data.isdigit() and (data[0] != 0x30 or len(data) == 1):  # "0" leads no JSON int
                return int(data)  # the commonest payload, an id, as `encode` writes it
            return self._decoder.decode(data.decode())
        except DecodeError:
            raise
        except UnicodeDecodeError as exc:
            raise DecodeError(
                f"cannot decode payload: not UTF-8 at byte {exc.start} ({exc.reason})"
            ) from exc
        except json.JSONDecodeError as exc:
            raise DecodeError(
                f"cannot decode payload: not JSON at char {exc.pos} ({exc.msg})"
            ) from exc
        except RecursionError as exc:
            raise DecodeError("cannot decode payload: nested too deeply") from exc
        except Exception as exc:  # an int too long for str -> int, say: its text may quote it
            raise DecodeError(f"cannot decode payload: {type(exc).__name__}") from exc

    def _to_tree(self, value: object) -> object:
        kind = type(value)
        if kind is str or kind is int or kind is bool or value is None:
            return value
        if kind is float:
            if not math.isfinite(value):  # type: ignore[arg-type]
                raise EncodeError("payload floats must be finite (no NaN or infinity)")
            return value
        if kind is list:
            return [self._to_tree(item) for item in value]  # type: ignore[attr-defined]
        if kind is dict:
            tree = {}
            for name, item in value.items():  # type: ignore[attr-defined]
                if type(name) is not str:
                    raise EncodeError(f"payload dict keys must be str, not {type(name).__name__}")
                if name == TYPE_TAG:
                    raise EncodeError(f"payload dict key {TYPE_TAG!r} is reserved")
                tree[name] = self._to_tree(item)
            return tree
        type_name = self._by_type.get(kind)
        if type_name is None:
            hint = "; register attrs classes with JSONCodec(types=...)" if attrs.has(kind) else ""
            raise EncodeError(f"cannot encode a {kind.__qualname__} payload{hint}")
        tree = {TYPE_TAG: type_name}
        for field in attrs.fields(kind):  # type: ignore[arg-type]
            tree[field.alias] = self._to_tree(getattr(value, field.name))
        return tree

    def _from_dict(self, tree: dict[str, object]) -> object:
        if TYPE_TAG not in tree:
            return tree
        type_name = tree.pop(TYPE_TAG)
        if not isinstance(type_name, str):
            kind = type(type_name).__name__
            raise DecodeError(f"payload type tag {TYPE_TAG!r} holds a {kind}, not a class name")
        cls = self._by_name.get(type_name)
        if cls is None:
            raise DecodeError(f"payload type {type_name!r} is not registered with this codec")
        try:
            return cls(**tree)
        except Exception as exc:
            raise DecodeError(
                f"cannot rebuild a {type_name!r} payload ({cls.__qualname__}):"
                f" {_refusal(cls, tree, exc)}"
            ) from exc


def check_codec(codec: object) -> Codec:
    """*codec*, or `JSONCodec()` for None; TypeError unless it has ``encode`` and ``decode``."""
    if codec is None:
        return JSONCodec()
    if not (callable(getattr(codec, "encode", None)) and callable(getattr(codec, "decode", None))):
        raise TypeError(f"codec must have encode() and decode(), not {codec!r}")
    return cast(Codec, codec)


def _check_name(name: object) -> None:
    # Names are read in dead letters and by the inturn command: no invisible
    # differences ("payment " is not "payment"), and no lone surrogates, which
    # could not be encoded.
    if type(name) is not str:
        kind = type(name).__name__
        raise TypeError(f"payload type names must be str, not {kind}: types maps names to classes")
    if not name or not name.isprintable() or " " in name:
        raise ValueError(
            f"payload type name {name!r} must be non-empty, printable, and without spaces"
        )


def _check_rebuildable(cls: object) -> None:
    if not (isinstance(cls, type) and attrs.has(cls)):
        raise TypeError(f"JSONCodec can only register attrs classes, not {cls!r}")
    if any(not field.init for field in attrs.fields(cls)):
        raise TypeError(f"{cls.__qualname__} has init=False fields: it cannot be rebuilt")
    if "__eq__" not in cls.__dict__:
        raise TypeError(f"{cls.__qualname__} must compare by value (attrs eq=True)")


def _qualified_name(cls: type) -> str:
    """*cls*'s ``module.qualname``: stable for a class imported from a module."""
    module = cls.__module__
    if module in _UNSTABLE_MODULES:
        name = cls.__qualname__
        suggested = re.sub(
            r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", cls.__name__
        ).lower()
        raise TypeError(
            f"{name} is defined in {module}, so its module.qualname changes with how the"
            f" program is started; register it with a stable name:"
            f" JSONCodec(types={{{suggested!r}: {name}}}) (or {{'{module}.{name}': {name}}}"
            f" to keep decoding payloads already journaled under that name)"
        )
    return f"{module}.{cls.__qualname__}"


def _refusal(cls: type, tree: dict[str, object], error: Exception) -> str:
    """Why *cls* refused the fields in *tree*, naming fields only.

    *error*'s own text is not used: an attrs validator's message quotes the
    value it refused, and a dead letter's error text must not hold a payload.
    """
    fields = attrs.fields(cls)
    unknown = sorted(tree.keys() - {field.alias for field in fields})
    missing = [f.alias for f in fields if f.default is attrs.NOTHING and f.alias not in tree]
    if unknown or missing:
        wrong = [f"unknown field {name!r}" for name in unknown]
        wrong += [f"missing field {name!r}" for name in missing]
        return ", ".join(wrong)
    # attrs' own validators pass the field's Attribute among the error's args
    named = [arg.name for arg in error.args if isinstance(arg, attrs.Attribute)]
    if named:
        return f"{type(error).__name__} from the validator of field {named[0]!r}"
    return f"{type(error).__name__} from a validator, converter or __attrs_post_init__"


def encode_checked(codec: Codec, payload: object, max_payload: int) -> bytes:
    """*payload* encoded by *codec*, at most *max_payload* bytes; else `EncodeError`.

    A custom codec's own exception becomes an `EncodeError` naming its type
    only: its text may quote the payload, which no error text holds.
    """
    try:
        data = codec.encode(payload)
    except EncodeError:
        raise
    except Exception as exc:  # a custom codec's own error type
        raise EncodeError(
            f"cannot encode payload: the codec raised {type(exc).__qualname__}"
        ) from exc
    if len(data) > max_payload:  # refused alone, before it joins a batch
        raise EncodeError(f"payload is {len(data)} bytes encoded, over max_payload={max_payload}")
    return data
