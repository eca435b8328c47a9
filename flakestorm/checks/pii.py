"""PII detection for the ``excludes_pii`` invariant (SPEC §3).

Each kind is a candidate regex plus a validator, tuned so that the numbers agents print all
day (prices, dates, times, versions, order numbers, ISBNs, percentages) are not reported:

``email``
    ``local@domain.tld`` with a letter-only TLD of two or more characters.
``phone``
    Either an international number written with a leading ``+`` (8 to 15 digits, separators
    `` .-()`` allowed), or a North-American number written with separators
    (``(555) 123-4567``, ``555-123-4567``, ``555.123.4567``, optional ``+1``/``1`` prefix) whose
    area code starts with 2-9. Undelimited digit runs (``5551234567``) and 7-digit local numbers
    are not reported: they are indistinguishable from order numbers and counts. A number glued
    to letters, ``#`` or ``-`` (``SKU-555-123-4567``, ``#555-123-4567``) is a product or order
    code, not a phone.
``ssn``
    ``AAA-GG-SSSS`` with dashes, excluding numbers the SSA never issues (area 000, 666 or
    9xx, group 00, serial 0000). Nine undelimited digits are not reported (order numbers).
``credit_card``
    13 to 19 digits, contiguous or in groups of 4 (or Amex/Diners 4-6-5 / 4-6-4) with one
    consistent separator, starting with an issuer digit (2-6) and passing the Luhn check.
    ISBN-13s start with 978/979 and so never qualify.
``iban``
    Country code, two check digits and the BBAN, contiguous or in groups of 4, whose length
    matches the country's registered IBAN length and whose mod-97 checksum is 1.
``ip_address``
    Dotted-quad IPv4 with every octet 0-255 and no leading zeros, and IPv6 as validated by
    :mod:`ipaddress` with at least three groups written (so ``12:30:45`` times and ``a::b``
    never qualify; MAC addresses are not IPv6). An IPv4-shaped number right after a version
    word (``version 10.0.0.1``, ``v 1.2.3.4``, ``release``, ``build``, ``firmware``,
    ``section``...) is a version or section number, not an address: the surrounding words
    decide the ambiguity, and a bare ``10.0.0.1`` is reported.

A finding is reported with a masked excerpt that never contains the whole value
(``j***@e***.com``, ``***-**-6789``, ``**** **** **** 1111``, ``GB**...5432``).
"""

from __future__ import annotations

import bisect
import ipaddress
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from flakestorm.config import PiiKind


@dataclass(frozen=True)
class PiiMatch:
    """One piece of PII found in a text."""

    kind: PiiKind
    start: int
    end: int
    masked: str
    """The value with most of it hidden, safe to print."""

    def __str__(self) -> str:
        return f"{self.kind.value} `{self.masked}` at {self.start}"


def find_pii(text: str, kinds: Iterable[PiiKind] | None = None) -> list[PiiMatch]:
    """Every PII finding of ``kinds`` (default: all) in ``text``, in text order.

    Where two findings overlap, the more specific kind wins (email, IBAN, credit card, SSN,
    IP address, phone: the order of :data:`_PRIORITY`).
    """
    wanted = set(PiiKind) if kinds is None else set(kinds)
    found = _Spans()
    for kind in _PRIORITY:
        if kind in wanted:
            for match in _DETECTORS[kind](text):
                found.add(match)
    return found.matches


class _Spans:
    """Non-overlapping findings kept in text order; a finding overlapping a kept one is dropped."""

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.matches: list[PiiMatch] = []

    def add(self, match: PiiMatch) -> bool:
        i = bisect.bisect_left(self.starts, match.start)
        if i > 0 and self.matches[i - 1].end > match.start:
            return False
        if i < len(self.matches) and self.matches[i].start < match.end:
            return False
        self.starts.insert(i, match.start)
        self.matches.insert(i, match)
        return True


# --------------------------------------------------------------------------- masks


def _mask_digits(value: str, keep_last: int) -> str:
    """Every digit but the last ``keep_last`` replaced by ``*``; separators kept."""
    total = sum(c.isdigit() for c in value)
    seen = 0
    out = []
    for c in value:
        if c.isdigit():
            seen += 1
            out.append(c if seen > total - keep_last else "*")
        else:
            out.append(c)
    return "".join(out)


