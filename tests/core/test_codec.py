"""`JSONCodec`: what round-trips to an equal value, and what is refused up front."""

from __future__ import annotations

import collections
import enum
import json
import math
from typing import Any

import attrs
import pytest
from hypothesis import given, strategies as st

import inturn
from inturn import JSONCodec


@attrs.frozen
class Point:
    x: int
    y: int


@attrs.define
class Box:
    """Mutable, compares by value, holds anything."""

    item: object
    tags: list[str] = attrs.Factory(list)


@attrs.frozen
class Secret:
    """A private attribute: its init argument (alias) is ``token``."""

    _token: str


@attrs.frozen(kw_only=True)
class Wrapper:
    inner: object
    note: str | None = None


@attrs.frozen
class Unregistered:
    x: int


@attrs.frozen
class SubPoint(Point):
    z: int = 0


@attrs.define
class HasInitFalse:
    x: int
    y: int = attrs.field(init=False, default=0)


@attrs.define(eq=False)
class ComparesByIdentity:
    x: int


class Plain:
    def __init__(self, x: int) -> None:
        self.x = x


class Level(enum.IntEnum):
    LOW = 1


class Name(str):
    __slots__ = ()


class Count(int):
    pass


class Ratio(float):
    pass


CODEC = JSONCodec(types=[Point, Box, Secret, Wrapper])


def assert_same(got: object, want: object) -> None:
    """*got* equals *want* with the same type at every level (1 is not 1.0 or True)."""
    assert type(got) is type(want), (got, want)
    if isinstance(want, float):
        assert repr(got) == repr(want)  # -0.0 stays -0.0
    elif isinstance(want, list):
        assert isinstance(got, list)
        assert len(got) == len(want)
        for got_item, want_item in zip(got, want, strict=True):
            assert_same(got_item, want_item)
    elif isinstance(want, dict):
        assert isinstance(got, dict)
        assert list(got) == list(want)
        for name in want:
            assert_same(got[name], want[name])
    elif attrs.has(type(want)):
        cls: Any = type(want)
        for field in attrs.fields(cls):
            assert_same(getattr(got, field.name), getattr(want, field.name))
    else:
        assert got == want


def round_trip(value: object, codec: JSONCodec = CODEC) -> object:
    data = codec.encode(value)
    assert type(data) is bytes
    return codec.decode(data)


@pytest.mark.parametrize(
    "value",
    [
        None,
        True,
        False,
        0,
        -7,
        2**80,
        1.5,
        -0.0,
        1e308,
        5e-324,
        "",
        "h\u00e9llo \U0001f600 \x00 \n",
        [],
        {},
        [1, "a", None, [2.0, [True]]],
        {"a": {"b": [1, {"c": None}]}, "": 0, "\u00e9": "x"},
    ],
)
def test_json_values_round_trip(value: object) -> None:
    """JSON values come back equal and of the same type at every level."""
    assert_same(round_trip(value), value)


def test_registered_attrs_instances_round_trip() -> None:
    """Registered attrs instances, nested and inside lists and dicts, come back equal."""
    value = {
        "points": [Point(1, 2), Point(-3, 4)],
        "box": Box(Box(Point(0, 0), ["inner"]), ["outer"]),
        "secret": Secret("t0k3n"),
        "wrapped": Wrapper(inner={"p": Point(5, 6)}, note="n"),
    }
    assert_same(round_trip(value), value)


def test_attrs_instance_at_the_top_round_trips() -> None:
    """A registered attrs instance as the whole payload comes back as that class."""
    decoded = round_trip(Point(1, 2))
    assert type(decoded) is Point
    assert decoded == Point(1, 2)


def test_private_attribute_round_trips_through_its_alias() -> None:
    """A field named _token is rebuilt through its init argument, token."""
    decoded = round_trip(Secret("abc"))
    assert isinstance(decoded, Secret)
    assert decoded == Secret(token="abc")


def test_registering_a_class_twice_is_harmless() -> None:
    """Listing the same class twice registers it once."""
    codec = JSONCodec(types=[Point, Point])
    assert round_trip(Point(1, 2), codec) == Point(1, 2)


