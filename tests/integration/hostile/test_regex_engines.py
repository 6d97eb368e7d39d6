"""A namespaced tenant's regular expressions (KIP-848 ``subscribed_topic_regex``,
ListTransactions' ``transactional_id_pattern``) against the engines the brokers really
use: ``java.util.regex`` and RE2J, from Kafka's own jars.

``Namespace.regex_to_cluster`` confines a pattern as ``<prefix>(?:pattern)``. When it
only checked the pattern with Python's ``re``, a pattern balanced for Python closed the
group for the broker where the engines disagree on where a character class ends:
``[[:alpha:](])|.*|([[:alpha:])]`` became ``acme\\.(?:[[:alpha:](])|.*|(…)``, which both
Java and RE2J read as "…or anything": every tenant's topics and transactional ids
(``[a[b](])|.*|([a[b])]``: Java alone). Each hostile pattern must be refused, or match
no foreign name in either engine; ordinary patterns must keep working in both.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from gateway.devstack.kafka_dist import ensure_kafka, java_classpath, java_executable
from gateway.namespaces.names import NameRefused, Namespace

NS = Namespace("acme", "acme.")
FOREIGN = ["victim.orders", "victim.tx-1", "acme", "acmex.orders", "ACME.orders", "orders"]
HOSTILE = [
    "[[:alpha:](])|.*|([[:alpha:])]",  # RE2J and Java: class ends later than Python's
    "[a[b](])|.*|([a[b])]",  # Java: nested class union
    "[a-z&&[^b](])|.*|([a-z&&[^b])]",  # Java: intersection with a nested class
    "(?x)[a#](\n])|.*|([b#])\n]",  # Java: comments inside a class in COMMENTS mode
    "[]a](])|.*|([]a])]",
    "[^]a](])|.*|([^]a])]",
    ")|.*|(",
    "a)|(.*",
    "\\Q)|.*|(\\E",
    "(?<=x)|.*",
    "x\\)|.*|\\(",  # escaped: stays inside
    "[)]|.*|[(]",  # classes: stays inside
    "(?i)a|.*",
    ".*",
]
ORDINARY = {"ord.*": "acme.orders", "[a-z]+": "acme.orders", "o(r|x)d[^x]*": "acme.orders",
            "a|orders": "acme.orders", "[\\[]x": "acme.[x"}  # fmt: skip

CHECK = """
import java.nio.file.*;
import java.util.*;
public class Check {
  public static void main(String[] a) throws Exception {
    List<String> lines = Files.readAllLines(Path.of(a[0]));
    String[] names = lines.get(0).split("\\u0001", -1);
    for (int i = 1; i < lines.size(); i++) {
      String regex = new String(Base64.getDecoder().decode(lines.get(i)), "UTF-8");
      StringBuilder out = new StringBuilder();
      try {
        java.util.regex.Pattern p = java.util.regex.Pattern.compile(regex);
        for (String n : names) if (p.matcher(n).matches()) out.append("java:" + n + " ");
      } catch (Exception e) { out.append("java-error "); }
      try {
        com.google.re2j.Pattern p = com.google.re2j.Pattern.compile(regex);
        for (String n : names) if (p.matcher(n).matches()) out.append("re2j:" + n + " ");
      } catch (Exception e) { out.append("re2j-error "); }
      System.out.println(out.toString().trim());
    }
  }
}
"""


def _engines(regexes: list[str], names: list[str], work: Path) -> list[str]:
    """For each regex, what the brokers' two engines say: ``java:<name>`` /
    ``re2j:<name>`` for each full match, ``<engine>-error`` when it does not compile."""
    import base64

    source = work / "Check.java"
    source.write_text(CHECK)
    data = work / "regexes.txt"
    lines = ["\x01".join(names)] + [base64.b64encode(r.encode()).decode() for r in regexes]
    data.write_text("\n".join(lines) + "\n")
    done = subprocess.run(
        [java_executable(), "-cp", java_classpath(ensure_kafka()), str(source), str(data)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    answers = done.stdout.splitlines()
    assert len(answers) == len(regexes), done.stdout
    return answers


def test_hostile_patterns_match_nothing_outside_the_namespace(tmp_path: Path) -> None:
    confined: dict[str, str] = {}
    for pattern in HOSTILE:
        try:
            confined[pattern] = NS.regex_to_cluster(pattern)
        except NameRefused:
            continue
    answers = _engines(list(confined.values()), FOREIGN, tmp_path)
    escaped = {
        pattern: answer
        for pattern, answer in zip(confined, answers, strict=True)
        if any(word.split(":", 1)[0] in ("java", "re2j") and ":" in word
               for word in answer.split())
    }  # fmt: skip
    assert not escaped, json.dumps(escaped, indent=1)


def test_ordinary_patterns_still_match_inside_in_both_engines(tmp_path: Path) -> None:
    regexes = [NS.regex_to_cluster(p) for p in ORDINARY]
    answers = _engines(regexes, list(ORDINARY.values()) + FOREIGN, tmp_path)
    for (pattern, name), answer in zip(ORDINARY.items(), answers, strict=True):
        words = answer.split()
        assert f"java:{name}" in words and f"re2j:{name}" in words, (pattern, answer)
        assert all(w.split(":", 1)[1] not in FOREIGN for w in words if ":" in w), answer
