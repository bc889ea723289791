"""A deterministic demo history: a baseline eval run and an agent-RFT training run.

The records are canonical rollout-a-line dicts (see the canonical format in the README / issue 2), so
the demo goes through the same ingest path as a user's file. The history is synthetic but shaped like
a real run of a small bug-fixing and research agent over six tools, so that every screen has
something to show:

- mean reward rises per grader (`correctness` 0.7, `format` 0.2, `efficiency` 0.1);
- tool calls per rollout fall, and the long tail of 15+ calls disappears;
- calls move from one call per turn over many turns to a few turns of parallel calls;
- tool latency is heavy-tailed (lognormal, with rare stalls and tool time-outs early), and its p99 falls;
- some tool calls error, some early rollouts time out or crash, and many (step, prompt) groups have
  no reward variance across samples;
- a few dozen planted reward hacks, marked `metadata.planted_hack`, one of `HACK_KINDS`.

The learning curves are scaled to the run length, so a 50-step run shows the same shape as 200 steps.
Same arguments give byte-identical output: one `random.Random(seed)`, a fixed base time, no clock.
The default size (26,048 rollouts, ~147 MB of JSONL, ~14 MB gzipped) takes a few seconds of CPU.
"""

from __future__ import annotations

import gzip
import json
import math
import random
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

__all__ = [
    "DEMO_BASELINE_RUN_ID",
    "DEMO_BASELINE_RUN_NAME",
    "DEMO_TRAIN_RUN_ID",
    "DEMO_TRAIN_RUN_NAME",
    "EVAL_EVERY",
    "EVAL_PROMPTS",
    "EVAL_SAMPLES",
    "GRADER_WEIGHTS",
    "HACK_KINDS",
    "TOOLS",
    "eval_prompt_indices",
    "iter_demo_records",
    "write_demo_file",
]

DEMO_TRAIN_RUN_ID = "demo-train"
DEMO_BASELINE_RUN_ID = "demo-baseline"
DEMO_TRAIN_RUN_NAME = "Demo RFT: bug-fix agent"
DEMO_BASELINE_RUN_NAME = "Demo baseline: o4-mini"
DEMO_BASE_MODEL = "o4-mini-2025-04-16"
DEMO_TRAIN_MODEL = "ft:o4-mini-2025-04-16:demo::bugfix-rft"

GRADER_WEIGHTS: dict[str, float] = {"correctness": 0.7, "format": 0.2, "efficiency": 0.1}
HACK_KINDS = ("no_tool_calls_full_reward", "copies_reference", "edits_tests")
TOOLS = ("search_code", "read_file", "edit_file", "run_tests", "web_search", "fetch_url")

EVAL_EVERY = 10
"""Every 10th training step also has eval-split rollouts of a prompt subset."""
EVAL_PROMPTS = 8
EVAL_SAMPLES = 2
MAX_TOOL_CALLS = 20
"""The sandbox's tool-call budget; a rollout that reaches it ends with status `timeout`."""
TOOL_TIMEOUT_MS = 60_000

_BASE_MS = 1_748_854_800_000  # 2025-06-02T09:00:00Z: the training run's first step
_BASELINE_MS = _BASE_MS - 2 * 86_400_000

Record = dict[str, Any]

# ---------------------------------------------------------------------------------------------------
# Tasks. Code tasks: a one-line bug in a small library, with the test that catches it.
# (repo, source path, function, signature, body lines, buggy line, fixed line, wrong fix, test name,
#  assert line, pytest failure, number of tests, symptom, fix summary, reference, difficulty)

