from __future__ import annotations

import pytest

from flakestorm.checks.pii import find_pii
from flakestorm.config import PiiKind

EMAIL, PHONE, SSN, CARD, IBAN, IP = (
    PiiKind.EMAIL,
    PiiKind.PHONE,
    PiiKind.SSN,
    PiiKind.CREDIT_CARD,
    PiiKind.IBAN,
    PiiKind.IP_ADDRESS,
)


@pytest.mark.parametrize(
    ("text", "kind", "masked"),
    [
        ("Contact john.doe@example.com today", EMAIL, "j***@e***.com"),
        ("mail: a+tag@mail.co.uk.", EMAIL, "a***@m***.uk"),
        ("Card 4111 1111 1111 1111 on file.", CARD, "**** **** **** 1111"),
        ("card=4111111111111111", CARD, "************1111"),
        ("4111-1111-1111-1111", CARD, "****-****-****-1111"),
        ("Amex 3782 822463 10005", CARD, "**** ****** *0005"),
        ("IBAN GB82WEST12345698765432 please", IBAN, "GB****************5432"),
        ("GB82 WEST 1234 5698 7654 32 is mine", IBAN, "GB****************5432"),
        ("DE89 3704 0044 0532 0130 00", IBAN, "DE****************3000"),
        ("SSN: 123-45-6789", SSN, "***-**-6789"),
        ("Call +1 (555) 123-4567 now", PHONE, "+* (***) ***-**67"),
        ("call (555) 123-4567", PHONE, "(***) ***-**67"),
        ("call 555-123-4567.", PHONE, "***-***-**67"),
        ("call 555.123.4567", PHONE, "***.***.**67"),
        ("UK office +44 20 7946 0958", PHONE, "+** ** **** **58"),
        ("server at 192.168.1.10", IP, "192.*.*.*"),
        ("reach 10.0.0.1.", IP, "10.*.*.*"),
        ("host 2001:db8::8a2e:370:7334 is up", IP, "2001:****"),
        ("mapped ::ffff:192.0.2.1", IP, "::****"),
        ("full fe80:0:0:0:202:b3ff:fe1e:8329", IP, "fe80:****"),
    ],
)
def test_real_pii_is_found_and_masked(text: str, kind: PiiKind, masked: str) -> None:
    found = find_pii(text)
    assert [(m.kind, m.masked) for m in found] == [(kind, masked)]
    (match,) = found
    value = text[match.start : match.end]
    assert value not in match.masked  # the whole value is never shown
    assert str(match) == f"{kind.value} `{masked}` at {match.start}"


@pytest.mark.parametrize(
    "text",
    [
        # prices, percentages, plain numbers
        "Total: $1,234.56 (was $1,500.00), 12.5% off, 1,000,000 users",
        "price $5551234567 and €1.234.567,89",
        # dates and times
        "Shipped 2024-01-15, due 01/15/2024 or 15.01.2024, at 12:30:45 or 10:30",
        # versions and sections
        "Upgrade from 1.2.3 to v2.0.1; version 10.0.0.1; release 4.1.0.2; see section 1.2.3.4",
        # order numbers and product codes
        "Order #123456789, ORD-2024-000123, ref #555-123-4567",
        "SKU-555-123-4567, part 123-456-7890, model X555-123-4567, 555-123-4567-B",
        # long numbers that fail Luhn or are not card-shaped
        "Tracking 4111111111111112 and 1234567890123456 and 4111 1111 1111 1112",
        # ISBNs
        "ISBN 978-3-16-148410-0 or 9783161484100",
        # IBAN-shaped text with a bad checksum, an unknown country or a wrong length
        "GB82WEST12345698765433, ZZ82WEST12345698765432, GB82WEST1234569876543",
        # SSN-shaped numbers that were never issued
        "000-12-3456, 666-12-3456, 900-12-3456, 123-00-4567, 123-45-0000",
        # IP-shaped text that is not an address
        "999.1.1.1, 01.02.03.04, MAC 00:1A:2B:3C:4D:5E, std::vector, a::b",
        # email-like text that is not an address
        "user@localhost, @handle, name@domain",
        # local numbers without area code
        "Room 555-1234, extension 4567",
    ],
)
def test_near_misses_are_not_pii(text: str) -> None:
    assert find_pii(text) == []


def test_findings_are_in_text_order_and_filtered_by_kind() -> None:
    text = "ip 10.1.2.3, mail x@y.io, ssn 123-45-6789"
    assert [m.kind for m in find_pii(text)] == [IP, EMAIL, SSN]
    assert [m.kind for m in find_pii(text, [SSN, EMAIL])] == [EMAIL, SSN]
    assert find_pii(text, []) == []


def test_each_value_is_reported_once_as_one_kind() -> None:
    # a NANP number written with +1 matches both phone shapes; it is one finding
    found = find_pii("+1 555 123 4567 and 4111 1111 1111 1111")
    assert [m.kind for m in found] == [PHONE, CARD]


def test_ipv6_must_end_where_the_address_ends() -> None:
    assert [m.masked for m in find_pii("ip 2001:db8::1. Next")] == ["2001:****"]
    assert find_pii("1:2:3:4:5:6:7:8:9 and " + "a:" * 50) == []


def test_many_findings_in_a_large_output_stay_linear() -> None:
    line = "Call +1 (555) 123-4567 or mail a@b.co, card 4111 1111 1111 1111. "
    found = find_pii(line * 3000)  # ~200 KB, 9000 findings: quadratic would take minutes
    assert len(found) == 9000
    assert [m.kind for m in found[:3]] == [PHONE, EMAIL, CARD]
