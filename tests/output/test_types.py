"""Output types into specs: markers, caching, schema refinements, decoding edge cases."""

from __future__ import annotations

import collections.abc
import datetime
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, Literal

import msgspec
import pytest

import lmclient
from lmclient._output import types
from lmclient._output.patterns import gbnf_alternation, regex_alternation, search_anchored
from lmclient._output.types import OUTPUT_TYPES, compile_output
from lmclient.testing import FakeLLM


def test_choice_order_is_kept_although_literals_compare_equal() -> None:
    assert compile_output(Literal["b", "a"]).options == ("b", "a")
    assert compile_output(Literal["a", "b"]).options == ("a", "b")


def test_specs_are_cached_per_type() -> None:
    assert compile_output(list[int]) is compile_output(list[int])
    assert compile_output(Literal["a", "b"]) is compile_output(Literal["a", "b"])
    assert compile_output(lmclient.Regex("a+")) is compile_output(lmclient.Regex("a+"))
    schema = lmclient.JsonSchema({"type": "integer"})
    assert compile_output(schema) is compile_output(schema)


def test_one_spec_cache_keys_markers_by_identity_and_stays_bounded() -> None:
    """`compile_output` is the one type → spec cache: a `JsonSchema` is its own key (its schema
    is a dict the user may change, so two markers are two types), and types made anew on every
    call do not grow it past its bound."""
    first, second = (
        lmclient.JsonSchema({"type": "integer"}),
        lmclient.JsonSchema({"type": "integer"}),
    )
    assert compile_output(first) is not compile_output(second)
    assert compile_output(first) is compile_output(first)
    for n in range(types._SPECS_BOUND + 10):
        compile_output(msgspec.defstruct(f"Made{n}", [("x", int)]))
    assert len(types._SPECS) <= types._SPECS_BOUND


@pytest.mark.parametrize(
    ("factory", "error"),
    [
        (lambda: lmclient.Regex("("), ValueError),
        (lambda: lmclient.Regex(""), TypeError),
        (lambda: lmclient.Grammar(" "), TypeError),
        (lambda: lmclient.Grammar('root ::= "a"', syntax="peg"), ValueError),  # type: ignore[arg-type]
        (lambda: lmclient.Choice([]), TypeError),
        (lambda: lmclient.Choice("ab"), TypeError),
        (lambda: lmclient.Choice(["a", "a"]), ValueError),
        (lambda: lmclient.JsonSchema(["x"]), TypeError),  # type: ignore[arg-type]
        (lambda: compile_output(lmclient.JsonSchema({"$ref": "#/$defs/missing"})), ValueError),
        (lambda: compile_output(object), TypeError),
        (lambda: compile_output(list["Undefined"]), TypeError),  # type: ignore[name-defined]  # noqa: F821
    ],
)
def test_bad_output_types_fail_at_once(factory: Any, error: type[Exception]) -> None:
    with pytest.raises(error):
        factory()


def test_grammar_from_choices_is_exact_gbnf() -> None:
    grammar = lmclient.Grammar.from_choices(['say "hi"', "a\\b", "new\nline"])
    assert grammar.text == 'root ::= "say \\"hi\\"" | "a\\\\b" | "new\\nline"'
    assert gbnf_alternation(["x"]) == 'root ::= "x"'


def test_regex_alternation_escapes_only_metacharacters() -> None:
    pattern = regex_alternation(["a b", "1+1", "(x)", "é"])
    assert pattern == r"(?:a b|1\+1|\(x\)|é)"
    import re

    for option in ["a b", "1+1", "(x)", "é"]:
        assert re.fullmatch(pattern, option)
    assert not re.fullmatch(pattern, "11")


FILL = r'[^"\\]*'