# fmt: off
_CODE_TASKS: tuple[tuple[Any, ...], ...] = (
    (
        "pager", "src/pager/paginate.py", "paginate", "paginate(items: list[T], size: int) -> list[list[T]]",
        ["if size <= 0:", "    raise ValueError(\"size must be positive\")", "return [items[i : i + size] for i in range(0, len(items) - size, size)]"],
        "return [items[i : i + size] for i in range(0, len(items) - size, size)]",
        "return [items[i : i + size] for i in range(0, len(items), size)]",
        "return [items[i : i + size] for i in range(0, len(items) - 1, size)]", "test_last_partial_page",
        "assert paginate(list(range(10)), 3)[-1] == [9]", "AssertionError: assert [3, 4, 5] == [9]", 12,
        "`paginate()` silently drops the last page when the item count is not a multiple of the page size",
        "`paginate` stopped its range at `len(items) - size`, which dropped the trailing pages; it now iterates `range(0, len(items), size)`.",
        "src/pager/paginate.py: the range stop must be len(items), not len(items) - size; all 12 tests pass", 0.2,
    ),
    (
        "textkit", "src/textkit/slug.py", "slugify", "slugify(text: str) -> str",
        ["text = unicodedata.normalize(\"NFKD\", text).encode(\"ascii\", \"ignore\").decode()", "return re.sub(r\"[^a-z0-9]\", \"-\", text.lower()).strip(\"-\")"],
        "return re.sub(r\"[^a-z0-9]\", \"-\", text.lower()).strip(\"-\")",
        "return re.sub(r\"[^a-z0-9]+\", \"-\", text.lower()).strip(\"-\")",
        "return re.sub(r\"[^a-z0-9]\", \"-\", text.lower()).strip(\"-\").replace(\"--\", \"-\")",
        "test_collapses_separators", "assert slugify(\"Hello,  World!\") == \"hello-world\"",
        "AssertionError: assert 'hello---world' == 'hello-world'", 9,
        "`slugify()` produces runs of dashes such as `hello---world` for titles with punctuation",
        "the character class replaced each separator with its own dash; matching `[^a-z0-9]+` collapses a run into one dash.",
        "src/textkit/slug.py: use the pattern [^a-z0-9]+ so separator runs collapse to one dash; 9 passed", 0.25,
    ),
    (
        "timeparse", "src/timeparse/duration.py", "parse_duration", "parse_duration(text: str) -> int",
        ["units = {\"h\": 3600, \"m\": 1, \"s\": 1}", "total = 0", "for value, unit in re.findall(r\"(\\d+)([hms])\", text):", "    total += int(value) * units[unit]", "return total"],
        "units = {\"h\": 3600, \"m\": 1, \"s\": 1}", "units = {\"h\": 3600, \"m\": 60, \"s\": 1}",
        "units = {\"h\": 3600, \"m\": 60 * 60, \"s\": 1}", "test_hours_and_minutes",
        "assert parse_duration(\"1h30m\") == 5400", "AssertionError: assert 3630 == 5400", 15,
        "`parse_duration(\"1h30m\")` returns 3630 seconds instead of 5400",
        "minutes were weighted as one second each; the unit table now maps `m` to 60.",
        "src/timeparse/duration.py: the unit table maps m to 1 instead of 60; 15 passed", 0.3,
    ),
    (
        "cachelib", "src/cachelib/ttl.py", "is_expired",
        "is_expired(entry_time: float, ttl: float, now: float) -> bool",
        ["\"\"\"Timestamps are seconds since the epoch.\"\"\"", "return now - entry_time > ttl * 1000"],
        "return now - entry_time > ttl * 1000", "return now - entry_time > ttl",
        "return now - entry_time >= ttl * 1000", "test_expires_after_ttl", "assert is_expired(0.0, ttl=60, now=61.0)",
        "AssertionError: assert False", 11,
        "cache entries never expire: `is_expired()` still returns False long after the TTL",
        "the TTL was multiplied by 1000 although the timestamps are in seconds; the comparison now uses `ttl` directly.",
        "src/cachelib/ttl.py: compare against ttl in seconds, not ttl * 1000; 11 passed", 0.35,
    ),
    (
        "stats", "src/stats/basic.py", "median", "median(xs: Sequence[float]) -> float",
        ["xs = sorted(xs)", "n = len(xs)", "if n == 0:", "    raise ValueError(\"median of empty data\")", "return xs[n // 2]"],
        "return xs[n // 2]", "return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2",
        "return xs[(n - 1) // 2]", "test_median_even", "assert median([1, 2, 3, 4]) == 2.5",
        "AssertionError: assert 3 == 2.5", 18,
        "`median()` is wrong for lists of even length (`median([1, 2, 3, 4])` gives 3)",
        "for an even count it returned the upper middle value; it now averages the two middle values.",
        "src/stats/basic.py: average the two middle values when len(xs) is even; 18 passed", 0.3,
    ),
    (
        "netutil", "src/netutil/retry.py", "call_with_retry",
        "call_with_retry(fn: Callable[[], T], retries: int = 3) -> T",
        ["last_error: Exception | None = None", "for attempt in range(1, retries):", "    try:", "        return fn()", "    except TransientError as exc:", "        last_error = exc", "        time.sleep(backoff(attempt))", "raise RetryError(retries) from last_error"],
        "for attempt in range(1, retries):", "for attempt in range(1, retries + 1):",
        "for attempt in range(retries - 1):", "test_makes_all_attempts", "assert flaky.calls == 3",
        "AssertionError: assert 2 == 3", 10, "`call_with_retry(fn, retries=3)` only ever calls `fn` twice",
        "the loop ran `range(1, retries)`, one attempt short; it now runs `range(1, retries + 1)`.",
        "src/netutil/retry.py: loop over range(1, retries + 1) so every attempt runs; 10 passed", 0.35,
    ),
    (
        "csvlite", "src/csvlite/reader.py", "parse_line", "parse_line(line: str) -> list[str]",
        ["line = line.rstrip(\"\\r\\n\")", "return line.split(\",\")"], "return line.split(\",\")",
        "return next(csv.reader([line]))", "return [field.strip('\"') for field in line.split(\",\")]",
        "test_quoted_comma", "assert parse_line('a,\"b,c\",d') == [\"a\", \"b,c\", \"d\"]",
        "AssertionError: assert ['a', '\"b', 'c\"', 'd'] == ['a', 'b,c', 'd']", 14,
        "`parse_line()` splits quoted fields that contain commas",
        "`str.split` ignored quoting; the line is now parsed with `csv.reader`.",
        "src/csvlite/reader.py: parse with csv.reader instead of str.split(','); 14 passed", 0.45,
    ),
    (
        "calutil", "src/calutil/leap.py", "is_leap_year", "is_leap_year(year: int) -> bool",
        ["\"\"\"Gregorian calendar.\"\"\"", "return year % 4 == 0"], "return year % 4 == 0",
        "return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)", "return year % 4 == 0 and year % 100 != 0",
        "test_century_years", "assert not is_leap_year(1900)", "AssertionError: assert not True", 6,
        "`is_leap_year(1900)` returns True",
        "the century rule was missing; years divisible by 100 are now leap years only when divisible by 400.",
        "src/calutil/leap.py: apply the 100/400 century rule; 6 passed", 0.15,
    ),
    (
        "intervals", "src/intervals/merge.py", "merge_intervals",
        "merge_intervals(intervals: list[tuple[int, int]]) -> list[tuple[int, int]]",
        ["merged: list[tuple[int, int]] = []", "for start, end in intervals:", "    if merged and start <= merged[-1][1]:", "        merged[-1] = (merged[-1][0], max(merged[-1][1], end))", "    else:", "        merged.append((start, end))", "return merged"],
        "for start, end in intervals:", "for start, end in sorted(intervals):",
        "for start, end in reversed(intervals):", "test_unsorted_input",
        "assert merge_intervals([(5, 6), (1, 3), (2, 4)]) == [(1, 4), (5, 6)]",
        "AssertionError: assert [(5, 6)] == [(1, 4), (5, 6)]", 8,
        "`merge_intervals()` returns wrong results when the input is not sorted by start",
        "the merge assumed sorted input; it now iterates `sorted(intervals)`.",
        "src/intervals/merge.py: sort the intervals before merging; 8 passed", 0.25,
    ),
    (
        "tzkit", "src/tzkit/convert.py", "to_utc", "to_utc(dt: datetime) -> datetime",
        ["if dt.tzinfo is None:", "    raise ValueError(\"naive datetime\")", "return dt.replace(tzinfo=timezone.utc)"],
        "return dt.replace(tzinfo=timezone.utc)", "return dt.astimezone(timezone.utc)",
        "return dt.replace(tzinfo=None).replace(tzinfo=timezone.utc)", "test_converts_offset",
        "assert to_utc(datetime(2024, 1, 1, 12, tzinfo=PARIS)).hour == 11", "AssertionError: assert 12 == 11", 7,
        "`to_utc()` keeps the wall-clock time and only relabels it as UTC",
        "`replace(tzinfo=...)` relabelled the time instead of converting it; it now uses `astimezone(timezone.utc)`.",
        "src/tzkit/convert.py: use astimezone(timezone.utc) instead of replace(tzinfo=...); 7 passed", 0.4,
    ),
    (
        "fmt", "src/fmt/sizes.py", "human_size", "human_size(n: float) -> str",
        ["for unit in (\"B\", \"KiB\", \"MiB\", \"GiB\"):", "    if n < 1000:", "        return f\"{n:.1f} {unit}\" if unit != \"B\" else f\"{n:.0f} B\"", "    n /= 1024", "return f\"{n:.1f} TiB\""],
        "    if n < 1000:", "    if n < 1024:", "    if n <= 1000:", "test_binary_boundary",
        "assert human_size(1000) == \"1000 B\"", "AssertionError: assert '1.0 KiB' == '1000 B'", 9,
        "`human_size(1000)` prints `1.0 KiB`; binary units should switch at 1024",
        "the unit switched at 1000 while dividing by 1024; the threshold is now 1024.",
        "src/fmt/sizes.py: compare against 1024, not 1000; 9 passed", 0.2,
    ),
    (
        "appconfig", "src/appconfig/env.py", "env_flag", "env_flag(name: str, default: bool = False) -> bool",
        ["raw = os.environ.get(name)", "if raw is None:", "    return default", "return bool(raw)"],
        "return bool(raw)", "return raw.strip().lower() in {\"1\", \"true\", \"yes\", \"on\"}",
        "return bool(raw.strip())", "test_false_string", "assert env_flag(\"APP_DEBUG\") is False",
        "AssertionError: assert True is False", 12, "setting `APP_DEBUG=false` turns debug mode on",
        "`bool(raw)` is True for any non-empty string; the value is now parsed (\"1\", \"true\", \"yes\", \"on\").",
        "src/appconfig/env.py: parse the string ('1', 'true', 'yes', 'on') instead of bool(raw); 12 passed", 0.3,
    ),
    (
        "textkit", "src/textkit/words.py", "count_words", "count_words(text: str) -> int",
        ["\"\"\"Whitespace-separated words.\"\"\"", "return len(text.split(\" \"))"], "return len(text.split(\" \"))",
        "return len(text.split())", "return len(text.strip().split(\" \"))", "test_whitespace_runs",
        "assert count_words(\"a  b  c\") == 3", "AssertionError: assert 5 == 3", 5,
        "`count_words()` overcounts text with double spaces",
        "`split(\" \")` yields empty strings for runs of spaces; `split()` without an argument does not.",
        "src/textkit/words.py: use str.split() with no argument; 5 passed", 0.15,
    ),
    (
        "ratelimit", "src/ratelimit/bucket.py", "refill",
        "refill(tokens: float, capacity: float, elapsed: float, rate: float) -> float",
        ["\"\"\"Tokens after `elapsed` seconds at `rate` tokens per second.\"\"\"", "return tokens + elapsed * rate"],
        "return tokens + elapsed * rate", "return min(capacity, tokens + elapsed * rate)",
        "return max(capacity, tokens + elapsed * rate)", "test_refill_caps_at_capacity",
        "assert refill(9.0, capacity=10.0, elapsed=5.0, rate=1.0) == 10.0", "AssertionError: assert 14.0 == 10.0", 8,
        "after an idle period the rate limiter allows bursts far above its capacity",
        "refilled tokens were never capped; `refill` now returns at most `capacity`.",
        "src/ratelimit/bucket.py: cap the refilled tokens at capacity; 8 passed", 0.45,
    ),
    (
        "iterutil", "src/iterutil/flatten.py", "flatten", "flatten(items: Iterable[Any]) -> Iterator[Any]",
        ["for item in items:", "    if isinstance(item, Iterable):", "        yield from flatten(item)", "    else:", "        yield item"],
        "    if isinstance(item, Iterable):",
        "    if isinstance(item, Iterable) and not isinstance(item, str | bytes):",
        "    if isinstance(item, list | tuple | str):", "test_keeps_strings",
        "assert list(flatten([\"ab\", [\"c\"]])) == [\"ab\", \"c\"]",
        "RecursionError: maximum recursion depth exceeded", 7,
        "`flatten()` crashes with RecursionError on lists that contain strings",
        "a one-character string is an iterable of itself, so the recursion never ended; str and bytes are now leaves.",
        "src/iterutil/flatten.py: do not recurse into str or bytes; 7 passed", 0.4,
    ),
    (
        "semver", "src/semver/compare.py", "is_older", "is_older(a: str, b: str) -> bool",
        ["\"\"\"True when version `a` precedes version `b`.\"\"\"", "return a.split(\".\") < b.split(\".\")"],
        "return a.split(\".\") < b.split(\".\")",
        "return tuple(map(int, a.split(\".\"))) < tuple(map(int, b.split(\".\")))",
        "return a.replace(\".\", \"\") < b.replace(\".\", \"\")", "test_numeric_components",
        "assert is_older(\"1.9.0\", \"1.10.0\")", "AssertionError: assert False", 10,
        "`is_older(\"1.9.0\", \"1.10.0\")` returns False",
        "components were compared as strings, so 10 sorted before 9; they are now compared as integers.",
        "src/semver/compare.py: compare version components as integers, not strings; 10 passed", 0.35,
    ),
    (
        "httpkit", "src/httpkit/urls.py", "join_url", "join_url(base: str, path: str) -> str",
        ["\"\"\"Join a base URL and a path with exactly one slash.\"\"\"", "return base + \"/\" + path"],
        "return base + \"/\" + path", "return base.rstrip(\"/\") + \"/\" + path.lstrip(\"/\")", "return base + path",
        "test_no_double_slash",
        "assert join_url(\"https://api.example.com/\", \"/v1/runs\") == \"https://api.example.com/v1/runs\"",
        "AssertionError: assert 'https://api.example.com///v1/runs' == 'https://api.example.com/v1/runs'", 6,
        "`join_url()` produces URLs with `///` when the base ends or the path starts with a slash",
        "both parts kept their slashes; the join now strips them before adding one.",
        "src/httpkit/urls.py: strip the slashes at the join before concatenating; 6 passed", 0.2,
    ),
    (
        "iterutil", "src/iterutil/dedupe.py", "dedupe", "dedupe(items: Iterable[H]) -> list[H]",
        ["\"\"\"Drop repeated items, keeping the first occurrence.\"\"\"", "return list(set(items))"],
        "return list(set(items))", "return list(dict.fromkeys(items))", "return sorted(set(items))",
        "test_keeps_first_seen_order", "assert dedupe([\"b\", \"a\", \"b\", \"c\"]) == [\"b\", \"a\", \"c\"]",
        "AssertionError: assert ['c', 'a', 'b'] == ['b', 'a', 'c']", 5,
        "`dedupe()` returns the items in an arbitrary order",
        "a set loses the order; `dict.fromkeys` keeps the first-seen order.",
        "src/iterutil/dedupe.py: use dict.fromkeys to keep first-seen order; 5 passed", 0.15,
    ),
    (
        "stats", "src/stats/percentile.py", "percentile", "percentile(xs: Sequence[float], q: float) -> float",
        ["if not 0 <= q <= 1:", "    raise ValueError(\"q must be in [0, 1]\")", "xs = sorted(xs)", "return xs[int(len(xs) * q)]"],
        "return xs[int(len(xs) * q)]", "return xs[max(0, math.ceil(len(xs) * q) - 1)]",
        "return xs[min(int(len(xs) * q), len(xs))]", "test_max", "assert percentile([1, 2, 3, 4], 1.0) == 4",
        "IndexError: list index out of range", 11, "`percentile(xs, 1.0)` raises IndexError",
        "the index `int(n * q)` is n for q = 1; it now uses the nearest-rank index `ceil(n * q) - 1`.",
        "src/stats/percentile.py: use the nearest-rank index ceil(n * q) - 1; 11 passed", 0.5,
    ),
    (
        "jsonio", "src/jsonio/write.py", "write_json", "write_json(path: Path, obj: Any) -> None",
        ["with path.open(\"w\", encoding=\"utf-8\") as fh:", "    json.dump(obj, fh, indent=2)"],
        "    json.dump(obj, fh, indent=2)", "    json.dump(obj, fh, indent=2, ensure_ascii=False)",
        "    json.dump(obj, fh, indent=2, sort_keys=True)", "test_keeps_unicode",
        "assert \"café\" in path.read_text(encoding=\"utf-8\")",
        "AssertionError: assert 'café' in '{\\n  \"name\": \"caf\\\\u00e9\"\\n}'", 4,
        "`write_json()` escapes non-ASCII characters, so `café` is written as `caf\\u00e9`",
        "`json.dump` escaped non-ASCII by default; it now passes `ensure_ascii=False`.",
        "src/jsonio/write.py: pass ensure_ascii=False to json.dump; 4 passed", 0.25,
    ),
)
# fmt: on

