"""A topic id of another tenant asked for in Metadata is answered as an unknown id
(never "not authorized", which would confirm it exists)."""

from __future__ import annotations

import uuid

from kio.index import load_response_schema
from kio.schema.errors import ErrorCode

from gateway.namespaces.mappers import map_response
from gateway.namespaces.names import Namespace
from tests.integration.hostile.kafkamsg import build

NS = Namespace("acme", "acme.")


def _answer(*topics: dict[str, object]) -> object:
    return build(load_response_schema(3, 12), {"topics": list(topics)})


def test_foreign_id_is_unknown_and_own_topics_untouched() -> None:
    foreign, own = uuid.uuid4(), uuid.uuid4()
    answer = _answer(
        {"error_code": ErrorCode.topic_authorization_failed, "name": None, "topic_id": foreign},
        {"error_code": ErrorCode.none, "name": "acme.orders", "topic_id": own},
    )
    mapped = map_response(NS, 3, answer)
    codes = {t.topic_id: (t.error_code, t.name) for t in mapped.topics}  # type: ignore[attr-defined]
    assert codes == {foreign: (ErrorCode.unknown_topic_id, None), own: (ErrorCode.none, "orders")}


def test_nothing_to_hide_leaves_the_answer_as_it_is() -> None:
    answer = _answer(
        {"error_code": ErrorCode.none, "name": "acme.orders", "topic_id": uuid.uuid4()}
    )
    assert map_response(NS, 3, answer).topics[0].name == "orders"  # type: ignore[attr-defined]
