"""The key rules: `validate_key` and `validate_unique`, synchronously."""

from __future__ import annotations

import pytest
from hypothesis import example, given, strategies as st

import inturn
from inturn.keys import MAX_KEY_BYTES, validate_key, validate_unique

# Every code point, lone surrogates included (hypothesis leaves them out by default).
ANY_CHAR = st.characters(exclude_categories=())
# Runs of multibyte characters land near the 256-byte limit often.
NEAR_LIMIT = st.text(
    st.sampled_from("a\x00\u00e9\u20ac\U0001f600\ud800"), min_size=60, max_size=260
)


def broken_rules(key: str) -> set[str]:
    """The reference: the words naming each issue rule that *key* breaks."""
    broken = set()
    if key == "":
        broken.add("empty")
    if "\x00" in key:
        broken.add("NUL")
    if any(0xD800 <= ord(char) <= 0xDFFF for char in key):
        broken.add("surrogate")
    elif len(key.encode("utf-8")) > 256:
        broken.add("256 bytes")
    return broken


def test_max_key_bytes_is_the_documented_limit() -> None:
    """The limit the rules enforce is the 256 bytes the issue names."""
    assert MAX_KEY_BYTES == 256


def test_plain_key_is_returned_unchanged() -> None:
    """A key that obeys every rule comes back as the same string."""
    assert validate_key("account-42") == "account-42"


def test_empty_key_is_refused() -> None:
    """An empty key raises InvalidKey saying it must not be empty."""
    with pytest.raises(inturn.InvalidKey, match="must not be empty"):
        validate_key("")


@pytest.mark.parametrize("key", ["\x00", "a\x00", "\x00b", "a\x00b"])
def test_nul_is_refused(key: str) -> None:
    """A key containing NUL anywhere raises InvalidKey naming NUL."""
    with pytest.raises(inturn.InvalidKey, match="NUL"):
        validate_key(key)


@pytest.mark.parametrize("key", ["\ud800", "a\udfff", "\udc00b", "x\ud83dy"])
def test_lone_surrogate_is_refused(key: str) -> None:
    """A key with a lone surrogate raises InvalidKey naming UTF-8 and the surrogate."""
    with pytest.raises(inturn.InvalidKey, match=r"UTF-8.*surrogate"):
        validate_key(key)


def test_lone_surrogate_error_has_no_unicode_context() -> None:
    """The InvalidKey for a surrogate does not chain the internal UnicodeEncodeError."""
    with pytest.raises(inturn.InvalidKey) as exc_info:
        validate_key("\ud800")
    assert exc_info.value.__suppress_context__
    assert exc_info.value.__cause__ is None


@pytest.mark.parametrize(
    ("key", "size"),
    [
        ("a" * 256, 256),
        ("\u00e9" * 128, 256),  # 2-byte characters ending exactly on the limit
        ("a" * 253 + "\u20ac", 256),  # a 3-byte character ending exactly on the limit
        ("a" * 252 + "\U0001f600", 256),  # a 4-byte character ending exactly on the limit
    ],
)
def test_key_of_exactly_256_bytes_is_accepted(key: str, size: int) -> None:
    """A key of exactly 256 UTF-8 bytes, multibyte ones included, is accepted."""
    assert len(key.encode("utf-8")) == size
    assert validate_key(key) == key


@pytest.mark.parametrize(
    ("key", "size"),
    [
        ("a" * 257, 257),
        ("\u00e9" * 128 + "a", 257),
        ("a" * 254 + "\u20ac", 257),  # the 3-byte character straddles the limit
        ("a" * 253 + "\U0001f600", 257),  # the 4-byte character straddles the limit
        ("\U0001f600" * 65, 260),  # only 65 characters: the limit counts bytes
    ],
)
def test_key_over_256_bytes_is_refused(key: str, size: int) -> None:
    """A key over 256 UTF-8 bytes raises InvalidKey naming the limit and its size."""
    assert len(key.encode("utf-8")) == size
    with pytest.raises(inturn.InvalidKey, match=rf"at most 256 bytes in UTF-8, not {size}$"):
        validate_key(key)