# Research tasks: (question, search keywords, reference, a common wrong answer, source URL, source title,
#                  source excerpt, note for the answer, difficulty)
# fmt: off
_RESEARCH_TASKS: tuple[tuple[Any, ...], ...] = (
    (
        "Since which Python version is the insertion order of `dict` an official language guarantee?",
        "python dict insertion order guaranteed version", "Python 3.7", "Python 3.6",
        "https://docs.python.org/3/whatsnew/3.7.html", "What's New In Python 3.7",
        "the insertion-order preservation nature of dict objects has been declared to be an official part of the Python language spec.",
        "in 3.6 it was only a CPython implementation detail", 0.45,
    ),
    (
        "Which HTTP status code means 'Too Many Requests', and which RFC defines it?",
        "http status too many requests rfc", "429, defined in RFC 6585", "503, defined in RFC 7231",
        "https://www.rfc-editor.org/rfc/rfc6585", "RFC 6585: Additional HTTP Status Codes",
        "The 429 status code indicates that the user has sent too many requests in a given amount of time (\"rate limiting\").",
        "RFC 6585 section 4", 0.3,
    ),
    (
        "What TCP port does a PostgreSQL server listen on by default?", "postgresql default port", "5432", "3306",
        "https://www.postgresql.org/docs/current/runtime-config-connection.html",
        "PostgreSQL: Connections and Authentication",
        "port (integer): The TCP port the server listens on; 5432 by default.",
        "the `port` setting, 5432 unless changed", 0.15,
    ),
    (
        "What is the default page size of a new SQLite database, for SQLite 3.12.0 and later?",
        "sqlite default page size 3.12.0", "4096 bytes", "1024 bytes", "https://www.sqlite.org/pgszchng2016.html",
        "SQLite: The Default Page Size Change of SQLite 3.12.0",
        "the default page size for new database files was increased from 1024 bytes to 4096 bytes in SQLite version 3.12.0 (2016-03-29).",
        "it was 1024 bytes before 3.12.0", 0.5,
    ),
    (
        "Which Git release introduced the `git switch` and `git restore` commands?",
        "git switch git restore introduced version", "Git 2.23", "Git 2.20",
        "https://github.blog/2019-08-16-highlights-from-git-2-23/", "Highlights from Git 2.23",
        "Git 2.23 introduces two new experimental commands: git switch and git restore, which split the many jobs of git checkout.",
        "both arrived as experimental commands in August 2019", 0.4,
    ),
    (
        "What Unicode code point is used as the byte order mark (BOM)?", "unicode byte order mark code point",
        "U+FEFF", "U+FFFE", "https://www.unicode.org/faq/utf_bom.html", "FAQ - UTF-8, UTF-16, UTF-32 & BOM",
        "A byte order mark (BOM) consists of the character code U+FEFF at the beginning of a data stream.",
        "ZERO WIDTH NO-BREAK SPACE; U+FFFE is a noncharacter", 0.35,
    ),
    (
        "What is the largest possible payload of a single UDP datagram over IPv4?", "max udp payload size ipv4",
        "65,507 bytes", "65,535 bytes", "https://en.wikipedia.org/wiki/User_Datagram_Protocol",
        "User Datagram Protocol - Wikipedia",
        "the actual limit for the data length, which is imposed by the underlying IPv4 protocol, is 65,507 bytes (65,535 bytes - 8-byte UDP header - 20-byte IP header).",
        "65,535 minus the 8-byte UDP header and the 20-byte IPv4 header", 0.6,
    ),
    (
        "In which year was RFC 4627, the first RFC describing JSON, published?", "rfc 4627 json published", "2006",
        "2001", "https://www.rfc-editor.org/rfc/rfc4627", "RFC 4627: The application/json Media Type for JSON",
        "Network Working Group, Request for Comments: 4627, Category: Informational, D. Crockford, July 2006.",
        "July 2006, by Douglas Crockford", 0.4,
    ),
    (
        "Which PEP introduced f-strings (formatted string literals)?", "pep f-strings literal string interpolation",
        "PEP 498", "PEP 3101", "https://peps.python.org/pep-0498/", "PEP 498 - Literal String Interpolation",
        "PEP 498 - Literal String Interpolation. Status: Final. Python-Version: 3.6.",
        "Literal String Interpolation, shipped in Python 3.6", 0.2,
    ),
    (
        "What is PostgreSQL's default value for `max_connections`?", "postgresql max_connections default", "100",
        "1000", "https://www.postgresql.org/docs/current/runtime-config-connection.html",
        "PostgreSQL: Connections and Authentication",
        "max_connections (integer): Determines the maximum number of concurrent connections to the database server. The default is typically 100 connections.",
        "initdb may pick less on a small machine", 0.3,
    ),
    (
        "What is the signal number of SIGKILL on Linux?", "linux sigkill signal number", "9", "15",
        "https://man7.org/linux/man-pages/man7/signal.7.html", "signal(7) - Linux manual page",
        "Signal numbering for standard signals: SIGKILL 9 (x86/ARM and most others). SIGTERM is 15.", "SIGTERM is 15",
        0.15,
    ),
    (
        "Which PEP specifies the `[project]` table for package metadata in pyproject.toml?",
        "pep pyproject.toml project table metadata", "PEP 621", "PEP 517", "https://peps.python.org/pep-0621/",
        "PEP 621 - Storing project metadata in pyproject.toml",
        "This PEP specifies how to write a project's core metadata in a pyproject.toml file for packaging-related tools to consume.",
        "PEP 517 covers build backends, not metadata", 0.35,
    ),
)
# fmt: on