@pytest.mark.parametrize(
    ("pattern", "sent"),
    [
        ("[0-9]+", f"^{FILL}([0-9]+){FILL}$"),
        ("^[0-9]+", f"^([0-9]+){FILL}$"),
        ("[0-9]+$", f"^{FILL}([0-9]+)$"),
        ("^[0-9]+$", "^[0-9]+$"),  # already anchored: kept exactly
        ("a|b", f"^{FILL}(a|b){FILL}$"),  # the group keeps the alternation whole
        ("a\\$", f"^{FILL}(a\\$){FILL}$"),  # an escaped `$` is a literal, not an anchor
        ("[$^]x", f"^{FILL}([$^]x){FILL}$"),  # so are `^`/`$` in a class
        ("x[]^]y", f"^{FILL}(x[]^]y){FILL}$"),  # `]` first in a class is a member
        ("^a|b$", "^a|b$"),  # anchors bound to branches: kept
        ("(^a)", "(^a)"),  # an inner anchor: kept
        ("a$b", "a$b"),
    ],
)
def test_search_patterns_are_anchored_for_llamacpp(pattern: str, sent: str) -> None:
    import re

    assert search_anchored(pattern) == sent
    if sent != pattern:  # same strings found, among those without quotes or backslashes
        for text in ["1", "x12y", "ab", "a$", "zx]y", "$x", "b", "", "q"]:
            assert bool(re.search(pattern, text)) == bool(re.fullmatch(sent[1:-1], text)), text


def test_search_patterns_fill_at_most_max_length() -> None:
    assert search_anchored("^x", 8) == r'^(x)[^"\\]{0,8}$'
    assert search_anchored("x", 3) == r'^[^"\\]{0,3}(x)[^"\\]{0,3}$'


def test_scalars_use_json_encodings() -> None:
    assert compile_output(bool).decode("false") is False
    with pytest.raises(lmclient.ValidationError):
        compile_output(bool).decode("False")
    assert compile_output(float).decode("1") == 1.0


def test_nested_datetimes_and_decimals_get_formats() -> None:
    class Event(msgspec.Struct):
        at: datetime.datetime
        maybe: datetime.time | None = None

    schema = compile_output(list[Event]).schema
    assert schema is not None
    props = schema["$defs"]["Event"]["properties"]
    assert props["at"] == {"type": "string", "format": "date-time"}
    assert props["maybe"]["anyOf"][0] == {"type": "string", "format": "time"}


class Node(msgspec.Struct):
    value: int
    children: list[Node] = []


def test_recursive_struct_keeps_its_definitions() -> None:
    spec = compile_output(Node)
    assert spec.schema is not None
    assert spec.schema["type"] == "object" and "Node" in spec.schema["$defs"]
    assert spec.decode('{"value": 1, "children": [{"value": 2}]}') == Node(1, [Node(2)])


def test_json_schema_marker_validates_on_the_client() -> None:
    spec = compile_output(
        lmclient.JsonSchema({"type": "array", "items": {"type": "integer"}, "maxItems": 2})
    )
    assert spec.decode("[1, 2]") == [1, 2]
    with pytest.raises(lmclient.ValidationError, match=r"maxItems|at most|longer"):
        spec.decode("[1, 2, 3]")
    typed = compile_output(lmclient.JsonSchema({"type": "integer"}, type=int))
    assert typed.decode("5") == 5


def test_wrapped_decoder_unwraps_and_validates() -> None:
    spec = compile_output(list[int])
    schema, decode = spec.wrapped
    assert schema["properties"]["value"] == {"type": "array", "items": {"type": "integer"}}
    assert decode('{"value": [1, 2]}') == [1, 2]
    for bad in ('{"value": ["x"]}', "[1]", '{"other": 1}'):
        with pytest.raises(lmclient.ValidationError):
            decode(bad)


def test_element_type_of_array_outputs() -> None:
    assert compile_output(list[int]).element_type is int
    assert compile_output(tuple[str, ...]).element_type is str
    assert compile_output(set[int]).element_type is int
    assert compile_output(tuple[int, str]).element_type is None


