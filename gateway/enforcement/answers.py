"""Checks on what the broker answered, where the broker itself resolves what a request
touches (topic ids, "all" forms, group members' topics): what the principal may not
describe is refused or left out before the client sees it (decision 0022)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from ..authz.model import Operation as Op
from ..authz.model import ResourceType as R
from .mirror import list_item_type, mirror
from .toolkit import TOPIC_DENIED, named
from .verdict import Check, Merge, Verdict


def describable(check: Check) -> Callable[[Any], bool]:
    """Is this entry's topic (named as the broker named it) describable?"""

    def visible(t: Any) -> bool:
        name = getattr(t, "name", None) or getattr(t, "topic_name", None)
        return name is not None and check(R.TOPIC, name, Op.DESCRIBE)

    return visible


def guarded(verdict: Verdict, guard: Merge) -> Verdict:
    """``verdict`` with ``guard`` applied to the broker's response before its own merge:
    the broker resolves ids, "all" forms and regexes; what it answers is checked again."""
    if verdict.local is not None or verdict.forward is None:
        return verdict
    merge = guard if verdict.merge is None else then(guard, verdict.merge)
    return dataclasses.replace(verdict, merge=merge)


def then(first: Merge, second: Merge) -> Merge:
    return lambda response: second(first(response))


def metadata_guard(visible: Callable[[Any], bool]) -> Merge:
    """Refuse (29, no name) every topic the broker answered that may not be described,
    whatever the request named it by (a topic id resolves to another tenant's topic)."""

    def guard(response: Any) -> Any:
        item_cls = list_item_type(type(response), "topics")
        kept = tuple(
            t if visible(t) or (t.name is None and int(t.error_code) != 0)
            else mirror(item_cls, named(topic_id=getattr(t, "topic_id", None)), TOPIC_DENIED)
            for t in response.topics
        )  # fmt: skip
        return dataclasses.replace(response, topics=kept)

    return guard


def members_guard(check: Check) -> Merge:
    visible = describable(check)

    def assignment(a: Any) -> Any:
        kept = tuple(tp for tp in a.topic_partitions if visible(tp))
        return dataclasses.replace(a, topic_partitions=kept)

    def member(m: Any) -> Any:
        names = tuple(n for n in m.subscribed_topic_names if check(R.TOPIC, n, Op.DESCRIBE))
        return dataclasses.replace(
            m,
            subscribed_topic_names=names,
            assignment=assignment(m.assignment),
            target_assignment=assignment(m.target_assignment),
        )

    def guard(response: Any) -> Any:
        groups = tuple(
            dataclasses.replace(g, members=tuple(member(m) for m in g.members))
            for g in response.groups
        )
        return dataclasses.replace(response, groups=groups)

    return guard


def partitions_guard(visible: Callable[[Any], bool]) -> Merge:
    """DescribeTopicPartitions: only describable topics, and no cursor naming another."""

    def guard(response: Any) -> Any:
        kept = tuple(t for t in response.topics if visible(t))
        cursor = response.next_cursor
        if cursor is not None and not visible(cursor):
            cursor = None  # it would name a topic the principal may not see
        return dataclasses.replace(response, topics=kept, next_cursor=cursor)

    return guard