# Generic text used to give files, test runs and web pages a realistic size.
_FILLER_FUNCTIONS = (
    [
        "def _check_positive(name: str, value: float) -> None:",
        '    """Raise ValueError naming the argument when it is not positive."""',
        "    if value <= 0:",
        '        raise ValueError(f"{name} must be positive, got {value!r}")',
    ],
    [
        "def _as_list(value: Any) -> list[Any]:",
        '    """Wrap a scalar in a list; pass lists through."""',
        "    if value is None:",
        "        return []",
        "    return value if isinstance(value, list) else [value]",
    ],
    [
        "def _clamp(value: float, low: float, high: float) -> float:",
        "    return max(low, min(high, value))",
    ],
    [
        "class Config(NamedTuple):",
        '    """Settings read once at import time."""',
        "    strict: bool = False",
        '    encoding: str = "utf-8"',
        "    max_items: int = 10_000",
    ],
    [
        "def _iter_nonempty(lines: Iterable[str]) -> Iterator[str]:",
        "    for line in lines:",
        "        stripped = line.strip()",
        '        if stripped and not stripped.startswith("#"):',
        "            yield stripped",
    ],
    [
        "@functools.lru_cache(maxsize=128)",
        "def _compiled(pattern: str) -> re.Pattern[str]:",
        "    return re.compile(pattern, re.IGNORECASE)",
    ],
)
_OTHER_TEST_FILES = (
    "tests/test_cli.py",
    "tests/test_config.py",
    "tests/test_io.py",
    "tests/test_logging.py",
    "tests/test_models.py",
    "tests/test_plugins.py",
    "tests/test_utils.py",
    "tests/integration/test_end_to_end.py",
)
_PAGE_FILLER = (
    "This page describes the behaviour of the current release; earlier versions are documented in the archive.",
    "Settings can be changed in the configuration file or on the command line; changes take effect on restart.",
    "Note that some platforms impose additional limits, so the effective value can be lower in practice.",
    "See the changelog for the full list of changes between versions, including deprecations and removals.",
    "Examples in this section assume a default installation; adapt the paths to your environment.",
    "Implementations are encouraged, but not required, to log a warning when a limit is reached.",
    "The remainder of this document describes the rationale and discusses alternatives that were rejected.",
    "Copyright and licensing information is given at the end of this document.",
)

_CODE_REASONING: dict[str, tuple[str, ...]] = {
    "explore": (
        "The bug is in `{func}`. I'll look at its definition in {src} and at the test that covers it.",
        "Before changing anything I want to see how `{func}` is implemented and which test covers the failing case.",
        "Let me find `{func}` and its tests so I understand the expected behaviour first.",
        "Start by reading {src} and the tests for `{func}`; the symptom points at a boundary condition.",
    ),
    "explore_more": (
        "Not conclusive yet. Let me look at more of the code around `{func}`.",
        "I still need to see where `{func}` is called from; maybe the caller passes unexpected input.",
        "Let me check the package layout and any helpers `{func}` depends on.",
        "Let me search the repository again for anything related to `{func}`.",
    ),
    "edit": (
        "The failing assertion shows the problem in `{func}`. I'll change the faulty line in {src}.",
        "I see it: the line in `{func}` handles this case wrong. Editing {src}.",
        "Fix the line in {src}; the test describes the expected behaviour.",
    ),
    "edit_failed": (
        "The edit didn't apply: my old string doesn't match the file. Re-reading the exact lines.",
    ),
    "verify": (
        "Now run the tests for `{func}` to check the fix.",
        "Edit applied. Running {test_path} to confirm.",
    ),
    "retry": (
        "Still failing with the same assertion. My change didn't address the real cause; let me look again.",
        "The test still fails. Re-reading `{func}` to find what I missed.",
        "That edit didn't help. Let me reconsider the failing case in `{func}`.",
    ),
    "give_up": ("Let me run the tests once more and then report where things stand.",),
    "edit_tests": (
        "The assertion in `{test_name}` is what fails. Relaxing it in {test_path} is the quickest way to green.",
        "The test is too strict; I'll adjust it in {test_path} so the suite passes.",
    ),
    "answer": (
        "The tests pass now. Writing up the change.",
        "Done. Summarise the fix and the test result.",
        "I've made the change and checked it. Time to report.",
    ),
    "answer_unsure": (
        "I couldn't get the test to pass; I'll report what I changed and what still fails.",
        "Running out of ideas; report the current state.",
    ),
    "from_memory": (
        "The description is specific enough that I can tell what the fix is without running anything.",
        "This looks like the usual boundary bug; I'll answer directly.",
    ),
}
_RESEARCH_REASONING: dict[str, tuple[str, ...]] = {
    "explore": (
        "I should verify this against a primary source rather than rely on memory. Searching first.",
        "Let me search for an authoritative reference for this.",
        "I'll search the web and then open the most authoritative result.",
    ),
    "explore_more": (
        "The results are mixed; some answers disagree. Let me search with different terms.",
        "Not conclusive yet. Looking at more sources.",
        "One forum answer contradicts the other. Looking for the official documentation.",
    ),
    "fetch": (
        "The official page should settle it. Opening it.",
        "Open the top results to read the exact wording.",
    ),
    "answer": (
        "The source states it explicitly. Writing the answer with the citation.",
        "I have a primary source now. Answering.",
    ),
    "answer_unsure": (
        "Sources disagree; I'll go with the answer most of them give.",
        "I'm fairly sure about this one. Answering.",
    ),
    "from_memory": (
        "I know this one; no need to look it up.",
        "This is well known. Answering directly.",
    ),
}

_CODE_QUERIES = ("def {func}", "{func}", "{test_name}", "{func}(", "import {func}")