def test_import_is_light() -> None:
    code = (
        "import sys, lmclient\n"
        "heavy = {'pydantic', 'openai', 'respx', 'numpy'} & set(sys.modules)\n"
        "print(sorted(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# -- a type lmclient cannot use -------------------------------------------------------------------


class _Plain:
    """A class of the user's own, neither a Struct nor a dataclass."""

    def __init__(self, name: str) -> None:
        self.name = name


_TAKES = (
    "It takes str, int, float, bool, Literal, Enum, msgspec.Struct, dataclass, TypedDict,"
    " NamedTuple, list[T], dict[str, T], union, Optional, Annotated[T, msgspec.Meta(...)],"
    " datetime, UUID, Decimal, typing.Any, pydantic BaseModel, lmclient.Choice, lmclient.Regex,"
    " lmclient.Grammar, lmclient.JsonSchema, lmclient.Tagged, and these nested; make a class of"
    " your own a"
    " msgspec.Struct or a dataclass (docs/output-types.md)"
)
_PLAIN = f"type {_Plain!r} is not supported"


@pytest.mark.parametrize(
    ("output_type", "reason"),
    [
        (_Plain, _PLAIN),
        (list[_Plain], _PLAIN),  # the field's type that msgspec names
        (dict[str, _Plain], _PLAIN),
        (object, "type <class 'object'> is not supported"),
        (
            collections.abc.Callable[[int], int],
            "type <class 'collections.abc.Callable'> is not supported",
        ),
        (complex, "type <class 'complex'> is not supported"),
        ("int", "a string is not a type: pass the type itself, not its name"),
    ],
    ids=repr,
)
def test_an_unsupported_type_is_told_what_lmclient_takes(output_type: Any, reason: str) -> None:
    """Not msgspec's advice (a ``schema_hook``, which lmclient does not take): a TypeError, as
    before, naming the type and the field's type msgspec could not use."""
    with pytest.raises(TypeError) as info:
        compile_output(output_type)
    message = str(info.value)
    assert message == f"lmclient cannot use {output_type!r} as an output type ({reason}). {_TAKES}"
    assert "schema_hook" not in message


def test_a_call_with_an_unsupported_type_is_told_before_any_request(
    fake: FakeLLM, url: str
) -> None:
    with lmclient.Client(url, "m", dialect="vllm") as client, pytest.raises(TypeError) as info:
        client.generate("Q", _Plain)
    assert (
        str(info.value) == f"lmclient cannot use {_Plain!r} as an output type ({_PLAIN}). {_TAKES}"
    )
    assert fake.requests == []


def test_a_pydantic_model_is_taken() -> None:
    pydantic = pytest.importorskip("pydantic")  # in the dev extra: never skipped by make test

    class Pet(pydantic.BaseModel):  # type: ignore[misc,name-defined]
        name: str

    assert compile_output(Pet).decode('{"name":"Rex"}') == Pet(name="Rex")


def test_the_types_an_error_lists_are_the_docs_table() -> None:
    """`OUTPUT_TYPES` is the first column of docs/output-types.md's table, both ways: each
    entry is in it, and each type it spells as code is an entry."""
    doc = Path(__file__).parents[2] / "docs" / "output-types.md"
    table = doc.read_text().split("| output type | constraint sent |", 1)[1].split("\n\n", 1)[0]
    cells = [re.split(r"(?<!\\)\|", row)[1] for row in table.splitlines()[2:]]
    column = " ".join(cells)
    for entry in OUTPUT_TYPES:
        assert entry in column.replace("`", ""), entry
    names = {re.split(r"[\[(]", entry)[0].split()[-1] for entry in OUTPUT_TYPES}
    spelt = {re.split(r"[\[(]", code)[0] for code in re.findall(r"`([^`]+)`", column)}
    assert spelt <= names  # (the names not spelt as code: dataclass, union)
