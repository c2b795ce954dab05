"""Free text with typed regions (`lmclient.Tagged`): the model writes as it likes, and each
``<tag>…</tag>`` region in its text holds a value of the tag's type, constrained as it is
written and decoded after.

The regions' count is ``at_least`` to ``at_most``. A text with room for more regions may go on
after its last one; a text that has its ``at_most`` ends with it (a model that has given its
answer stops there, and spends no tokens after it). The same language is written two ways, and
a dialect sends the one its server reads:

- as xgrammar's structural tag (`structural_format`; vLLM and SGLang): the prose ``any_text``
  up to the open tag, which the engine masks natively, each region's content in the element's
  compact grammar, the close tag a constant;
- as lmclient's GBNF (`tagged_grammar`; llama.cpp, and the servers that take only a grammar):
  the prose as rules that cannot spell the open tag (`gbnf_ir.text_until`, a string
  matcher's states as rules), then the same content.

The decoder (`TaggedDecoder`) reads regions back out of the text: a region's content ends at
the first close tag after which it decodes (a JSON string may hold the close tag; the grammar
ends the value only where the JSON is whole), and each value is validated by its element's
decoder. Pure: the element's spec is compiled by `lmclient._output.types`, which calls here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Generic, TypeVar

import msgspec

from lmclient.errors import NoValueError, ValidationError

from .gbnf_ir import EMPTY, Lit, Node, Ref, alt, prefixed, seq, text_until

__all__ = [
    "TaggedDecoder",
    "TaggedRegion",
    "TaggedText",
    "structural_format",
    "tagged_grammar",
]

T = TypeVar("T")


class TaggedRegion(msgspec.Struct, Generic[T], frozen=True, kw_only=True):
    """One region of a `TaggedText`: its value, and where its content sits in the text
    (``text[start:end]``, between the open and close tags)."""

    value: T
    start: int
    end: int


class TaggedText(msgspec.Struct, Generic[T], frozen=True, kw_only=True):
    """The answer to a `lmclient.Tagged` output type: the whole ``text`` the model wrote, and its
    ``regions`` in order, each value validated. ``values`` are the regions' values, ``value``
    the last one's (the answer, after prose that reasons towards it), ``prose`` the text outside
    the regions."""

    text: str
    tag: str
    regions: tuple[TaggedRegion[T], ...]

    @property
    def values(self) -> list[T]:
        return [region.value for region in self.regions]

    @property
    def value(self) -> T:
        if not self.regions:
            raise NoValueError(
                f"the text has no <{self.tag}> region (its output type allows none: "
                "at_least=0); read .text, or ask for at_least=1"
            )
        return self.regions[-1].value

    @property
    def prose(self) -> str:
        """The text with every region, tags included, left out."""
        open_len, close_len = len(self.tag) + 2, len(self.tag) + 3
        pieces, at = [], 0
        for region in self.regions:
            pieces.append(self.text[at : region.start - open_len])
            at = region.end + close_len
        pieces.append(self.text[at:])
        return "".join(pieces)


# --------------------------------------------------------------------------------------------
# GBNF
# --------------------------------------------------------------------------------------------


def tagged_grammar(
    tag: str, content: Mapping[str, Node] | None, at_least: int, at_most: int | None
) -> dict[str, Node]:
    """The GBNF rules of a tagged text: ``content`` is the element's rules (its value is rule
    ``root``), ``None`` for text (then a region is any text without the close tag)."""
    open_, close = f"<{tag}>", f"</{tag}>"
    rules = text_until(open_, "prose", ends_with_marker=True)
    if content is None:
        rules.update(text_until(close, "value", ends_with_marker=True))
        region = seq(Ref("prose"), Ref("value"))
    else:
        rules.update(prefixed(content, "value"))
        region = seq(Ref("prose"), Ref("value"), Lit(close))
    rules["region"] = region
    tail: Node = EMPTY
    if at_most is None or at_most > at_least:
        rules.update(text_until(open_, "tail", ends_with_marker=False))
        tail = Ref("tail")
    rest: Node
    if at_most is None:
        rules["more"] = alt(seq(Ref("region"), Ref("more")), tail)
        rest = Ref("more")
    else:
        rest = EMPTY
        for _ in range(at_most - at_least):
            rest = alt(tail, seq(Ref("region"), rest))
    rules["root"] = seq(*[Ref("region")] * at_least, rest)
    return rules


# --------------------------------------------------------------------------------------------
# The structural tag (xgrammar's format, as vLLM and SGLang read it)
# --------------------------------------------------------------------------------------------


def structural_format(
    tag: str, content: str | None, at_least: int, at_most: int | None
) -> dict[str, Any]:
    """The structural tag's ``format``: ``content`` is the element's GBNF (root rule
    ``root``), ``None`` for text."""
    open_, close = f"<{tag}>", f"</{tag}>"
    prose = {"type": "tag", "begin": "", "content": {"type": "any_text"}, "end": open_}
    value: list[dict[str, Any]]
    if content is None:
        value = [{"type": "tag", "begin": "", "content": {"type": "any_text"}, "end": close}]
    else:
        value = [{"type": "grammar", "grammar": content}, {"type": "const_string", "value": close}]
    region = {"type": "sequence", "elements": [prose, *value]}
    elements = [region] * at_least
    if at_most is None:
        inner = value[0]["content"] if content is None else value[0]
        elements.append(
            {
                "type": "triggered_tags",
                "triggers": [open_],
                "tags": [{"type": "tag", "begin": open_, "content": inner, "end": close}],
            }
        )
    elif at_most > at_least:
        tail = {"type": "any_text", "excludes": [open_]}
        rest: dict[str, Any] | None = None
        for _ in range(at_most - at_least):
            then = [region] if rest is None else [region, rest]
            rest = {"type": "or", "elements": [tail, {"type": "sequence", "elements": then}]}
        assert rest is not None
        elements.append(rest)
    return elements[0] if len(elements) == 1 else {"type": "sequence", "elements": elements}


# --------------------------------------------------------------------------------------------
# Decoding
# --------------------------------------------------------------------------------------------


class TaggedDecoder:
    """Reads a `TaggedText` out of a model's text: regions found, each decoded by ``decode``
    (the element's decoder), their count checked. Its errors name ``reported``, the user's
    output type."""

    __slots__ = ("_close", "_decode", "_open", "at_least", "at_most", "reported", "tag")

    def __init__(
        self,
        tag: str,
        decode: Callable[[str], Any],
        at_least: int,
        at_most: int | None,
        reported: Any,
    ) -> None:
        self.tag, self.at_least, self.at_most, self.reported = tag, at_least, at_most, reported
        self._open, self._close = f"<{tag}>", f"</{tag}>"
        self._decode = decode

    def __call__(self, text: str) -> TaggedText[Any]:
        regions: list[TaggedRegion[Any]] = []
        at = text.find(self._open)
        while at >= 0:
            start = at + len(self._open)
            region = self._region(text, start, len(regions))
            regions.append(region)
            at = text.find(self._open, region.end + len(self._close))
        count = len(regions)
        if count < self.at_least or (self.at_most is not None and count > self.at_most):
            if self.at_most is None:
                needs = f"at least {self.at_least}"
            elif self.at_most == self.at_least:
                needs = str(self.at_least)
            else:
                needs = f"{self.at_least} to {self.at_most}"
            raise self._error(
                f"the text has {count} <{self.tag}> region{'s' * (count != 1)}, where the "
                f"output type needs {needs}",
                text,
            )
        return TaggedText(text=text, tag=self.tag, regions=tuple(regions))

    def cut_advice(self, text: str) -> str | None:
        """What to do about ``text`` cut at max_tokens before its first region: the model wrote
        prose only, and a larger max_tokens may buy more of it (Gemma 3 270M, asked to think
        in one sentence, rambled to the end of its context); ``None`` once a region began."""
        if self.at_least == 0 or self._open in text:
            return None
        return (
            f"the model wrote {len(text)} characters of prose and never began a <{self.tag}> "
            f"region, so more tokens may buy only more prose: ask the prompt for a short "
            f"reasoning and the answer in <{self.tag}> tags (an example helps), or use a lower "
            "temperature"
        )

    def _region(self, text: str, start: int, index: int) -> TaggedRegion[Any]:
        """The region whose content starts at ``start``: up to the first close tag where the
        content decodes; else the error of the content up to the first close tag."""
        end = text.find(self._close, start)
        if end < 0:
            raise self._error(f"<{self.tag}> region {index} is not closed by {self._close}", text)
        first: ValidationError | None = None
        while end >= 0:
            try:
                value = self._decode(text[start:end])
            except ValidationError as exc:
                first = first or exc
                end = text.find(self._close, end + 1)
                continue
            return TaggedRegion(value=value, start=start, end=end)
        assert first is not None
        raise self._error(f"<{self.tag}> region {index}: {first.detail}", text)

    def _error(self, detail: str, text: str) -> ValidationError:
        return ValidationError(detail, text=text, output_type=self.reported)