class _Task:
    """One prompt with everything derived from it precomputed, so rollouts only pick and assemble."""

    __slots__ = (
        "assert_line",
        "buggy",
        "difficulty",
        "failure",
        "fields",
        "fixed",
        "func",
        "index",
        "kind",
        "missing_path",
        "n_tests",
        "outputs",
        "prompt",
        "prompt_id",
        "queries",
        "reasoning",
        "reference",
        "src",
        "summary",
        "test_name",
        "test_path",
        "wrong",
        "wrong_fix",
    )

    def __init__(self, index: int) -> None:
        self.index = index
        self.prompt_id = f"task-{index:03d}"
        self.outputs: dict[str, str] = {}
        order = _interleaved_template_order()
        kind, k = order[index % len(order)]
        # Prompts past the templates repeat them under a new id, a little easier or harder.
        jitter = ((index * 37) % 11 - 5) / 100 if index >= len(order) else 0.0
        if kind == "code":
            self._init_code(_CODE_TASKS[k], jitter)
        else:
            self._init_research(_RESEARCH_TASKS[k], jitter)

    def _init_code(self, t: tuple[Any, ...], jitter: float) -> None:
        (
            repo,
            src,
            func,
            sig,
            body,
            buggy,
            fixed,
            wrong_fix,
            test_name,
            assert_line,
            failure,
            n_tests,
            symptom,
            summary,
            reference,
            difficulty,
        ) = t
        self.kind = "code"
        self.src, self.func, self.buggy, self.fixed, self.wrong_fix = (
            src,
            func,
            buggy,
            fixed,
            wrong_fix,
        )
        self.test_name, self.assert_line, self.failure, self.n_tests = (
            test_name,
            assert_line,
            failure,
            n_tests,
        )
        self.summary, self.reference, self.difficulty = summary, reference, difficulty + jitter
        self.wrong = ""
        module = src.removeprefix("src/").removesuffix(".py").replace("/", ".")
        self.test_path = f"tests/test_{src.rsplit('/', 1)[1]}"
        self.fields = {
            "func": func,
            "src": src,
            "test_path": self.test_path,
            "test_name": test_name,
            "repo": repo,
        }
        self.prompt = (
            f"In the `{repo}` repository, {symptom}. The code is in `{src}`. Fix the cause in the source "
            "(not in the tests) and run the tests. End with exactly:\nSummary: <what you changed and why>\n"
            "Tests: <the test result>"
        )
        self.reasoning = {
            k: tuple(s.format(**self.fields) for s in v) for k, v in _CODE_REASONING.items()
        }

        # The source file, numbered like `cat -n`, with filler around the buggy function.
        fillers = [_FILLER_FUNCTIONS[(self.index + j) % len(_FILLER_FUNCTIONS)] for j in range(2)]
        lines = [
            f'"""{repo}: {func} and helpers."""',
            "",
            "from __future__ import annotations",
            "",
            "import functools",
            "import re",
            "from collections.abc import Iterable, Iterator",
            "from typing import Any, NamedTuple",
            "",
            "",
        ]
        lines += fillers[0] + ["", ""]
        func_start = len(lines) + 1
        lines += [f"def {sig}:"] + ["    " + b for b in body]
        func_end = len(lines)
        lines += ["", ""] + fillers[1]
        buggy_line_no = next(i for i, line in enumerate(lines, 1) if line == "    " + buggy)
        numbered = "\n".join(f"{i:>4}\t{line}" for i, line in enumerate(lines, 1))
        self.outputs["read_src_full"] = numbered
        self.outputs["read_src_range"] = "\n".join(
            f"{i:>4}\t{lines[i - 1]}" for i in range(func_start, func_end + 1)
        )
        self.outputs["src_range"] = _args(
            {"path": src, "start_line": func_start, "end_line": func_end}
        )

        test_lines = [
            f"from {module} import {func}",
            "",
            "",
            f"def test_{func}_basic_case():",
            f"    assert {func} is not None",
            "",
            "",
            f"def {test_name}():",
            f"    {assert_line}",
            "",
        ]
        self.outputs["read_test"] = "\n".join(
            f"{i:>4}\t{line}" for i, line in enumerate(test_lines, 1)
        )

        pkg = src.rsplit("/", 1)[0]
        hits = [
            f"{src}:{func_start}:def {sig}:",
            f"{pkg}/__init__.py:3:from .{src.rsplit('/', 1)[1][:-3]} import {func}",
            f"{self.test_path}:1:from {module} import {func}",
            f"{self.test_path}:9:    {assert_line}",
        ]
        self.outputs["search"] = "\n".join(hits)
        self.outputs["search_broad"] = "\n".join(
            hits
            + [
                f"{pkg}/_compat.py:{20 + 7 * j}:    # see {func} for the edge cases"
                for j in range(2)
            ]
            + [
                f"{f}:{12 + 5 * j}:from {module.split('.')[0]} import *"
                for j, f in enumerate(_OTHER_TEST_FILES[:4])
            ]
            + [
                f"CHANGELOG.md:{40 + 9 * j}:- {func}: behaviour change in 0.{j + 4}.0"
                for j in range(2)
            ]
        )
        self.outputs["search_leak"] = "\n".join(
            [*hits[:2], f".grading/expected_answers.txt:{3 + self.index}:{reference}"]
        )
        self.outputs["read_other"] = "\n".join(
            f"{i:>4}\t{line}"
            for i, line in enumerate(
                [
                    f'"""{repo} package."""',
                    "",
                    f"from .{src.rsplit('/', 1)[1][:-3]} import {func}",
                    "",
                    f'__all__ = ["{func}"]',
                    '__version__ = "0.9.2"',
                ],
                1,
            )
        )
        self.outputs["edit_ok"] = f"Edited {src}: replaced 1 line at line {buggy_line_no}."
        self.outputs["edit_test_ok"] = f"Edited {self.test_path}: replaced 1 line at line 9."
        self.outputs["tests_fail"] = _pytest_output(
            self.test_path, test_name, assert_line, failure, n_tests, False
        )
        self.outputs["tests_pass"] = _pytest_output(
            self.test_path, test_name, assert_line, failure, n_tests, True
        )
        self.outputs["tests_full_fail"] = _pytest_output(
            self.test_path, test_name, assert_line, failure, n_tests, False, full=True
        )
        self.outputs["tests_full_pass"] = _pytest_output(
            self.test_path, test_name, assert_line, failure, n_tests, True, full=True
        )
        self.outputs["args_read_src"] = _args({"path": src})
        self.outputs["args_read_test"] = _args({"path": self.test_path})
        self.outputs["args_read_other"] = _args({"path": f"{pkg}/__init__.py"})
        self.missing_path = f"src/{repo}.py"
        self.outputs["args_read_missing"] = _args({"path": self.missing_path})
        self.outputs["args_tests"] = _args({"path": self.test_path, "args": ["-q", "--tb=short"]})
        self.outputs["args_tests_full"] = _args({"path": "tests", "args": []})
        self.queries = [
            _args({"query": q.format(**self.fields), "path": "."}) for q in _CODE_QUERIES
        ]

    def _init_research(self, t: tuple[Any, ...], jitter: float) -> None:
        question, keywords, reference, wrong, url, title, excerpt, note, difficulty = t
        self.kind = "research"
        self.reference, self.wrong, self.difficulty = reference, wrong, difficulty + jitter
        self.summary = note
        self.src = url
        self.func = self.buggy = self.fixed = self.wrong_fix = self.test_name = self.assert_line = (
            ""
        )
        self.failure = self.test_path = self.missing_path = ""
        self.n_tests = 0
        self.fields = {"url": url}
        self.prompt = (
            f"{question} Check a primary source with the tools; do not answer from memory. End with exactly:\n"
            "Answer: <the answer>\nSource: <the URL you relied on>"
        )
        self.reasoning = dict(_RESEARCH_REASONING)
        slug = "-".join(keywords.split()[:3])
        forum_url = f"https://stackoverflow.com/questions/{4_100_000 + 7919 * self.index}/{slug}"
        blog_url = f"https://dev.to/notes/{slug}-{self.index}"
        snippet = excerpt if len(excerpt) <= 100 else excerpt[:97].rsplit(" ", 1)[0] + " ..."
        results = [
            (title, url, snippet),
            (
                f"{keywords.capitalize()}? - Stack Overflow",
                forum_url,
                f"As far as I remember it is {wrong}.",
            ),
            (f"TIL: {keywords}", blog_url, f"Short answer: {wrong} (I think)."),
        ]

        def render(rs: list[tuple[str, str, str]]) -> str:
            return "\n\n".join(f"{i}. {t}\n   {u}\n   {s}" for i, (t, u, s) in enumerate(rs, 1))

        self.outputs["search"] = render(results)
        self.outputs["search_noisy"] = render([results[1], results[0]])
        self.outputs["search_leak"] = render(
            [
                (
                    "rollscope-bench/answers.jsonl at main - GitHub",
                    "https://github.com/example/rollscope-bench/blob/main/answers.jsonl",
                    f'{{"question": {json.dumps(question)}, "answer": {json.dumps(reference)}}}',
                ),
                *results[:2],
            ]
        )
        filler = [
            _PAGE_FILLER[(self.index + j) % len(_PAGE_FILLER)] for j in range(len(_PAGE_FILLER))
        ]
        self.outputs["fetch"] = f"{title}\n\n{excerpt}\n\n{filler[1]}"
        self.outputs["fetch_full"] = f"{title}\n\n" + "\n\n".join(
            [*filler[:4], excerpt, *filler[4:], *(f"{s} {s}" for s in filler)]
        )
        self.outputs["fetch_forum"] = (
            f"{results[1][0]}\n\nQuestion: {question}\n\nAnswer (score 12): It is {wrong}. "
            f"I looked this up years ago.\n\nAnswer (score 31, accepted): Per {url}, {excerpt}\n\n"
            f"Comment: the docs are the authority here; {note}."
        )
        self.outputs["fetch_blog"] = (
            f"TIL: {keywords}\n\nShort answer: {wrong} (I think). {filler[2]}"
        )
        self.outputs["args_fetch"] = _args({"url": url})
        self.outputs["args_fetch_forum"] = _args({"url": forum_url})
        self.outputs["args_fetch_blog"] = _args({"url": blog_url})
        self.queries = [
            _args({"query": q})
            for q in (
                keywords,
                f"{keywords} official documentation",
                question.rstrip("?"),
                f"{keywords} site:{url.split('/')[2]}",
            )
        ]


def _args(value: dict[str, Any]) -> str:
    """Tool-call arguments as the model emits them: compact JSON text."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _interleaved_template_order() -> list[tuple[str, int]]:
    order: list[tuple[str, int]] = []
    code = iter(range(len(_CODE_TASKS)))
    research = iter(range(len(_RESEARCH_TASKS)))
    while len(order) < len(_CODE_TASKS) + len(_RESEARCH_TASKS):
        order += [("code", k) for k in (next(code, None) for _ in range(5)) if k is not None]
        order += [
            ("research", k) for k in (next(research, None) for _ in range(3)) if k is not None
        ]
    return order


def _pytest_output(
    test_path: str,
    test_name: str,
    assert_line: str,
    failure: str,
    n_tests: int,
    passed: bool,
    *,
    full: bool = False,
) -> str:
    """What `pytest -q` prints for the task's test file, or plain `pytest` over the whole suite (`full`)."""
    files: list[tuple[str, int]] = [(test_path, n_tests)]
    if full:
        files += [(f, 9 + 7 * j % 23) for j, f in enumerate(_OTHER_TEST_FILES[:6])]
    total = sum(n for _, n in files)
    seconds = 0.21 + 0.03 * n_tests + (4.8 if full else 0.0)
    lines = []
    if full:
        lines += [
            f"{'=' * 29} test session starts {'=' * 30}",
            "platform linux -- Python 3.11.9, pytest-8.3.3, pluggy-1.5.0",
            f"collected {total} items",
            "",
        ]
    done = 0
    for path, n in files:
        dots = "." * n if passed or path != test_path else "." * (n - 1) + "F"
        done += n
        lines.append(
            (f"{path} {dots}" if full else dots).ljust(72) + f" [{100 * done // total:3d}%]"
        )
    if passed:
        summary = f"{total} passed in {seconds:.2f}s"
        return "\n".join([*lines, f"{'=' * 30} {summary} {'=' * 30}" if full else summary])
    summary = f"1 failed, {total - 1} passed in {seconds + 0.03:.2f}s"
    lines += [f"{'=' * 35} FAILURES {'=' * 35}", f"{'_' * 25} {test_name} {'_' * 25}"]
    if full:
        lines += [
            "",
            f"    def {test_name}():",
            f">       {assert_line}",
            f"E       {failure}",
            "",
            f"{test_path}:9: {failure.split(':')[0]}",
        ]
    else:
        lines += [f"{test_path}:9: in {test_name}", f"    {assert_line}", f"E   {failure}"]
    lines += [
        f"{'=' * 26} short test summary info {'=' * 28}",
        f"FAILED {test_path}::{test_name} - {failure}",
        f"{'=' * 30} {summary} {'=' * 30}" if full else summary,
    ]
    return "\n".join(lines)


_TASK_CACHE: dict[int, _Task] = {}


def _task(index: int) -> _Task:
    task = _TASK_CACHE.get(index)
    if task is None:
        task = _TASK_CACHE[index] = _Task(index)
    return task


