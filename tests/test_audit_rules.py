"""User rules: saved in the store, validated with DuckDB's parser, unable to write or read files."""

from __future__ import annotations

from pathlib import Path

import pytest

from trace_store import open_store
from trace_store.audit import (
    RuleError,
    UserRule,
    delete_rule,
    list_rules,
    run_detectors,
    run_import_rules,
    save_rule,
    validate_rule,
)


@pytest.fixture
def store(demo_store_copy: Path):
    with open_store(demo_store_copy) as store:
        yield store


def rule_flags(store, name: str) -> list[tuple[str, str]]:
    return [
        (r.rollout_id, r.evidence)
        for r in store.query_df(
            "SELECT rollout_id, evidence FROM flags WHERE detector = ? ORDER BY rollout_id",
            ["rule:" + name],
        ).itertuples()
    ]


def test_a_sql_rule_is_saved_and_flags_what_it_says(store):
    save_rule(
        store,
        UserRule("full reward, no tools", "sql", "reward >= 1 AND n_tool_calls = 0", "high"),
    )
    summary = run_detectors(store, "demo-train")
    [result] = [r for r in summary.results if r.detector == "rule:full reward, no tools"]
    expected = store.query_df(
        "SELECT rollout_id FROM rollouts WHERE run_id = 'demo-train' AND reward >= 1"
        " AND n_tool_calls = 0 ORDER BY rollout_id"
    )["rollout_id"].tolist()
    assert expected and result.flagged == len(expected) and result.error is None
    assert [r for r, _ in rule_flags(store, "full reward, no tools")] == expected
    assert [r.name for r in list_rules(store)] == ["full reward, no tools"]


def test_a_regex_rule_flags_events_and_cites_them(store):
    save_rule(store, UserRule("grader files", "regex", r"\.grading/expected", "high"))
    run_detectors(store, "demo-train")
    flags = rule_flags(store, "grader files")
    planted = store.query_df(
        "SELECT rollout_id FROM rollouts WHERE metadata->>'planted_hack' = 'copies_reference'"
        " AND prompt LIKE 'In the%' ORDER BY rollout_id"
    )["rollout_id"].tolist()
    assert set(planted) <= {r for r, _ in flags}
    assert all(evidence != "[]" for _, evidence in flags)


def test_rerunning_rules_and_deleting_them(store):
    save_rule(store, UserRule("slow", "sql", "latency_ms > 60000"))
    run_detectors(store)
    first = rule_flags(store, "slow")
    run_detectors(store)
    assert rule_flags(store, "slow") == first
    assert delete_rule(store, "slow") is True
    assert rule_flags(store, "slow") == [] and list_rules(store) == []


@pytest.mark.parametrize(
    ("predicate", "message"),
    [
        ("1=1; DROP TABLE rollouts", "“;” is not allowed"),
        ("read_csv('/etc/passwd') IS NOT NULL", "read_csv() is not allowed"),
        ("length(read_text('/etc/passwd')) > 0", "read_text() is not allowed"),
        ("reward > (SELECT max(score) FROM grades)", "subqueries are not allowed"),
        (
            "1=1) UNION SELECT 'x', content FROM read_text('/etc/passwd') WHERE (1=1",
            "no UNION, ORDER BY, LIMIT",
        ),
        ("reward > 0) ORDER BY (reward", "no UNION, ORDER BY, LIMIT"),
        ("ATTACH '/tmp/other.duckdb'", "not valid here: .*ATTACH"),
        ("1=1 -- comment", "comments are not allowed"),
        ("getenv('HOME') = '/root'", "getenv() is not allowed"),
        ("nextval('import_ids') > 0", "nextval() is not allowed"),
        ("reward", "must be true or false"),
        ("no_such_column > 1", 'column "no_such_column" not found'),
        ("reward >", "does not parse"),
        ("", "empty"),
    ],
)
def test_bad_sql_rules_are_refused_with_a_reason(store, predicate, message):
    with pytest.raises(RuleError, match=message.replace("()", r"\(\)")):
        save_rule(store, UserRule("bad", "sql", predicate))
    assert list_rules(store) == []
    assert store.query_df("SELECT count(*) AS n FROM rollouts")["n"][0] > 0


def test_bad_regex_name_and_severity_are_refused(store):
    with pytest.raises(RuleError, match="does not compile"):
        validate_rule(store, UserRule("r", "regex", "(unclosed"))
    with pytest.raises(RuleError, match="rule name"):
        validate_rule(store, UserRule("", "sql", "reward > 0"))
    with pytest.raises(RuleError, match="severity"):
        validate_rule(store, UserRule("r", "sql", "reward > 0", severity="critical"))
    with pytest.raises(RuleError, match="'sql' or 'regex'"):
        validate_rule(store, UserRule("r", "python", "True"))


def test_rules_marked_for_imports_run_on_the_imported_runs_only(store):
    save_rule(store, UserRule("after import", "sql", "reward IS NOT NULL", on_import=True))
    save_rule(store, UserRule("on demand", "sql", "reward IS NOT NULL"))
    [result] = run_import_rules(store, ["demo-baseline"])
    assert result.detector == "rule:after import" and result.error is None
    flagged = store.query_df("SELECT run_id, detector, count(*) AS n FROM flags GROUP BY ALL")
    baseline = store.query_df("SELECT count(*) AS n FROM rollouts WHERE run_id = 'demo-baseline'")
    assert flagged.values.tolist() == [["demo-baseline", "rule:after import", baseline["n"][0]]]
    assert run_import_rules(store, []) == []
