"""Usage records and the configurable price table (unknown price -> no cost, never 0)."""

from __future__ import annotations

import pytest

from omnistory_core.kit.planning.usage import Price, parse_price_table, usage_record


def test_cost_from_the_price_table():
    prices = parse_price_table({"m": {"input_per_mtok": 2.0, "output_per_mtok": 8}})
    assert prices == {"m": Price(2.0, 8.0)}
    usage = usage_record("m", 1000, 50, prices, attempts=2, waited_s=1.5)
    assert usage == {
        "calls": 1,
        "attempts": 2,
        "retry_wait_s": 1.5,
        "input_tokens": 1000,
        "output_tokens": 50,
        "cost_usd": pytest.approx(0.0024),
        "priced_calls": 1,
    }


@pytest.mark.parametrize(
    "table",
    [
        None,
        {},
        {"m": None},
        {"m": {"input_per_mtok": None, "output_per_mtok": 1.0}},
        {"other": {"input_per_mtok": 1, "output_per_mtok": 1}},
    ],
)
def test_unknown_price_omits_cost(table):
    usage = usage_record("m", 10, 5, parse_price_table(table))
    assert "cost_usd" not in usage
    assert usage["priced_calls"] == 0
    assert (usage["input_tokens"], usage["output_tokens"]) == (10, 5)


def test_missing_token_counts_are_left_out_and_not_priced():
    prices = parse_price_table({"m": {"input_per_mtok": 1, "output_per_mtok": 1}})
    usage = usage_record("m", None, 7, prices)
    assert "input_tokens" not in usage and "cost_usd" not in usage
    assert usage["output_tokens"] == 7


def test_extra_usage_keeps_numbers_only():
    usage = usage_record("m", 1, 1, {}, extra={"reasoning_tokens": 30, "flag": True, "note": "x"})  # type: ignore[dict-item]
    assert usage["reasoning_tokens"] == 30
    assert "flag" not in usage and "note" not in usage


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ([1, 2], "expected a mapping of model"),
        ({"m": 3}, r"planner.prices.m: expected a mapping"),
        ({"m": {"input_per_mtok": -1, "output_per_mtok": 1}}, r"m.input_per_mtok: expected"),
        ({"m": {"input_per_mtok": "1", "output_per_mtok": 1}}, r"m.input_per_mtok"),
        ({"m": {"input_per_mtok": 1, "output_per_mtok": True}}, r"m.output_per_mtok"),
        ({"m": {"input": 1}}, r"unknown field\(s\) input"),
    ],
)
def test_bad_price_tables_name_the_entry(table, message):
    with pytest.raises(ValueError, match=message):
        parse_price_table(table, where="planner.prices")