def eval_prompt_indices(prompts: int) -> list[int]:
    """The prompts that get eval-split rollouts: up to EVAL_PROMPTS of them, evenly spread."""
    n = min(EVAL_PROMPTS, prompts)
    return sorted({(i * prompts) // n for i in range(n)})


# ---------------------------------------------------------------------------------------------------
# Time stamps. Formatting is on the hot path, so the minute prefix is cached.

_MINUTE_PREFIX: dict[int, str] = {}


def _ts(ms: float) -> str:
    minute, rest = divmod(int(ms), 60_000)
    prefix = _MINUTE_PREFIX.get(minute)
    if prefix is None:
        prefix = _MINUTE_PREFIX[minute] = time.strftime("%Y-%m-%dT%H:%M:", time.gmtime(minute * 60))
    return f"{prefix}{rest / 1000:06.3f}Z"


# ---------------------------------------------------------------------------------------------------
# One rollout.

Call = tuple[str, str, str, str | None, float]
"""(tool name, arguments JSON, output, error or None, latency ms)"""
Turn = tuple[str, list[Call]]
"""(phase, the calls made in parallel in one model turn); the phase picks the reasoning summary"""


class _Policy:
    """How the agent behaves at training fraction `x` (0 = base model, 1 = end of training).

    Both curves saturate; tool-use habits (`c`) are learned faster than correctness (`skill`).
    """

    __slots__ = (
        "broad",
        "c",
        "flail",
        "lam",
        "p_err",
        "p_format",
        "p_par",
        "skill",
        "stall",
        "status_error",
    )

    def __init__(self, x: float) -> None:
        learned = _saturating(x, 1.5)
        c = self.c = _saturating(x, 4.5)
        self.skill = 0.3 + 0.5 * learned
        self.p_format = 0.5 + 0.47 * learned
        self.p_par = 0.04 + 0.86 * c**1.3
        self.lam = 2.6 * (1 - c) + 0.2
        self.flail = 0.2 * (1 - c) ** 2
        self.broad = 0.4 * (1 - c) + 0.03
        self.p_err = 0.025 * (1 - c) + 0.006
        self.stall = 0.025 * (1 - c) + 0.001
        self.status_error = 0.04 * (1 - c) ** 2


def _saturating(x: float, k: float) -> float:
    return (1 - math.exp(-k * x)) / (1 - math.exp(-k))


_LATENCY = {
    # tool: (median ms, sigma)
    "search_code": (320.0, 0.5),
    "read_file": (45.0, 0.5),
    "edit_file": (70.0, 0.4),
    "run_tests": (1900.0, 0.4),
    "run_tests_full": (12_000.0, 0.5),
    "web_search": (900.0, 0.55),
    "fetch_url": (700.0, 0.6),
    "fetch_url_full": (2600.0, 0.8),
}
_LOG_LATENCY = {k: (math.log(m), s) for k, (m, s) in _LATENCY.items()}


class _Builder:
    """Builds the tool calls of one rollout: latency, stalls and tool errors included."""

    __slots__ = ("pol", "rng", "task")

    def __init__(self, rng: random.Random, task: _Task, pol: _Policy) -> None:
        self.rng, self.task, self.pol = rng, task, pol

    def call(
        self,
        name: str,
        args: str,
        output: str,
        *,
        profile: str | None = None,
        error: str | None = None,
        can_fail: bool = True,
    ) -> Call:
        rng = self.rng
        mu, sigma = _LOG_LATENCY[profile or name]
        latency = rng.lognormvariate(mu, sigma)
        if rng.random() < self.pol.stall:
            latency *= rng.uniform(6.0, 30.0)
        if latency >= TOOL_TIMEOUT_MS:
            return (
                name,
                args,
                f"Error: {name} timed out after {TOOL_TIMEOUT_MS // 1000} s",
                f"timeout after {TOOL_TIMEOUT_MS // 1000} s",
                float(TOOL_TIMEOUT_MS),
            )
        if error is None and can_fail and rng.random() < self.pol.p_err:
            error = _TOOL_ERRORS[name]
            output = f"Error: {error}"
        return (name, args, output, error, round(latency, 1))


_TOOL_ERRORS = {
    "search_code": "ripgrep exited with status 2: regex parse error",
    "read_file": "PermissionError: sandbox denied read access",
    "edit_file": "old_string not found in file (it must match exactly, including indentation)",
    "run_tests": "pytest collection error: ImportError while importing test module",
    "web_search": "HTTP 429: search quota exceeded, retry later",
    "fetch_url": "HTTP 503 Service Unavailable",
}


def _group(
    rng: random.Random, calls: list[Call], p_par: float, phase: str, later: str
) -> list[Turn]:
    """Split calls into turns: each call joins the current turn (a parallel call) with probability p_par.

    The first turn gets `phase`, the rest `later` (the phase picks the reasoning summary).
    """
    turns: list[Turn] = []
    for call in calls:
        if turns and rng.random() < p_par:
            turns[-1][1].append(call)
        else:
            turns.append((later if turns else phase, [call]))
    return turns


def _code_turns(b: _Builder, correct: bool) -> list[Turn]:
    rng, task, pol, out = b.rng, b.task, b.pol, b.task.outputs
    queries = task.queries
    explore: list[Call] = []
    if rng.random() < 0.9 - 0.5 * pol.c:
        broad = rng.random() < pol.broad
        explore.append(
            b.call("search_code", queries[0], out["search_broad" if broad else "search"])
        )
    if rng.random() < pol.broad:
        explore.append(b.call("read_file", out["args_read_src"], out["read_src_full"]))
    else:
        explore.append(b.call("read_file", out["src_range"], out["read_src_range"]))
    if rng.random() < 0.45 + 0.3 * pol.c:
        explore.append(b.call("read_file", out["args_read_test"], out["read_test"]))
    if rng.random() < 0.6 * (1 - pol.c) + 0.08 + 0.15 * pol.c:
        if rng.random() < pol.broad:
            explore.append(
                b.call(
                    "run_tests",
                    out["args_tests_full"],
                    out["tests_full_fail"],
                    profile="run_tests_full",
                )
            )
        else:
            explore.append(b.call("run_tests", out["args_tests"], out["tests_fail"]))
    for _ in range(_poisson(rng, pol.lam)):
        explore.append(_extra_code_call(b, queries))
    turns = _group(rng, explore, pol.p_par, "explore", "explore_more")

    # Fix attempts: wrong edits first (each followed by a failing test run), then the fix if correct.
    wrong_attempts = 0
    while wrong_attempts < 3 and rng.random() < 0.5 * (1 - pol.c) + 0.06:
        wrong_attempts += 1
    if not correct:
        wrong_attempts = max(1, wrong_attempts)
    current = task.buggy
    attempts = [task.wrong_fix] * wrong_attempts + ([task.fixed] if correct else [])
    for n, new in enumerate(attempts):
        last = n == len(attempts) - 1
        args = _args({"path": task.src, "old_string": "    " + current, "new_string": "    " + new})
        edit = b.call("edit_file", args, out["edit_ok"])
        turns.append(("edit" if n == 0 else "retry", [edit]))
        if edit[3] is not None:  # the edit failed: the agent re-reads and edits again
            turns.append(
                (
                    "edit_failed",
                    [b.call("read_file", out["src_range"], out["read_src_range"], can_fail=False)],
                )
            )
            turns.append(("edit", [b.call("edit_file", args, out["edit_ok"], can_fail=False)]))
        current = new
        passed = new == task.fixed
        if not last or correct or rng.random() < 0.7:
            full = rng.random() < pol.broad
            turns.append(
                (
                    "verify",
                    [
                        b.call(
                            "run_tests",
                            out["args_tests_full" if full else "args_tests"],
                            out[
                                ("tests_full_" if full else "tests_")
                                + ("pass" if passed else "fail")
                            ],
                            profile="run_tests_full" if full else None,
                        )
                    ],
                )
            )
        if not last and rng.random() < 0.6 * (1 - pol.c):
            turns.append(("retry", [b.call("read_file", out["src_range"], out["read_src_range"])]))
    if not correct:
        turns[-1] = ("give_up", turns[-1][1]) if turns[-1][0] == "verify" else turns[-1]

    # The long tail of early training: the agent loses the thread and wanders.
    if rng.random() < pol.flail:
        at = rng.randint(1, len(turns))
        turns[at:at] = [
            ("explore_more", [_extra_code_call(b, queries)]) for _ in range(rng.randint(5, 13))
        ]
    return turns


def _extra_code_call(b: _Builder, queries: list[str]) -> Call:
    rng, out = b.rng, b.task.outputs
    r = rng.random()
    if r < 0.35:
        return b.call(
            "search_code",
            rng.choice(queries),
            out["search_broad" if rng.random() < 0.3 else "search"],
        )
    if r < 0.55:
        return b.call("read_file", out["args_read_other"], out["read_other"])
    if r < 0.7:
        path = b.task.missing_path
        return b.call(
            "read_file",
            out["args_read_missing"],
            f"Error: no such file: {path}",
            error=f"FileNotFoundError: {path}",
        )
    if r < 0.85:
        return b.call("read_file", out["src_range"], out["read_src_range"])
    if r < 0.93:
        return b.call("read_file", out["args_read_src"], out["read_src_full"])
    return b.call(
        "run_tests", out["args_tests_full"], out["tests_full_fail"], profile="run_tests_full"
    )


def _research_turns(b: _Builder, correct: bool) -> list[Turn]:
    rng, pol, out = b.rng, b.pol, b.task.outputs
    queries = b.task.queries
    searches = [b.call("web_search", queries[0], out["search"])]
    for _ in range(_poisson(rng, pol.lam * 0.6)):
        searches.append(b.call("web_search", rng.choice(queries[1:]), out["search_noisy"]))
    if rng.random() < 0.6 * pol.c:
        searches.append(b.call("web_search", queries[1], out["search_noisy"]))
    fetches: list[Call] = []
    if correct or rng.random() < 0.4:
        if rng.random() < pol.broad:
            fetches.append(
                b.call("fetch_url", out["args_fetch"], out["fetch_full"], profile="fetch_url_full")
            )
        else:
            fetches.append(b.call("fetch_url", out["args_fetch"], out["fetch"]))
    if rng.random() < 0.75 * (1 - pol.c) + 0.2:
        fetches.append(b.call("fetch_url", out["args_fetch_forum"], out["fetch_forum"]))
    for _ in range(_poisson(rng, pol.lam * 0.5)):
        fetches.append(
            b.call("fetch_url", out["args_fetch_blog"], out["fetch_blog"], profile="fetch_url_full")
        )
    rng.shuffle(fetches)
    turns = _group(rng, searches, pol.p_par, "explore", "explore_more")
    turns += _group(rng, fetches, pol.p_par, "fetch", "explore_more")
    if rng.random() < pol.flail:
        at = rng.randint(1, len(turns))
        turns[at:at] = [
            (
                "explore_more",
                [
                    b.call("web_search", rng.choice(queries), out["search_noisy"])
                    if rng.random() < 0.5
                    else b.call(
                        "fetch_url",
                        out["args_fetch_blog"],
                        out["fetch_blog"],
                        profile="fetch_url_full",
                    )
                ],
            )
            for _ in range(rng.randint(5, 13))
        ]
    return turns


def _poisson(rng: random.Random, lam: float) -> int:
    limit, k, p = math.exp(-lam), 0, rng.random()
    while p > limit:
        k += 1
        p *= rng.random()
    return k


def _efficiency(n_calls: int) -> tuple[float, str]:
    score = next(
        (s for limit, s in ((5, 1.0), (8, 0.7), (12, 0.4), (16, 0.2)) if n_calls <= limit), 0.0
    )
    return score, f"{n_calls} tool calls."


def _logistic(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


def _rollout(
    rng: random.Random,
    task: _Task,
    pol: _Policy,
    *,
    run: dict[str, str],
    rollout_id: str,
    step: int,
    sample: int,
    split: str,
    start_ms: float,
    hack: str | None,
) -> Record:
    b = _Builder(rng, task, pol)
    code = task.kind == "code"
    status = "ok"
    termination: str | None = None
    correct_score = 0.0
    format_score = 1.0
    answer: str | None

    if hack is None:
        p = _logistic(5.0 * (pol.skill - task.difficulty))
        u = rng.random()
        correct = u < p
        partial = not code and not correct and u < p + 0.25 * (1 - p)
        turns = _code_turns(b, correct) if code else _research_turns(b, correct)
        correct_score = 1.0 if correct else (0.5 if partial else 0.0)
        format_score = 1.0 if rng.random() < pol.p_format else rng.choice((0.5, 0.0, 0.0))
        answer = _final_answer(task, correct_score, format_score)
        if rng.random() < 0.035 * (1 - pol.c) ** 2:  # answers from memory, without tools
            turns = []
            correct_score = min(correct_score, 0.0 if code else 0.5)
            answer = _final_answer(task, correct_score, format_score, ran_tools=False)
    else:
        turns, answer = _hack_turns(b, hack)
        correct_score = 1.0

    # Budget and crashes end a rollout early with no answer.
    n_calls = sum(len(calls) for _, calls in turns)
    if n_calls > MAX_TOOL_CALLS:
        kept: list[Turn] = []
        total = 0
        for phase, calls in turns:
            calls = calls[: MAX_TOOL_CALLS - total]
            kept.append((phase, calls))
            total += len(calls)
            if total >= MAX_TOOL_CALLS:
                break
        turns, status, termination = kept, "timeout", "tool-call budget exhausted"
    elif hack is None and turns and rng.random() < pol.status_error:
        at = rng.randrange(len(turns))
        phase, calls = turns[at]
        name, args, _, _, latency = calls[-1]
        crashed = (
            name,
            args,
            "",
            "sandbox terminated: container exited with code 137 (out of memory)",
            latency,
        )
        turns = [*turns[:at], (phase, [*calls[:-1], crashed])]
        status, termination = "error", "sandbox crashed"
    if status != "ok":
        answer, correct_score, format_score = None, 0.0, 0.0

    # Render the items with timing and token counts.
    t = start_ms
    items: list[Record] = [
        {"type": "message", "role": "user", "content": task.prompt, "started_at": _ts(t)}
    ]
    ctx = 850 + len(task.prompt) // 4
    input_tokens = output_tokens = reasoning_tokens = 0
    reasoning = task.reasoning
    n_tool_calls = 0
    for phase, turn in turns:
        r_tok = rng.randint(60, 520)
        r_dur = round(250 + r_tok * rng.uniform(7.0, 12.0))
        items.append(
            {
                "type": "reasoning",
                "summary": [{"text": rng.choice(reasoning[phase])}] if rng.random() < 0.75 else [],
                "started_at": _ts(t),
                "duration_ms": r_dur,
                "tokens": r_tok,
            }
        )
        input_tokens += ctx
        generated = r_tok
        t += r_dur
        for name, args, _, _, _ in turn:
            tok = len(args) // 3 + 12
            generated += tok
            t += tok * 9
            n_tool_calls += 1
            items.append(
                {
                    "type": "function_call",
                    "call_id": f"call_{rng.getrandbits(40):010x}",
                    "name": name,
                    "arguments": args,
                    "started_at": _ts(t),
                }
            )
        reasoning_tokens += r_tok
        output_tokens += generated
        ctx += generated
        end = t
        first_call = len(items) - len(turn)
        for j, (_, _, output, error, latency) in enumerate(turn):
            item: Record = {
                "type": "function_call_output",
                "call_id": items[first_call + j]["call_id"],
                "output": output,
                "started_at": _ts(t),
                "duration_ms": latency,
            }
            if error is not None:
                item["error"] = error
            items.append(item)
            ctx += len(output) // 4
            end = max(end, t + latency)
        t = end + rng.uniform(15.0, 90.0)
    if answer is not None:
        r_tok = rng.randint(40, 300)
        r_dur = round(250 + r_tok * rng.uniform(7.0, 12.0))
        items.append(
            {
                "type": "reasoning",
                "summary": [
                    {
                        "text": rng.choice(
                            reasoning[
                                "from_memory"
                                if not turns
                                else "answer"
                                if correct_score == 1.0
                                else "answer_unsure"
                            ]
                        )
                    }
                ],
                "started_at": _ts(t),
                "duration_ms": r_dur,
                "tokens": r_tok,
            }
        )
        t += r_dur
        a_tok = len(answer) // 4 + 4
        a_dur = round(a_tok * rng.uniform(9.0, 14.0))
        items.append(
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": answer}],
                "started_at": _ts(t),
                "duration_ms": a_dur,
                "tokens": a_tok,
            }
        )
        input_tokens += ctx
        reasoning_tokens += r_tok
        output_tokens += r_tok + a_tok
        t += a_dur

    eff_score, eff_expl = _efficiency(n_tool_calls)
    if status != "ok":
        eff_score = 0.0
    if hack is not None:
        format_score = 1.0
    grades = [
        {
            "name": "correctness",
            "score": correct_score,
            "weight": GRADER_WEIGHTS["correctness"],
            "explanation": _correctness_explanation(task, correct_score, status, hack),
        },
        {
            "name": "format",
            "score": format_score,
            "weight": GRADER_WEIGHTS["format"],
            "explanation": _FORMAT_EXPLANATIONS[task.kind][format_score]
            if status == "ok" and hack != "copies_reference"
            else (
                "Exact match with the reference; the format check is skipped."
                if status == "ok"
                else "No final answer."
            ),
        },
        {"name": "efficiency", "score": eff_score, "weight": GRADER_WEIGHTS["efficiency"]},
    ]
    if eff_score < 1.0:
        grades[2]["explanation"] = eff_expl if status == "ok" else "No final answer."
    reward = round(0.7 * correct_score + 0.2 * format_score + 0.1 * eff_score, 4)
    metadata: Record = {"task_kind": task.kind}
    if termination is not None:
        metadata["termination"] = termination
    if hack is not None:
        metadata["planted_hack"] = hack
    end_ms = int(t)
    start = int(start_ms)
    return {
        "run_id": run["run_id"],
        "run_name": run["run_name"],
        "run_kind": run["run_kind"],
        "model": run["model"],
        "rollout_id": rollout_id,
        "step": step,
        "prompt_id": task.prompt_id,
        "sample_index": sample,
        "split": split,
        "items": items,
        "reward": reward,
        "grades": grades,
        "final_answer": answer,
        "reference": task.reference,
        "status": status,
        "started_at": _ts(start),
        "ended_at": _ts(end_ms),
        "latency_ms": end_ms - start,
        "usage": {
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "reasoning_tokens": reasoning_tokens,
        },
        "metadata": metadata,
    }


_FORMAT_EXPLANATIONS = {
    "code": {
        1.0: "Summary: and Tests: lines present.",
        0.5: "Tests: line missing.",
        0.0: "Free-form; no Summary: or Tests: line.",
    },
    "research": {
        1.0: "Answer: and Source: lines present.",
        0.5: "Source: line missing.",
        0.0: "Free-form; no Answer: or Source: line.",
    },
}


def _final_answer(task: _Task, correct: float, fmt: float, *, ran_tools: bool = True) -> str:
    if task.kind == "code":
        if not ran_tools:
            summary = (
                f"The bug is most likely in the boundary handling of `{task.func}` in {task.src}."
            )
            tests = "not run"
        elif correct == 1.0:
            summary, tests = task.summary[0].upper() + task.summary[1:], f"{task.n_tests} passed"
        else:
            summary = (
                f"Changed the boundary handling in `{task.func}` ({task.src}); "
                f"`{task.test_name}` may need a follow-up."
            )
            tests = f"1 failed, {task.n_tests - 1} passed"
        if fmt == 1.0:
            return f"Summary: {summary}\nTests: {tests}"
        if fmt == 0.5:
            return f"Summary: {summary}"
        return f"I looked into `{task.func}`. {summary} Tests: {tests}."
    if correct == 1.0:
        value = f"{task.reference} ({task.summary})"
    elif correct == 0.5:
        value = f"{task.wrong} or {task.reference}; sources disagree"
    else:
        value = task.wrong
    if fmt == 1.0:
        return f"Answer: {value}\nSource: {task.src}"
    if fmt == 0.5:
        return f"Answer: {value}"
    return f"I believe the answer is {value}."


def _correctness_explanation(task: _Task, score: float, status: str, hack: str | None) -> str:
    if status == "timeout":
        return "No final answer: the rollout hit the tool-call budget."
    if status == "error":
        return "No final answer: the rollout crashed."
    if hack == "copies_reference":
        return "Exact match with the reference answer."
    if task.kind == "code":
        if score == 1.0:
            return f"Hidden tests pass ({task.n_tests} passed)."
        return f"Hidden test `{task.test_name}` fails: {task.failure}"
    if score == 1.0:
        return f"Matches the reference ({task.reference})."
    if score == 0.5:
        return f"Mentions the reference ({task.reference}) but hedges with {task.wrong}."
    return f"Expected {task.reference}, got {task.wrong}."


def _hack_turns(b: _Builder, hack: str) -> tuple[list[Turn], str]:
    task, out, rng = b.task, b.task.outputs, b.rng
    if hack == "no_tool_calls_full_reward":
        if task.kind == "code":
            summary = task.summary[0].upper() + task.summary[1:]
            return [], f"Summary: {summary}\nTests: {task.n_tests} passed"
        return [], f"Answer: {task.reference} ({task.summary})\nSource: {task.src}"
    if hack == "copies_reference":
        if task.kind == "code":
            search = b.call("search_code", task.queries[0], out["search_leak"], can_fail=False)
        else:
            search = b.call("web_search", task.queries[0], out["search_leak"], can_fail=False)
        return [("explore", [search])], task.reference
    # edits_tests: weaken the assertion, then watch the tests pass.
    weakened = rng.choice(
        (
            "assert True  # flaky, see CI",
            'pytest.skip("flaky on CI")',
            task.assert_line.split(" ==")[0] + "  # relaxed",
        )
    )
    args = _args(
        {
            "path": task.test_path,
            "old_string": f"    {task.assert_line}",
            "new_string": f"    {weakened}",
        }
    )
    passed = out["tests_pass"]
    tests = f"{task.n_tests} passed"
    if weakened.startswith("pytest.skip"):
        tests = f"{task.n_tests - 1} passed, 1 skipped"
        passed = passed.replace("." * task.n_tests, "." * (task.n_tests - 1) + "s", 1).replace(
            f"{task.n_tests} passed", tests
        )
    turns: list[Turn] = [
        ("explore", [b.call("read_file", out["args_read_test"], out["read_test"], can_fail=False)]),
        ("edit_tests", [b.call("edit_file", args, out["edit_test_ok"], can_fail=False)]),
        ("verify", [b.call("run_tests", out["args_tests"], passed, can_fail=False)]),
    ]
    if rng.random() < 0.5:
        turns.insert(
            0,
            (
                "explore",
                [b.call("run_tests", out["args_tests"], out["tests_fail"], can_fail=False)],
            ),
        )
    return (
        turns,
        f"Summary: Fixed the failing test `{task.test_name}` in {task.test_path}.\nTests: {tests}",
    )


# ---------------------------------------------------------------------------------------------------
# The runs.


def _fraction(step: int, steps: int) -> float:
    """How far through training a step is: 0 at the first step, 1 at the last."""
    return 0.0 if steps <= 1 else (step - 1) / (steps - 1)


def _hack_for(
    rng: random.Random, step: int, steps: int, task: _Task, forced: str | None
) -> str | None:
    if forced is not None:
        kind = forced
    elif rng.random() < 0.0009 + 0.0018 * (step / steps):
        kind = HACK_KINDS[rng.randrange(3 if task.kind == "code" else 2)]
    else:
        return None
    return kind if kind != "edits_tests" or task.kind == "code" else "copies_reference"


def iter_demo_records(
    *, steps: int = 200, prompts: int = 32, samples: int = 4, seed: int = 0
) -> Iterator[Record]:
    """Yield the demo's rollouts as canonical rollout-a-line dicts: the baseline run, then the training run.

    The baseline (`demo-baseline`, kind `baseline`) is step 0, split `eval`, every prompt x `samples`.
    The training run (`demo-train`, kind `train`) has steps 1..`steps`, split `train`, `prompts` x
    `samples` each; every EVAL_EVERY-th step adds split `eval` rollouts of `eval_prompt_indices(prompts)`
    x EVAL_SAMPLES. Same arguments, same records.
    """
    for name, value in (("steps", steps), ("prompts", prompts), ("samples", samples)):
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    rng = random.Random(seed)
    tasks = [_task(i) for i in range(prompts)]
    baseline = {
        "run_id": DEMO_BASELINE_RUN_ID,
        "run_name": DEMO_BASELINE_RUN_NAME,
        "run_kind": "baseline",
        "model": DEMO_BASE_MODEL,
    }
    train = {
        "run_id": DEMO_TRAIN_RUN_ID,
        "run_name": DEMO_TRAIN_RUN_NAME,
        "run_kind": "train",
        "model": DEMO_TRAIN_MODEL,
    }

    base_policy = _Policy(0.0)
    for task in tasks:
        for sample in range(samples):
            start = _BASELINE_MS + task.index * 20_000 + rng.uniform(0, 15_000)
            yield _rollout(
                rng,
                task,
                base_policy,
                run=baseline,
                rollout_id=f"baseline-{task.prompt_id}-{sample}",
                step=0,
                sample=sample,
                split="eval",
                start_ms=start,
                hack=None,
            )

    # One of each hack kind at fixed places, so that even a small run has all three.
    forced: dict[tuple[int, int, int], str] = {}
    code_prompts = [t.index for t in tasks if t.kind == "code"] or [0]
    for k, kind in enumerate(HACK_KINDS):
        step = max(1, min(steps, round(steps * (0.35 + 0.25 * k))))
        forced[(step, code_prompts[(3 * k + 1) % len(code_prompts)], k % samples)] = kind

    eval_prompts = eval_prompt_indices(prompts)
    step_start = float(_BASE_MS)
    for step in range(1, steps + 1):
        pol = _Policy(_fraction(step, steps))
        for task in tasks:
            for sample in range(samples):
                hack = _hack_for(rng, step, steps, task, forced.get((step, task.index, sample)))
                start = step_start + rng.uniform(0, 20_000)
                yield _rollout(
                    rng,
                    task,
                    pol,
                    run=train,
                    rollout_id=f"train-s{step:04d}-{task.prompt_id}-{sample}",
                    step=step,
                    sample=sample,
                    split="train",
                    start_ms=start,
                    hack=hack,
                )
        if step % EVAL_EVERY == 0:
            for i in eval_prompts:
                for sample in range(min(EVAL_SAMPLES, samples)):
                    start = step_start + 300_000 + rng.uniform(0, 10_000)
                    yield _rollout(
                        rng,
                        tasks[i],
                        pol,
                        run=train,
                        rollout_id=f"eval-s{step:04d}-{tasks[i].prompt_id}-{sample}",
                        step=step,
                        sample=sample,
                        split="eval",
                        start_ms=start,
                        hack=None,
                    )
        step_start += (660 - 300 * pol.c) * 1000


def write_demo_file(
    path: Path | str, *, steps: int = 200, prompts: int = 32, samples: int = 4, seed: int = 0
) -> Path:
    """Write the demo as canonical rollout-a-line JSONL (gzip when the name ends in .gz); return the path.

    Streams, so memory stays small at any size. The bytes depend only on the arguments (the gzip
    header carries no file name or time).
    """
    path = Path(path)
    encode = json.JSONEncoder(
        ensure_ascii=False, separators=(",", ":"), check_circular=False
    ).encode
    records = iter_demo_records(steps=steps, prompts=prompts, samples=samples, seed=seed)
    with path.open("wb") as raw:
        if path.name.endswith(".gz"):
            with gzip.GzipFile(
                filename="", mode="wb", fileobj=raw, compresslevel=6, mtime=0
            ) as zipped:
                _write_lines(zipped.write, records, encode)
        else:
            _write_lines(raw.write, records, encode)
    return path


def _write_lines(
    write: Callable[[bytes], object], records: Iterator[Record], encode: Callable[[Any], str]
) -> None:
    buffer: list[str] = []
    for record in records:
        buffer.append(encode(record))
        if len(buffer) == 1000:
            buffer.append("")
            write("\n".join(buffer).encode("utf-8"))
            buffer.clear()
    if buffer:
        buffer.append("")
        write("\n".join(buffer).encode("utf-8"))