def test_codec_satisfies_the_codec_protocol() -> None:
    """JSONCodec is usable wherever an inturn.Codec is expected."""
    codec: inturn.Codec = JSONCodec()
    assert codec.decode(codec.encode([1])) == [1]


json_leaves = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
    | st.builds(Point, st.integers(), st.integers())
    | st.builds(Secret, st.text())
)
payloads = st.recursive(
    json_leaves,
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(st.text().filter(lambda name: name != "$type"), children, max_size=4)
        | st.builds(Box, children, st.lists(st.text(), max_size=3))
        | st.builds(Wrapper, inner=children, note=st.none() | st.text())
    ),
    max_leaves=30,
)


@given(payloads)
def test_every_accepted_value_round_trips(value: object) -> None:
    """decode(encode(x)) equals x, type for type, for every value the codec accepts."""
    assert_same(round_trip(value), value)


def self_containing_list() -> list[object]:
    value: list[object] = []
    value.append(value)
    return value


def self_containing_dict() -> dict[str, object]:
    value: dict[str, object] = {}
    value["me"] = value
    return value


def deeply_nested() -> list[object]:
    value: list[object] = []
    for _ in range(100_000):
        value = [value]
    return value


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ((1, 2), "cannot encode a tuple"),
        ([1, (2,)], "cannot encode a tuple"),
        ({1, 2}, "cannot encode a set"),
        (frozenset(), "cannot encode a frozenset"),
        (b"bytes", "cannot encode a bytes"),
        (bytearray(b"x"), "cannot encode a bytearray"),
        (math.nan, "finite"),
        (math.inf, "finite"),
        ([-math.inf], "finite"),
        ({1: "a"}, "keys must be str, not int"),
        ({None: "a"}, "keys must be str, not NoneType"),
        ({("a",): 1}, "keys must be str, not tuple"),
        ({Name("k"): 1}, "keys must be str, not Name"),
        (Level.LOW, "cannot encode a Level"),
        (Name("x"), "cannot encode a Name"),
        (Count(3), "cannot encode a Count"),
        (Ratio(0.5), "cannot encode a Ratio"),
        (collections.OrderedDict(a=1), "cannot encode a OrderedDict"),
        (1j, "cannot encode a complex"),
        (Plain(1), "cannot encode a Plain payload$"),
        ({"$type": "x"}, "'\\$type' is reserved"),
        ([{"a": {"$type": 1}}], "'\\$type' is reserved"),
        ("\ud800", "surrogate"),
        ({"\udfff": 1}, "surrogate"),
        (Box("\ud83d"), "surrogate"),
        (Box((1, 2)), "cannot encode a tuple"),
        (self_containing_list(), "contains itself"),
        (self_containing_dict(), "contains itself"),
        (deeply_nested(), "nested too deeply"),
        pytest.param(10**5000, "ints must have at most", id="an-int-too-long-for-str"),
        pytest.param([10**5000], "ints must have at most", id="a-list-of-one"),
    ],
)
def test_values_that_would_not_round_trip_are_refused(value: object, message: str) -> None:
    """A value JSON would change or cannot hold raises EncodeError (a TypeError) naming why."""
    with pytest.raises(inturn.EncodeError, match=message) as exc_info:
        CODEC.encode(value)
    assert isinstance(exc_info.value, TypeError)


@pytest.mark.parametrize("value", [Unregistered(1), SubPoint(1, 2, 3), [Box(Unregistered(2))]])
def test_unregistered_attrs_class_is_refused_with_a_hint(value: object) -> None:
    """An attrs instance of an unregistered class is refused, hinting at types=[...]."""
    with pytest.raises(
        inturn.EncodeError, match=r"register attrs classes with JSONCodec\(types=\.\.\.\)"
    ):
        CODEC.encode(value)


def test_default_codec_registers_nothing() -> None:
    """JSONCodec() refuses attrs instances until their class is registered."""
    with pytest.raises(inturn.EncodeError, match="cannot encode a Point payload"):
        JSONCodec().encode(Point(1, 2))


