"""``Sql``: ``:name`` parameters become asyncpg's ``$n``; casts and ``a:b`` literals stay."""

from __future__ import annotations

import pytest

from app.adapters.postgres.db import Sql


def test_names_number_in_first_use_order_and_repeat() -> None:
    sql = Sql("SELECT :b, :a WHERE x = :b AND y = CAST(:a AS text[])")
    assert sql.text == "SELECT $1, $2 WHERE x = $1 AND y = CAST($2 AS text[])"
    assert sql.names == ("b", "a")
    assert sql.args({"a": 1, "b": 2, "unused": 3}) == [2, 1]


def test_a_parameter_followed_by_a_cast_keeps_its_whole_name() -> None:
    sql = Sql("SELECT :tenant_id::text, :ids::text[], :id")
    assert sql.text == "SELECT $1::text, $2::text[], $3"
    assert sql.names == ("tenant_id", "ids", "id")


def test_casts_and_literals_are_not_parameters() -> None:
    sql = Sql("SELECT '{}'::jsonb, now()::date, 'a:b', x FROM t WHERE id = :id")
    assert sql.text == "SELECT '{}'::jsonb, now()::date, 'a:b', x FROM t WHERE id = $1"
    assert sql.names == ("id",)
    assert sql.source.endswith(":id")


def test_a_missing_parameter_is_a_key_error() -> None:
    with pytest.raises(KeyError):
        Sql("SELECT :x").args({})
