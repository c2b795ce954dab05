"""regex_instance: every output must fully match its pattern, deterministically per seed."""

from __future__ import annotations

import re
import sys

import pytest

from lmclient.testing._errors import UnsatisfiableError
from lmclient.testing._regex_gen import regex_instance

# Atomic groups and possessive quantifiers are regex syntax from Python 3.11 on: before, the
# pattern itself does not compile, whatever generates its instances.
NEEDS_311 = pytest.mark.skipif(sys.version_info < (3, 11), reason="regex syntax of Python 3.11")

PATTERNS = [
    # dates, times, numbers
    r"\d{4}-\d{2}-\d{2}",
    r"(19|20)\d\d-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])",
    r"([01]\d|2[0-3]):[0-5]\d(:[0-5]\d)?",
    r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?(Z|[+-]\d{2}:\d{2})",
    r"-?(0|[1-9]\d*)",
    r"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?",
    r"[+-]?\d+(\.\d+)?",
    r"0x[0-9a-fA-F]{1,8}",
    r"0b[01]+",
    r"\d{1,3}(,\d{3})*(\.\d\d)?",
    r"(true|false)",
    r"null",
    # identifiers, emails, urls, phone numbers
    r"[A-Za-z_][A-Za-z0-9_]*",
    r"[a-z][a-z0-9-]{2,15}",
    r"[\w.+-]+@[\w-]+\.[\w.]+",
    r"[a-z0-9._%+-]+@[a-z0-9.-]+\.[a-z]{2,4}",
    r"https?://[a-z0-9.-]+(:\d{2,5})?(/[\w.-]*)*",
    r"\+?1?[ -]?\(?\d{3}\)?[ -]?\d{3}-\d{4}",
    r"\(\d{3}\) \d{3}-\d{4}",
    r"\+\d{1,3} \d{2,4} \d{3,8}",
    r"[A-Z]{2}\d{2}[A-Z0-9]{4}\d{7}([A-Z0-9]?){0,16}",
    r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}",
    r"v?\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?",
    r"#[0-9a-fA-F]{6}",
    r"(\d{1,3}\.){3}\d{1,3}",
    r"[A-Z]{3}-\d{3}",
    # alternations, groups, anchors
    r"^(yes|no|maybe)$",
    r"\A(red|green|blue)\Z",
    r"(?:cat|dog)s?",
    r"(a|bc|def)+",
    r"(?P<word>[a-z]+) (?P=word)",
    r"(['\"])[^'\"]*\1",
    r"(a)?(?(1)b|c)",
    r"(?i)hello world",
    r"(?x) \d+  \s*  [a-z]+   # verbose",
    pytest.param(r"(?>ab|a)c", marks=NEEDS_311),
    pytest.param(r"a++b", marks=NEEDS_311),
    r"(?=\w*\d)\w{6}",
    r"(?!bad)[a-z]{3}",
    r"\bword\b",
    # repeats and classes
    r"a{3}",
    r"a{2,}",
    r"[abc]{0,2}x",
    r"x*?y+?z??",
    r"[^\d\s]{4}",
    r"[^aeiou]+",
    r"\S+\s\S+",
    r"\D\W\d\w",
    r"[\w\-\.]{5}",
    r"[-a-z]+",
    r"[.?!]",
    r".{3}",
    r"[\[\]\\^$.|?*+(){}]{4}",
    r"\t\n?",
    # unicode
    r"[\u4e00-\u9fff]{2,4}",
    r"(é|ü|ß)+",
    r"[\u03b1-\u03c9]{3}",
    r"\u041f\u0440\u0438\u0432\u0435\u0442, [\u0410-\u042f\u0430-\u044f]+!",
    r"\w+",
    r"[\u00c0-\u00ff]{2}",
    r'\{"answer": "(yes|no)"\}',
    r"(\[\d+(, \d+)*\])",
]


@pytest.mark.parametrize("pattern", PATTERNS)
@pytest.mark.parametrize("seed", [0, 1, 7])
def test_output_fully_matches(pattern: str, seed: int) -> None:
    text = regex_instance(pattern, seed=seed)
    assert re.fullmatch(pattern, text), (pattern, text)


def test_enough_patterns() -> None:
    assert len(PATTERNS) >= 50


@pytest.mark.parametrize("pattern", PATTERNS[:20])
def test_same_seed_same_output(pattern: str) -> None:
    assert regex_instance(pattern, seed=3) == regex_instance(pattern, seed=3)


def test_seeds_vary_the_output() -> None:
    outputs = {regex_instance(r"[a-z]{3,8}", seed=seed) for seed in range(20)}
    assert len(outputs) > 10


def test_flags_and_compiled_patterns() -> None:
    assert re.fullmatch(r"(?s)a.b", regex_instance(re.compile(r"a.b", re.DOTALL)))
    text = regex_instance("HELLO", flags=re.IGNORECASE)
    assert text.lower() == "hello"


def test_outputs_stay_short_by_default() -> None:
    assert max(len(regex_instance(r"a+", seed=seed)) for seed in range(30)) <= 4


@pytest.mark.parametrize(
    ("pattern", "low", "high"),
    [(r"a+", 40, None), (r"[a-z]+", 12, 14), (r"(ab)*c", 9, 9), (r"\d{2,}-\w*", 30, 31)],
)
def test_length_bounds(pattern: str, low: int, high: int | None) -> None:
    for seed in range(5):
        text = regex_instance(pattern, seed=seed, min_length=low, max_length=high)
        assert re.fullmatch(pattern, text)
        assert low <= len(text) <= (high or len(text))


def test_unreachable_length_raises() -> None:
    with pytest.raises(UnsatisfiableError, match="length"):
        regex_instance(r"(ab)+", min_length=3, max_length=3)


def test_outputs_are_valid_unicode_text() -> None:
    for seed in range(20):
        regex_instance(r"[\u0000-\uffff]{5}", seed=seed).encode("utf-8")


@pytest.mark.parametrize("pattern", [r"a(?=b)", r"(?!a)a", r"\d\b\d"])
def test_unsatisfiable_patterns_raise(pattern: str) -> None:
    with pytest.raises(UnsatisfiableError):
        regex_instance(pattern)


def test_invalid_pattern_raises_re_error() -> None:
    with pytest.raises(re.error):
        regex_instance("(unclosed")