def test_int_too_long_for_json_text_is_refused() -> None:
    """An int beyond Python's int-to-str digit limit raises EncodeError, not ValueError."""
    with pytest.raises(inturn.EncodeError):
        CODEC.encode(10**5000)


@pytest.mark.parametrize(
    ("cls", "message"),
    [
        (Plain, "can only register attrs classes"),
        (dict, "can only register attrs classes"),
        (HasInitFalse, "init=False fields"),
        (ComparesByIdentity, "compare by value"),
    ],
)
def test_registration_refuses_classes_that_cannot_round_trip(cls: type, message: str) -> None:
    """Registering a class that could not be rebuilt equal raises TypeError naming why."""
    with pytest.raises(TypeError, match=message):
        JSONCodec(types=[Point, cls])


def make_twin() -> type:
    @attrs.frozen
    class Twin:
        x: int

    return Twin


def test_registration_refuses_two_classes_with_one_name() -> None:
    """Two distinct classes with the same qualified name cannot both be registered."""
    first, second = make_twin(), make_twin()
    assert first is not second
    assert first.__qualname__ == second.__qualname__
    with pytest.raises(
        ValueError, match=r"both named 'tests\.core\.test_codec\.make_twin\.<locals>\.Twin'"
    ):
        JSONCodec(types=[first, second])


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"not json",
        b"{",
        b"\xff\xfe\x00",
        b"[1, 2",
        b'{"$type": "nowhere.Nothing", "x": 1}',
        b'{"$type": 5}',
        b'{"$type": ["tests.core.test_codec.Point"]}',
        b'{"$type": null, "a": 1}',
        b'{"$type": "tests.core.test_codec.Point", "x": 1}',
        b'{"$type": "tests.core.test_codec.Point", "x": 1, "y": 2, "z": 3}',
        b"[" * 100_000,
    ],
)
def test_garbage_raises_decode_error(data: bytes) -> None:
    """Bytes that are not a payload this codec produced raise DecodeError (a ValueError)."""
    with pytest.raises(inturn.DecodeError) as exc_info:
        CODEC.decode(data)
    assert isinstance(exc_info.value, ValueError)


def test_type_tag_names_the_qualified_class() -> None:
    """The encoded "$type" is module + qualified name, so the garbage cases above are real."""
    data = CODEC.encode(Point(1, 2))
    assert b'"$type":"tests.core.test_codec.Point"' in data


def test_decode_error_for_a_bad_document_keeps_its_cause() -> None:
    """A DecodeError from bad JSON chains the parser's error as its cause."""
    with pytest.raises(inturn.DecodeError, match="cannot decode payload") as exc_info:
        CODEC.decode(b"{")
    assert isinstance(exc_info.value.__cause__, ValueError)


def test_unknown_type_is_a_decode_error() -> None:
    """A payload of a class this codec did not register raises DecodeError naming it."""
    data = CODEC.encode(Point(1, 2))
    with pytest.raises(
        inturn.DecodeError, match=r"'tests\.core\.test_codec\.Point' is not registered"
    ):
        JSONCodec(types=[Box]).decode(data)


# Stable names: what the journal stores is the name, not where the class lives.

NAMED = JSONCodec(types={"point": Point, "box": Box, "v2.secret": Secret})


def test_a_named_type_round_trips_under_its_name() -> None:
    """A class registered under a name is stored as that name and rebuilt from it."""
    value = Box([Point(1, 2), Secret("s")], ["t"])
    data = NAMED.encode(value)
    assert b'"$type":"box"' in data
    assert b'"$type":"point"' in data
    assert b'"$type":"v2.secret"' in data
    assert b"test_codec" not in data
    assert_same(NAMED.decode(data), value)


def test_list_form_is_the_mapping_under_module_qualnames() -> None:
    """types=[Point] stores what types={"tests.core.test_codec.Point": Point} does."""
    by_qualname = JSONCodec(types={"tests.core.test_codec.Point": Point})
    data = CODEC.encode(Point(1, 2))
    assert data == by_qualname.encode(Point(1, 2))
    assert by_qualname.decode(data) == Point(1, 2)