@pytest.mark.parametrize("key", [None, b"key", 42, 4.2, ["k"], object()])
def test_non_str_key_raises_type_error(key: object) -> None:
    """A key that is not a str raises a plain TypeError, not InvalidKey."""
    with pytest.raises(TypeError, match=f"must be a str, not {type(key).__name__}") as exc_info:
        validate_key(key)
    assert not isinstance(exc_info.value, inturn.InvalidKey)


class Key(str):
    """A str subclass, as an application might define for its ids."""

    __slots__ = ()


def test_str_subclass_is_accepted_as_plain_str() -> None:
    """A str subclass is accepted and comes back as a plain str with the same text."""
    result = validate_key(Key("account-42"))
    assert type(result) is str
    assert result == "account-42"


def test_str_subclass_is_held_to_the_rules() -> None:
    """A str subclass that breaks a rule is refused like a plain str."""
    with pytest.raises(inturn.InvalidKey, match="must not be empty"):
        validate_key(Key(""))


class LyingKey(str):
    """A str subclass whose __str__ returns something other than its own text."""

    __slots__ = ()

    def __str__(self) -> str:
        return "looks-fine"


def test_str_subclass_is_judged_by_its_text_not_its_str() -> None:
    """A str subclass is validated and returned by its own characters, not by __str__."""
    with pytest.raises(inturn.InvalidKey, match="must not be empty"):
        validate_key(LyingKey(""))
    assert validate_key(LyingKey("k")) == "k"


def test_what_names_the_argument_in_messages() -> None:
    """The *what* argument replaces "key" in the messages."""
    with pytest.raises(inturn.InvalidKey, match=r"^lane must not be empty$"):
        validate_key("", what="lane")
    with pytest.raises(TypeError, match=r"^lane must be a str, not int$"):
        validate_key(1, what="lane")


def test_validate_unique_accepts_none() -> None:
    """validate_unique(None) returns None: no unique key is not an error."""
    assert validate_unique(None) is None


def test_validate_unique_returns_a_valid_key() -> None:
    """validate_unique returns a unique key that obeys the rules."""
    assert validate_unique("order-7") == "order-7"


@pytest.mark.parametrize(
    ("unique", "rule"),
    [("", "empty"), ("a\x00", "NUL"), ("\ud800", "surrogate"), ("a" * 257, "256 bytes")],
)
def test_validate_unique_applies_the_key_rules(unique: str, rule: str) -> None:
    """validate_unique refuses what validate_key refuses, naming "unique" and the rule."""
    with pytest.raises(inturn.InvalidKey, match=f"^unique must .*{rule}"):
        validate_unique(unique)


def test_validate_unique_rejects_non_str() -> None:
    """A unique key that is neither None nor a str raises TypeError."""
    with pytest.raises(TypeError, match=r"^unique must be a str, not int$"):
        validate_unique(7)


@given(key=st.text(ANY_CHAR) | st.text(ANY_CHAR, min_size=60, max_size=270) | NEAR_LIMIT)
@example(key="")
@example(key="\u00e9" * 128)
@example(key="\u00e9" * 128 + "a")
@example(key="\U0001f600" * 64)
@example(key="\U0001f600" * 64 + "a")
def test_validate_key_matches_the_reference_rules(key: str) -> None:
    """validate_key accepts exactly the strings breaking no rule, else names a broken one."""
    broken = broken_rules(key)
    if not broken:
        assert validate_key(key) == key
    else:
        with pytest.raises(inturn.InvalidKey) as exc_info:
            validate_key(key)
        assert isinstance(exc_info.value, ValueError)
        assert any(rule in str(exc_info.value) for rule in broken)