def _mask_email(value: str) -> str:
    local, _, domain = value.partition("@")
    host, _, tld = domain.rpartition(".")
    return f"{local[:1]}***@{host[:1]}***.{tld}"


# --------------------------------------------------------------------------- detectors

_EMAIL = re.compile(
    r"(?<![\w.%+-])[A-Za-z0-9][A-Za-z0-9._%+-]*@[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
    r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*\.[A-Za-z]{2,24}(?![\w-]|\.\w)"
)


def _emails(text: str) -> Iterator[PiiMatch]:
    for m in _EMAIL.finditer(text):
        yield PiiMatch(PiiKind.EMAIL, m.start(), m.end(), _mask_email(m.group()))


# not glued to a word, a sign, an order-number mark or another digit group
_LEFT = r"(?<![\w#$€£+\-/.,:@])"
_RIGHT = r"(?![\w\-/@]|[.,:]\d)"

_PHONE_INTERNATIONAL = re.compile(_LEFT + r"\+[1-9](?:[ .\-()]{0,2}\d){7,14}" + _RIGHT)
_PHONE_NANP = re.compile(
    _LEFT + r"(?:\+?1[ .\-]?)?(?:\([2-9]\d{2}\)[ .\-]?|[2-9]\d{2}[ .\-])\d{3}[ .\-]\d{4}" + _RIGHT
)


def _phones(text: str) -> Iterator[PiiMatch]:
    # both shapes may match one number (+1 555 123 4567); find_pii keeps the first
    for pattern in (_PHONE_INTERNATIONAL, _PHONE_NANP):
        for m in pattern.finditer(text):
            value = m.group()
            if value.count("(") == value.count(")"):
                yield PiiMatch(PiiKind.PHONE, m.start(), m.end(), _mask_digits(value, 2))


_SSN = re.compile(_LEFT + r"(\d{3})-(\d{2})-(\d{4})" + _RIGHT)


def _ssns(text: str) -> Iterator[PiiMatch]:
    for m in _SSN.finditer(text):
        area, group, serial = m.groups()
        if area in ("000", "666") or area.startswith("9") or group == "00" or serial == "0000":
            continue
        yield PiiMatch(PiiKind.SSN, m.start(), m.end(), f"***-**-{serial}")


_CARD = re.compile(
    _LEFT
    + r"(?:\d{13,19}"
    + r"|\d{4}(?P<s>[ \-])\d{4}(?:(?P=s)\d{4}){1,2}(?:(?P=s)\d{1,3})?"
    + r"|\d{4}(?P<t>[ \-])\d{6}(?P=t)\d{4,5})"
    + _RIGHT
)


def _luhn(digits: str) -> bool:
    total = 0
    for i, c in enumerate(reversed(digits)):
        d = int(c)
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def _cards(text: str) -> Iterator[PiiMatch]:
    for m in _CARD.finditer(text):
        digits = re.sub(r"\D", "", m.group())
        if 13 <= len(digits) <= 19 and digits[0] in "23456" and _luhn(digits):
            yield PiiMatch(PiiKind.CREDIT_CARD, m.start(), m.end(), _mask_digits(m.group(), 4))


IBAN_LENGTHS: dict[str, int] = {
    "AD": 24, "AE": 23, "AL": 28, "AT": 20, "AZ": 28, "BA": 20, "BE": 16, "BG": 22, "BH": 22,
    "BR": 29, "BY": 28, "CH": 21, "CR": 22, "CY": 28, "CZ": 24, "DE": 22, "DK": 18, "DO": 28,
    "EE": 20, "EG": 29, "ES": 24, "FI": 18, "FO": 18, "FR": 27, "GB": 22, "GE": 22, "GI": 23,
    "GL": 18, "GR": 27, "GT": 28, "HR": 21, "HU": 28, "IE": 22, "IL": 23, "IQ": 23, "IS": 26,
    "IT": 27, "JO": 30, "KW": 30, "KZ": 20, "LB": 28, "LC": 32, "LI": 21, "LT": 20, "LU": 20,
    "LV": 21, "MC": 27, "MD": 24, "ME": 22, "MK": 19, "MR": 27, "MT": 31, "MU": 30, "NL": 18,
    "NO": 15, "PK": 24, "PL": 28, "PS": 29, "PT": 25, "QA": 29, "RO": 24, "RS": 22, "SA": 24,
    "SC": 31, "SE": 24, "SI": 19, "SK": 24, "SM": 27, "ST": 25, "SV": 28, "TL": 23, "TN": 24,
    "TR": 26, "UA": 29, "VA": 22, "VG": 24, "XK": 20,
}  # fmt: skip
"""Registered IBAN length per country (ISO 13616 registry)."""