def defined_in(module: str) -> type:
    @attrs.frozen
    class PaymentEvent:
        amount: int

    PaymentEvent.__module__ = module
    PaymentEvent.__qualname__ = "PaymentEvent"
    return PaymentEvent


@pytest.mark.parametrize("module", ["__main__", "__mp_main__"])
def test_a_class_from_main_needs_a_name(module: str) -> None:
    """A __main__ class in list form is refused with a TypeError that shows how to name it."""
    cls = defined_in(module)
    with pytest.raises(TypeError) as exc_info:
        JSONCodec(types=[Point, cls])
    message = str(exc_info.value)
    assert f"PaymentEvent is defined in {module}" in message
    assert "JSONCodec(types={'payment_event': PaymentEvent})" in message
    assert f"{{'{module}.PaymentEvent': PaymentEvent}}" in message


@pytest.mark.parametrize("name", ["payment_event", "__main__.PaymentEvent"])
def test_a_class_from_main_registers_under_a_name(name: str) -> None:
    """Named, a __main__ class round-trips, under its old module.qualname too."""
    cls = defined_in("__main__")
    codec = JSONCodec(types={name: cls})
    data = codec.encode(cls(5))
    assert data == b'{"$type":"%s","amount":5}' % name.encode()
    assert codec.decode(data) == cls(5)


@pytest.mark.parametrize(
    "name", ["p", "$point", "a.b.C", "\u00e9v\u00e9nement", "x-1/2", "<locals>"]
)
def test_names_may_hold_any_printable_character_but_space(name: str) -> None:
    """Dots (a module.qualname), "$" and non-ASCII letters are all fine in a name."""
    codec = JSONCodec(types={name: Point})
    assert codec.decode(codec.encode(Point(1, 2))) == Point(1, 2)


@pytest.mark.parametrize(
    "name", ["", " ", "a b", "tab\t", "line\n", "\x00", "nbsp\u00a0", "\ud800"]
)
def test_names_that_would_be_hard_to_read_or_store_are_refused(name: str) -> None:
    """An empty name, whitespace, control characters or lone surrogates raise ValueError."""
    with pytest.raises(ValueError, match="must be non-empty, printable, and without spaces"):
        JSONCodec(types={name: Point})


@pytest.mark.parametrize("name", [1, None, b"point", Point])
def test_a_name_must_be_a_str(name: Any) -> None:
    """A name that is not a str (a mapping the wrong way round, say) raises TypeError."""
    with pytest.raises(TypeError, match="payload type names must be str"):
        JSONCodec(types={name: Point})


def test_two_names_for_one_class_are_refused() -> None:
    """One class under two names raises ValueError: encode could not pick one."""
    with pytest.raises(ValueError, match="Point is registered as both 'point' and 'old_point'"):
        JSONCodec(types={"point": Point, "old_point": Point})


@pytest.mark.parametrize(
    ("cls", "message"),
    [
        (Plain, "can only register attrs classes"),
        (Point(1, 2), "can only register attrs classes"),
        (HasInitFalse, "init=False fields"),
        (ComparesByIdentity, "compare by value"),
    ],
)
def test_named_registration_checks_the_class_too(cls: Any, message: str) -> None:
    """A class that could not be rebuilt equal is refused under a name as in a list."""
    with pytest.raises(TypeError, match=message):
        JSONCodec(types={"point": Point, "other": cls})


# Evolution: the class a payload was encoded with is not the one that decodes it.


@attrs.frozen
class EntryV1:
    account: str
    amount: int


@attrs.frozen
class EntryV2:
    """EntryV1 with fields added, each with a default."""

    account: str
    amount: int
    currency: str = "EUR"
    tags: list[str] = attrs.Factory(list)
    note: str | None = attrs.field(default=None, kw_only=True)


@attrs.frozen
class EntryRenamedAttribute:
    """EntryV1 with ``amount`` renamed ``cents``; its init argument (alias) is still amount."""

    account: str
    cents: int = attrs.field(alias="amount")


@attrs.frozen
class EntryWithRequiredField:
    account: str
    amount: int
    currency: str


@attrs.frozen
class EntryWithoutAmount:
    account: str


OLD = JSONCodec(types={"entry": EntryV1})


def test_a_payload_decodes_after_its_class_gains_fields_with_defaults() -> None:
    """The fields a payload lacks take their defaults (plain, factory, keyword-only)."""
    data = OLD.encode(EntryV1("acc", 5))
    assert JSONCodec(types={"entry": EntryV2}).decode(data) == EntryV2(
        "acc", 5, "EUR", [], note=None
    )


def test_a_renamed_class_and_attribute_decode_under_their_old_names() -> None:
    """Renaming a class or an attribute changes nothing stored: old name, old alias."""
    data = OLD.encode(EntryV1("acc", 5))
    decoded = JSONCodec(types={"entry": EntryRenamedAttribute}).decode(data)
    assert isinstance(decoded, EntryRenamedAttribute)
    assert decoded == EntryRenamedAttribute("acc", amount=5)
    assert decoded.cents == 5


@pytest.mark.parametrize(
    ("cls", "message"),
    [
        (
            EntryWithRequiredField,
            r"cannot rebuild a 'entry' payload \(EntryWithRequiredField\): missing field 'currency'$",
        ),
        (
            EntryWithoutAmount,
            r"cannot rebuild a 'entry' payload \(EntryWithoutAmount\): unknown field 'amount'$",
        ),
    ],
)
def test_a_missing_or_unknown_field_is_a_decode_error_naming_it(cls: type, message: str) -> None:
    """A field the class now requires, or no longer has, is a DecodeError naming field and type."""
    data = OLD.encode(EntryV1("4111-1111", 987654321))
    with pytest.raises(inturn.DecodeError, match=message) as exc_info:
        JSONCodec(types={"entry": cls}).decode(data)
    assert "4111" not in str(exc_info.value)
    assert "987654321" not in str(exc_info.value)


def valid_name(name: str) -> bool:
    return name != "" and name.isprintable() and " " not in name


@given(st.text(max_size=8))
def test_a_name_is_accepted_exactly_when_valid(name: str) -> None:
    """Every non-empty printable name without a space is accepted; every other str is not."""
    if valid_name(name):
        codec = JSONCodec(types={name: Point})
        assert codec.decode(codec.encode(Point(1, 2))) == Point(1, 2)
    else:
        with pytest.raises(ValueError, match="must be non-empty"):
            JSONCodec(types={name: Point})


@given(
    st.lists(st.text(min_size=1).filter(valid_name), min_size=4, max_size=4, unique=True),
    payloads,
)
def test_every_accepted_value_round_trips_under_any_names(names: list[str], value: object) -> None:
    """decode(encode(x)) equals x, type for type, whatever names the classes are given."""
    codec = JSONCodec(types=dict(zip(names, [Point, Box, Secret, Wrapper], strict=True)))
    assert_same(round_trip(value, codec), value)


@given(st.one_of(st.integers(), st.booleans(), st.integers(-(10**4000), 10**4000)))
def test_an_int_payload_is_written_as_json_writes_it(value: int) -> None:
    """Ints take a short way past the tree walk: the same bytes as the JSON encoder's (bools too)."""
    assert CODEC.encode(value) == json.dumps(value).encode()
    assert CODEC.decode(CODEC.encode(value)) == value


@given(st.from_regex(rb"\A[0-9]{1,30}\Z") | st.binary(max_size=8))
def test_digits_decode_as_json_reads_them(data: bytes) -> None:
    """Ints take a short way in: what JSON reads as an int decodes to it, the rest (a leading
    zero, say) is a DecodeError exactly when JSON refuses it."""
    try:
        expected = json.loads(data.decode())  # UTF-8, as the codec reads (loads guesses)
    except ValueError:
        with pytest.raises(inturn.DecodeError):
            CODEC.decode(data)
    else:
        if isinstance(expected, int):
            assert CODEC.decode(data) == expected