_IBAN_START = re.compile(r"(?<![A-Za-z0-9])([A-Za-z]{2})\d{2}")


def _iban_mod97(iban: str) -> bool:
    rearranged = iban[4:] + iban[:4]
    number = "".join(str(int(c, 36)) for c in rearranged)
    return int(number) % 97 == 1


def _ibans(text: str) -> Iterator[PiiMatch]:
    for m in _IBAN_START.finditer(text):
        length = IBAN_LENGTHS.get(m.group(1).upper())
        if length is None:
            continue
        # take `length` alphanumerics from the start, allowing single spaces between them
        chars: list[str] = []
        end = m.start()
        while len(chars) < length and end < len(text):
            c = text[end]
            if c.isascii() and c.isalnum():
                chars.append(c.upper())
            elif not (c == " " and chars and end + 1 < len(text) and text[end + 1] != " "):
                break
            end += 1
        if len(chars) != length or (end < len(text) and text[end].isalnum()):
            continue
        iban = "".join(chars)
        if iban[2:4].isdigit() and _iban_mod97(iban):
            masked = iban[:2] + "*" * (length - 6) + iban[-4:]
            yield PiiMatch(PiiKind.IBAN, m.start(), end, masked)


_IPV4 = re.compile(r"(?<![\w.\-:/])(?:\d{1,3}\.){3}\d{1,3}(?![\w\-]|\.\d)")
_VERSION_WORD = re.compile(
    r"(?:\b(?:v|ver|version|versions|release|build|firmware|fw|sdk|api|section|chapter|"
    r"clause|rule|step|§)\.?\s*:?\s*)$",
    re.IGNORECASE,
)
_IPV6 = re.compile(r"(?<![\w:.])[0-9A-Fa-f]{0,4}(?::[0-9A-Fa-f]{0,4}){2,7}(?:\.\d{1,3}){0,3}")


def _ips(text: str) -> Iterator[PiiMatch]:
    for m in _IPV4.finditer(text):
        octets = m.group().split(".")
        if any(len(o) > 1 and o.startswith("0") for o in octets):
            continue
        if any(int(o) > 255 for o in octets):
            continue
        if _VERSION_WORD.search(text[max(0, m.start() - 20) : m.start()]):
            continue
        masked = octets[0] + ".*.*.*"
        yield PiiMatch(PiiKind.IP_ADDRESS, m.start(), m.end(), masked)
    for m in _IPV6.finditer(text):
        value = m.group()
        after = text[m.end() : m.end() + 2]
        if after[:1].isalnum() or after[:1] == ":" or re.fullmatch(r"\.\d", after):
            continue
        groups = [g for g in re.split(r"[:.]", value) if g]
        if len(groups) < 3:
            continue
        try:
            ipaddress.IPv6Address(value)
        except ValueError:
            continue
        masked = "::****" if value.startswith("::") else value.split(":", 1)[0] + ":****"
        yield PiiMatch(PiiKind.IP_ADDRESS, m.start(), m.end(), masked)


_PRIORITY = (
    PiiKind.EMAIL,
    PiiKind.IBAN,
    PiiKind.CREDIT_CARD,
    PiiKind.SSN,
    PiiKind.IP_ADDRESS,
    PiiKind.PHONE,
)

_DETECTORS: dict[PiiKind, Callable[[str], Iterator[PiiMatch]]] = {
    PiiKind.EMAIL: _emails,
    PiiKind.PHONE: _phones,
    PiiKind.SSN: _ssns,
    PiiKind.CREDIT_CARD: _cards,
    PiiKind.IBAN: _ibans,
    PiiKind.IP_ADDRESS: _ips,
}
